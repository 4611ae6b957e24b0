-- naive_check: what the naive claim (naive_claim.sql) did to its table: jobs
-- done, the most times one job was claimed (its attempts), how many jobs were
-- claimed more than once, how many are still queued, and all the claims that
-- updated a row.
-- Parameters: none.
-- Locks: none.
SELECT count(*) AS jobs,
       count(*) FILTER (WHERE status = 'done') AS done,
       coalesce(max(attempts), 0) AS most_claims,
       count(*) FILTER (WHERE attempts > 1) AS claimed_more_than_once,
       count(*) FILTER (WHERE status = 'queued') AS still_queued,
       coalesce(sum(attempts), 0) AS claims
FROM {jobs}
