-- release: give back jobs this run claimed but never started (the budget ran out
-- or a signal arrived, or the run set them aside to run a suspect job alone).
-- They go straight back to queued, keep their run_at, and are claimable at once.
-- The attempt the claim used is given back through max_attempts (one more try,
-- as snooze does; a max_attempts below 1 counts as 1, and one at the int's limit
-- stays there), never by lowering
-- attempts: attempts is the fencing token, and a release is a statement the
-- session repeats after a lost connection (drain/db.py Session.call). Had the
-- first send committed before its reply was lost, with attempts - 1, another run
-- could claim the job in between and hold attempts - 1 + 1, the very number this
-- run still holds: the repeated release would match that run's row and take its
-- job from under it. With attempts kept, the counter only goes up, so the repeat
-- finds no row of ours and changes nothing, and no attempt number is ever handed
-- out twice.
-- A job released with keep_mark keeps the reaper's mark (a locked_until on a
-- queued row), so it is still run alone. A job cancelled while it was claimed
-- (cancel.sql's mark: last_error 'cancelled' and no attempt left) is not given
-- back: it becomes failed, as a queued job that is cancelled does.
-- Parameters: ids (bigint[]), attempts (int[]), keep_marks (boolean[]), aligned.
-- Locks: the owned rows, for the length of this one statement.
UPDATE {jobs} AS j
SET status       = CASE WHEN j.last_error = 'cancelled' AND j.attempts >= greatest(j.max_attempts, 1)
                        THEN 'failed' ELSE 'queued' END,
    max_attempts = CASE WHEN j.last_error = 'cancelled' AND j.attempts >= greatest(j.max_attempts, 1)
                        THEN j.max_attempts
                        ELSE least(greatest(j.max_attempts, 1), 2147483646) + 1 END,
    locked_until = CASE WHEN j.last_error = 'cancelled' AND j.attempts >= greatest(j.max_attempts, 1)
                        THEN NULL WHEN owned.keep_mark THEN now() END
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(keep_marks)s::boolean[])
     AS owned(id, attempts, keep_mark)
WHERE j.id = owned.id AND j.status = 'running' AND j.attempts = owned.attempts
RETURNING j.id
