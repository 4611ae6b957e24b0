-- demo_check: did every job of the demo queue run exactly once? The jobs and
-- how many are done, from the queue table; the executions, the jobs executed,
-- the most executions of one job and the jobs executed more than once, from the
-- handler's record; and the time from the first execution to the last.
-- Parameters: queue (text).
-- Locks: none.
WITH per_job AS (
    SELECT job_id, count(*) AS runs FROM drain_demo_executions GROUP BY job_id
)
SELECT (SELECT count(*) FROM {jobs} WHERE queue = %(queue)s) AS jobs,
       (SELECT count(*) FROM {jobs} WHERE queue = %(queue)s AND status = 'done') AS done,
       (SELECT coalesce(sum(runs), 0) FROM per_job)::bigint AS executions,
       (SELECT count(*) FROM per_job) AS jobs_executed,
       (SELECT coalesce(max(runs), 0) FROM per_job) AS most_executions,
       (SELECT count(*) FROM per_job WHERE runs > 1) AS executed_more_than_once,
       (SELECT extract(epoch FROM max(ran_at) - min(ran_at))::float8
          FROM drain_demo_executions) AS span_seconds
