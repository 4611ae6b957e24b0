-- archive_delete: delete one batch of done jobs older than the retention (by
-- created_at), in one short transaction, for users who keep no archive. It also
-- reports the queue table's dead and live row counts (see archive_move).
-- Parameters: older_than (interval), limit (int), table_oid (oid); ids (bigint[]:
-- NULL for any row, else only those) and skip (bigint[]: rows the archive table
-- refused, left where they are; see archive_candidates.sql).
-- The batch's rows are reached through the primary key, by one array of ids
-- (see claim.sql: a join with the batch hashed a scan of the whole table).
-- Locks: the deleted rows (FOR UPDATE SKIP LOCKED).
WITH batch AS (
    SELECT id FROM {jobs}
    WHERE status = 'done' AND created_at < now() - %(older_than)s
      AND (%(ids)s::bigint[] IS NULL OR id = ANY (%(ids)s::bigint[]))
      AND id <> ALL (%(skip)s::bigint[])
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), deleted AS (
    DELETE FROM {jobs} AS j
    WHERE j.id = ANY (ARRAY(SELECT id FROM batch))
    RETURNING 1
)
SELECT (SELECT count(*) FROM deleted) AS archived, health.dead_rows, health.live_rows
FROM (SELECT coalesce(pg_stat_get_dead_tuples(%(table_oid)s::oid), 0) AS dead_rows,
             coalesce(pg_stat_get_live_tuples(%(table_oid)s::oid), 0) AS live_rows) AS health
