-- rate_status: the rate each queue of this table was last run with, and its
-- ready jobs now, for drain status ("rq: 40/s, 120 ready = 3 s").
-- Parameters: jobs_table (text).
-- Locks: none. Each queue's ready jobs are counted through the ready index.
SELECT r.queue, r.starts, r.period_seconds,
       (SELECT count(*) FROM {jobs} AS j
        WHERE j.queue = r.queue AND j.status = 'queued' AND j.run_at <= now()) AS ready
FROM {rates} AS r
WHERE r.jobs_table = %(jobs_table)s
ORDER BY r.queue
