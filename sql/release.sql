-- release: give back jobs this run claimed but never started (the budget ran out
-- or a signal arrived, or the run set them aside to run a suspect job alone).
-- They go straight back to queued with their attempt given back, keep their
-- run_at, and are claimable at once. A job released with keep_mark keeps the
-- reaper's mark (a locked_until on a queued row), so it is still run alone.
-- Parameters: ids (bigint[]), attempts (int[]), keep_marks (boolean[]), aligned.
-- Locks: the owned rows, for the length of this one statement.
UPDATE {jobs} AS j
SET status = 'queued', attempts = j.attempts - 1,
    locked_until = CASE WHEN owned.keep_mark THEN now() END
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(keep_marks)s::boolean[])
     AS owned(id, attempts, keep_mark)
WHERE j.id = owned.id AND j.status = 'running' AND j.attempts = owned.attempts
RETURNING j.id
