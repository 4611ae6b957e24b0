-- cancel_ids: cancel jobs by id, without a
-- status outside the article's four (a hand-made table keeps its CHECK).
-- * a queued job becomes failed, last_error 'cancelled', and is never claimed;
-- * a running job is marked: no attempt left (max_attempts = attempts) and
--   last_error 'cancelled'. Its run learns it at its next lease renewal and the
--   handler sees job.cancel_requested; the attempt's own outcome is still
--   recorded (done stays done, an error fails it for good), and a release, a
--   snooze or an expired lease fails it instead of queueing it again;
-- * done and failed jobs are left as they are.
-- A claim racing the cancel is waited for (row locks, a few milliseconds), and
-- the row is then cancelled in the state the claim left it in.
-- drain cancel --dry-run sends this in a transaction it rolls back.
-- Parameters: ids (bigint[]).
-- Locks: the cancelled rows, for the length of this one statement.
UPDATE {jobs} AS j
SET status       = CASE WHEN j.status = 'queued' THEN 'failed' ELSE j.status END,
    max_attempts = CASE WHEN j.status = 'running' THEN j.attempts ELSE j.max_attempts END,
    locked_until = CASE WHEN j.status = 'queued' THEN NULL ELSE j.locked_until END,
    last_error   = 'cancelled'
WHERE j.status IN ('queued', 'running') AND j.id = ANY (%(ids)s::bigint[])
RETURNING j.id, j.status
