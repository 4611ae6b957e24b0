-- release: give back jobs this run claimed but never started (the budget ran out
-- or a signal arrived). They go straight back to queued with their attempt
-- given back, keep their run_at, and are claimable at once.
-- Parameters: ids (bigint[]), attempts (int[]), aligned.
-- Locks: the owned rows, for the length of this one statement.
UPDATE {jobs} AS j
SET status = 'queued', attempts = j.attempts - 1, locked_until = NULL
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS owned(id, attempts)
WHERE j.id = owned.id AND j.status = 'running' AND j.attempts = owned.attempts
RETURNING j.id
