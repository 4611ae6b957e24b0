-- archive_move: move one batch of done jobs older than the retention (by
-- created_at) into the archive table, in one short transaction. It also reports
-- the queue table's dead and live row counts, so the run can decide whether to
-- vacuum without another round trip.
-- Parameters: older_than (interval), limit (int), table_oid (oid); ids (bigint[]:
-- NULL for any row, else only those) and skip (bigint[]: rows the archive table
-- refused, left where they are; see archive_candidates.sql).
-- The batch's rows are reached through the primary key, by one array of ids
-- (see claim.sql: a join with the batch hashed a scan of the whole table).
-- Locks: the moved rows (FOR UPDATE SKIP LOCKED, so two runs never fight over a batch).
WITH batch AS (
    SELECT id FROM {jobs}
    WHERE status = 'done' AND created_at < now() - %(older_than)s
      AND (%(ids)s::bigint[] IS NULL OR id = ANY (%(ids)s::bigint[]))
      AND id <> ALL (%(skip)s::bigint[])
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), moved AS (
    DELETE FROM {jobs} AS j
    WHERE j.id = ANY (ARRAY(SELECT id FROM batch))
    RETURNING j.id, j.queue, j.payload, j.status, j.run_at, j.attempts, j.max_attempts,
              j.locked_until, j.last_error, j.created_at
), inserted AS (
    INSERT INTO {archive} (id, queue, payload, status, run_at, attempts, max_attempts,
                           locked_until, last_error, created_at, archived_at)
    SELECT id, queue, payload, status, run_at, attempts, max_attempts,
           locked_until, last_error, created_at, now()
    FROM moved
    RETURNING 1
)
SELECT (SELECT count(*) FROM inserted) AS archived, health.dead_rows, health.live_rows
FROM (SELECT coalesce(pg_stat_get_dead_tuples(%(table_oid)s::oid), 0) AS dead_rows,
             coalesce(pg_stat_get_live_tuples(%(table_oid)s::oid), 0) AS live_rows) AS health
