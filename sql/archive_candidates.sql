-- archive_candidates: the done rows an archive batch would take, for a batch the
-- table refused as one statement (a NULL a hand-made queue table allowed and the
-- archive does not, a constraint or a trigger of the table's own): the rows are
-- then archived by ids, in halves, and the row refused alone is left where it
-- is (skipped by later batches), so one row never stops the archive.
-- Parameters: older_than (interval), limit (int), skip (bigint[]).
-- Locks: none.
SELECT id FROM {jobs}
WHERE status = 'done' AND created_at < now() - %(older_than)s
  AND id <> ALL (%(skip)s::bigint[])
LIMIT %(limit)s
