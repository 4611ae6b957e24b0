-- reap: running jobs whose lease has run out (or that have no lease at all,
-- which only a hand-edited row can have) go back to queued, or to failed when
-- they have used every attempt; last_error is kept, or set to 'lease expired'.
-- A requeued row keeps its expired locked_until as a mark: it came back from a
-- run that died, maybe because of this very job, maybe because of a batch-mate.
-- Claims take marked rows one at a time and run them alone (see claim), so a job
-- that kills its run every time cannot take its batch-mates' attempts with it.
-- A row failed for good keeps the mark too, so a fenced statement repeated after
-- a lost reply never takes the reaper's outcome for its own (see confirm_outcomes).
-- A concurrent completion and this statement serialize on the row: whichever
-- comes second re-checks status and finds the row no longer matches.
-- A row the statement refuses (a CHECK or a trigger of the table's own) would fail
-- it for every expired row: the runner then lists them (reap_expired.sql) and
-- reaps them by ids, in halves, failing the refused row alone.
-- Parameters: ids (bigint[]): NULL for every expired row, else only those.
-- Locks: the expired rows, for the length of this one statement.
WITH reaped AS (
    UPDATE {jobs}
    SET status       = CASE WHEN attempts >= greatest(max_attempts, 1)
                            THEN 'failed' ELSE 'queued' END,
        locked_until = coalesce(locked_until, now()),
        last_error   = coalesce(last_error, 'lease expired')
    WHERE status = 'running' AND (locked_until IS NULL OR locked_until < now())
      AND (%(ids)s::bigint[] IS NULL OR id = ANY (%(ids)s::bigint[]))
    RETURNING status
)
SELECT count(*) FILTER (WHERE status = 'queued') AS requeued,
       count(*) FILTER (WHERE status = 'failed') AS failed
FROM reaped
