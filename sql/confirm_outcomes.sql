-- confirm_outcomes: after a reconnect, what became of attempts whose fenced
-- statement was sent again and touched no row. The first send may have committed
-- before its reply was lost: then the row shows this very attempt finished
-- (not running, same attempts, no lease; a reaped row keeps its expired lease as
-- a mark, so it does not pass for ours). Those outcomes are ours; the rest were
-- really lost.
-- Parameters: ids (bigint[]), attempts (int[]), aligned.
-- Locks: none.
SELECT j.id, j.status
FROM {jobs} AS j
JOIN unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS sent(id, attempts)
  ON j.id = sent.id AND j.attempts = sent.attempts
WHERE j.status <> 'running' AND j.locked_until IS NULL
