-- jobs_list_running: the newest running jobs (highest id first), optionally of
-- one queue; for drain jobs --status running. The status is written out so the
-- running index (locked_until) WHERE status = 'running' matches: running jobs
-- are few (at most the runs' claims), so reading that index and sorting them
-- is cheap whatever the history. Columns as in jobs_list.
-- Parameters: queue (text or NULL), limit (int), error_length (int).
-- Locks: none.
SELECT id, queue, status, attempts, max_attempts,
       extract(epoch FROM run_at)::float8 AS run_at,
       extract(epoch FROM created_at)::float8 AS created_at,
       extract(epoch FROM locked_until)::float8 AS locked_until,
       left(last_error, %(error_length)s) AS last_error
FROM {jobs}
WHERE status = 'running'
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
ORDER BY id DESC
LIMIT %(limit)s
