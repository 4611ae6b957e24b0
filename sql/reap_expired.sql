-- reap_expired: the running rows whose lease has run out (or that have none), with
-- their attempt, for a reap the table refused as one statement (see reap.sql):
-- they are then reaped by ids, in halves, and the row refused alone is failed.
-- Parameters: none.
-- Locks: none.
SELECT id, attempts
FROM {jobs}
WHERE status = 'running' AND (locked_until IS NULL OR locked_until < now())
ORDER BY id
