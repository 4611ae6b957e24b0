-- jobs_list_queued: the newest queued jobs (highest id first), optionally of one
-- queue; for drain jobs --status queued. The status is written out, not a
-- parameter, so the ready index (queue, run_at) WHERE status = 'queued' matches
-- under any plan: with a few queued jobs among a large history the planner reads
-- that index alone and sorts what it found; with a deep backlog it walks the
-- primary key backwards and stops after limit rows. Columns as in jobs_list.
-- Parameters: queue (text or NULL), limit (int), error_length (int).
-- Locks: none.
SELECT id, queue, status, attempts, max_attempts,
       extract(epoch FROM run_at)::float8 AS run_at,
       extract(epoch FROM created_at)::float8 AS created_at,
       extract(epoch FROM locked_until)::float8 AS locked_until,
       left(last_error, %(error_length)s) AS last_error
FROM {jobs}
WHERE status = 'queued'
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
ORDER BY id DESC
LIMIT %(limit)s
