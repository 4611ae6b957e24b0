-- status_runs_failed: how many jobs the runs recorded for one queue table failed
-- for good (a handler's last attempt, a permanent error, a payload refused at
-- claim) in the runs that finished within the window, on the database clock.
-- Parameters: jobs_table (text: schema.table as the run recorded it), window
-- (interval).
-- Locks: none (reads this queue table's runs through the (jobs_table, started_at)
-- index).
SELECT coalesce(sum(failed), 0)::bigint AS failed
FROM {runs}
WHERE jobs_table = %(jobs_table)s AND finished_at > now() - %(window)s
