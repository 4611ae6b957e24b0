-- status_expired: running jobs whose lease has run out (or that have none), the
-- longest expired first: the next run reaps them. Seconds on the database clock.
-- Parameters: limit (int).
-- Locks: none (reads through the running index).
SELECT id, queue, attempts, greatest(max_attempts, 1) AS max_attempts,
       CASE WHEN locked_until IS NULL OR NOT isfinite(locked_until) THEN NULL
            ELSE extract(epoch FROM now() - locked_until)::float8 END AS expired_seconds
FROM {jobs}
WHERE status = 'running' AND (locked_until IS NULL OR locked_until < now())
ORDER BY locked_until NULLS FIRST, id
LIMIT %(limit)s
