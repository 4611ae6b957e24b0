-- backlog: the ready jobs of the run's queues at its end, and how long the oldest
-- has waited, for what a run reports before it exits (metrics, autoscalers).
-- Read while the database is awake anyway; on the ready index.
-- Parameters: queues (text[]).
-- Locks: none.
SELECT queue, count(*)::bigint, extract(epoch FROM now() - min(run_at))::float8
FROM {jobs}
WHERE status = 'queued' AND run_at <= now() AND queue = ANY (%(queues)s::text[])
GROUP BY queue
