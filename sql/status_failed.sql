-- status_failed: failed jobs with their last error, newest first. The table keeps
-- no failure time, so "newest" is the latest run_at (the time the last attempt
-- was due), then the highest id. The error text is cut on the server so a huge
-- one never crosses the wire; drain redacts it before showing it.
-- Parameters: limit (int), error_length (int).
-- Locks: none.
SELECT id, queue, attempts, left(last_error, %(error_length)s) AS last_error,
       CASE WHEN isfinite(run_at) THEN extract(epoch FROM now() - run_at)::float8 END
           AS due_seconds_ago
FROM {jobs}
WHERE status = 'failed'
ORDER BY run_at DESC, id DESC
LIMIT %(limit)s
