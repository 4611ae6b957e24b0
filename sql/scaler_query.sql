-- scaler_query: the backlog an autoscaler polls (a KEDA postgresql trigger's
-- query, printed by drain init --print-scaler-query): the jobs ready now.
-- Counted up to a bound (a LIMIT inside the subquery), so a huge backlog costs
-- no more than the bound's index entries; the scaler only needs to know that
-- there are more jobs than its runners can take. Read on the ready index alone
-- (an Index Only Scan: queue, run_at, with status = 'queued' its predicate),
-- never the payload; the scaler's role is granted only those three columns, so
-- a narrower form (AND queue = 'emails') stays within the grant.
-- Placeholders: jobs (identifier), bound (a literal: the query takes no parameters).
-- Locks: none.
SELECT count(*) FROM (
    SELECT 1 FROM {jobs}
    WHERE status = 'queued' AND run_at <= now()
    LIMIT {bound}
) AS ready;
