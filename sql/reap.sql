-- reap: running jobs whose lease has run out (or that have no lease at all,
-- which only a hand-edited row can have) go back to queued, or to failed when
-- they have used every attempt; last_error is kept, or set to 'lease expired'.
-- A requeued row keeps its expired locked_until as a mark: it came back from a
-- run that died, maybe because of this very job, maybe because of a batch-mate.
-- Claims take marked rows one at a time and run them alone (see claim), so a job
-- that kills its run every time cannot take its batch-mates' attempts with it.
-- A row failed for good keeps the mark too, so a fenced statement repeated after
-- a lost reply never takes the reaper's outcome for its own (see confirm_outcomes).
-- A row another transaction holds is passed over, not waited for (SKIP LOCKED): a
-- completion in flight is about to finish it, and a session that keeps a row
-- locked (a frozen run, a console left in a transaction) must not hold this run
-- at its first statement past its budget; a later run reaps what is left. A row
-- locked here is re-checked on its latest version, so a completion that
-- committed first is never undone. The update reaches the rows through one id
-- array, not a join, for a plan that does not hang on the statistics (see claim).
-- A row the statement refuses (a CHECK or a trigger of the table's own) would fail
-- it for every expired row: the runner then lists them (reap_expired.sql) and
-- reaps them by ids, in halves, failing the refused row alone.
-- Parameters: ids (bigint[]): NULL for every expired row, else only those.
-- Locks: the expired rows no one else holds, for the length of this one statement.
WITH expired AS MATERIALIZED (
    SELECT id
    FROM {jobs}
    WHERE status = 'running' AND (locked_until IS NULL OR locked_until < now())
      AND (%(ids)s::bigint[] IS NULL OR id = ANY (%(ids)s::bigint[]))
    FOR UPDATE SKIP LOCKED
), reaped AS (
    UPDATE {jobs} AS j
    SET status       = CASE WHEN j.attempts >= greatest(j.max_attempts, 1)
                            THEN 'failed' ELSE 'queued' END,
        locked_until = coalesce(j.locked_until, now()),
        last_error   = coalesce(j.last_error, 'lease expired')
    WHERE j.id = ANY (ARRAY(SELECT id FROM expired))
    RETURNING j.status
)
SELECT count(*) FILTER (WHERE status = 'queued') AS requeued,
       count(*) FILTER (WHERE status = 'failed') AS failed
FROM reaped
