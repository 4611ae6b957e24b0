-- confirm_outcomes: after a reconnect, what became of attempts whose fenced
-- statement was sent again and touched no row. The first send may have committed
-- before its reply was lost: then the row shows this very attempt finished
-- (not running, same attempts, no lease; a reaped row keeps its expired lease as
-- a mark, so it does not pass for ours). Those outcomes are ours; the rest were
-- really lost.
-- Each row is looked up through the primary key, one probe per attempt sent:
-- joined on the ids alone, the planner hashed a scan of the whole table.
-- Parameters: ids (bigint[]), attempts (int[]), aligned.
-- Locks: none.
SELECT j.id, j.status
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS sent(id, attempts)
CROSS JOIN LATERAL (
    SELECT id, status FROM {jobs}
    WHERE id = sent.id AND attempts = sent.attempts
      AND status <> 'running' AND locked_until IS NULL
    OFFSET 0  -- a subquery of its own, so it stays one probe per attempt
) AS j
