-- status_runs: the latest runs recorded for one queue table, newest first, with
-- how long ago each finished on the database clock.
-- Parameters: jobs_table (text: schema.table as the run recorded it), limit (int).
-- Locks: none (reads through the run table's (jobs_table, started_at) index).
SELECT started_at,
       extract(epoch FROM now() - finished_at)::float8 AS finished_seconds_ago,
       seconds, claimed, done, retried, failed, lost, reaped, released, archived,
       exit_reason, exit_code, error
FROM {runs}
WHERE jobs_table = %(jobs_table)s
ORDER BY started_at DESC
LIMIT %(limit)s
