-- run_gap: the longest gap between the starts of this table's runs over the last
-- day, up to now: how late a run may come under the schedule the runs are on.
-- A recurring job with catch-up "none" enqueues a fire only if it came due
-- within this gap; one older than that was missed (the compute was asleep, no
-- run came) and is skipped. NULL when no run was recorded in the last day.
-- Parameters: jobs_table (text, schema.table).
-- Locks: none.
SELECT max(gap)
  FROM (SELECT extract(epoch FROM started - lag(started) OVER (ORDER BY started)) AS gap
          FROM (SELECT started_at AS started
                  FROM {runs}
                 WHERE jobs_table = %(jobs_table)s AND started_at > now() - interval '1 day'
                UNION ALL
                SELECT now()) AS starts) AS gaps
