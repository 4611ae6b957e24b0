-- run_durations: how long one queue's recent runs worked, for drain plan --dsn:
-- the number of runs recorded and the 95th percentile of their seconds (NULL
-- when there are none), so a plan uses measured run times instead of a guess.
-- Parameters: jobs_table (text, the display name schema.table), seconds (float,
-- how far back to look, on the database clock).
-- Locks: none (a plain read of the run table).
SELECT count(*) AS runs,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY seconds) AS p95
FROM {runs}
WHERE jobs_table = %(jobs_table)s
  AND started_at >= now() - make_interval(secs => %(seconds)s)
