-- job_show: one job, whole, by its id (the primary key); for drain jobs show.
-- Times come as epoch seconds (see jobs_list); the payload as text, parsed and
-- redacted by drain; the error whole, as stored.
-- Parameters: id (bigint).
-- Locks: none.
SELECT id, queue, status, attempts, max_attempts,
       extract(epoch FROM run_at)::float8 AS run_at,
       extract(epoch FROM created_at)::float8 AS created_at,
       extract(epoch FROM locked_until)::float8 AS locked_until,
       last_error,
       payload::text AS payload,
       extract(epoch FROM now())::float8 AS database_time
FROM {jobs}
WHERE id = %(id)s::bigint
