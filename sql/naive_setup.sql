-- naive_setup: an index on run_at over the queued rows of the naive demo's table,
-- so the naive claim's subquery (ORDER BY run_at LIMIT 1 over every queue) reads
-- one index entry instead of sorting every queued row on each claim. It changes
-- how fast the wrong statement runs, not what it does wrong: the double claims
-- come from picking an id without locking it, whatever plan finds the id.
-- Kept for `drain demo --naive` only; drain's own claim uses the ready index.
-- Parameters: none.
-- Locks: SHARE on the naive table while the index builds (before any claim).
CREATE INDEX IF NOT EXISTS naive_jobs_run_at_idx ON {jobs} (run_at) WHERE status = 'queued'
