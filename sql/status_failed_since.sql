-- status_failed_since: how many failed jobs in the queue table are known to have
-- failed within the window. The table keeps no failure time, but a job fails
-- only on an attempt claimed at or after its run_at (the time that attempt was
-- due, which claim, fail and reap leave as it was), so a failed job with
-- run_at inside the window failed inside it. A job that waited in a backlog
-- before its last attempt may have failed in the window with an older run_at;
-- status_runs_failed counts those when a recorded run failed them.
-- Parameters: window (interval).
-- Locks: none (a plain read; it scans the table, as counting failed jobs must).
SELECT count(*) AS failed
FROM {jobs}
WHERE status = 'failed' AND run_at > now() - %(window)s
