-- status_queues: one row per queue with its jobs counted by state: queued and
-- ready now, queued for later, running, running with an expired lease (or none),
-- done and failed; the age of the oldest ready job and the wait until the next
-- scheduled one, both in seconds on the database clock (NULL when there is none,
-- and non-finite run_at values are counted but left out of the ages).
-- Parameters: none.
-- Locks: none (a plain read; it scans the whole table, as counting must).
SELECT queue,
       count(*) FILTER (WHERE status = 'queued' AND run_at <= now()) AS ready,
       count(*) FILTER (WHERE status = 'queued' AND run_at > now()) AS scheduled,
       count(*) FILTER (WHERE status = 'running') AS running,
       count(*) FILTER (WHERE status = 'running'
                          AND (locked_until IS NULL OR locked_until < now())) AS expired,
       count(*) FILTER (WHERE status = 'done') AS done,
       count(*) FILTER (WHERE status = 'failed') AS failed,
       extract(epoch FROM now() - min(run_at) FILTER (
           WHERE status = 'queued' AND run_at <= now() AND isfinite(run_at)))::float8
           AS oldest_ready_seconds,
       extract(epoch FROM min(run_at) FILTER (
           WHERE status = 'queued' AND run_at > now() AND isfinite(run_at)) - now())::float8
           AS next_scheduled_seconds
FROM {jobs}
GROUP BY queue
ORDER BY queue
