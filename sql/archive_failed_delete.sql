-- archive_failed_delete: delete one batch of failed jobs whose last attempt was
-- due more than failed_after ago, for users who keep no archive (drain archive
-- --failed-after --archive-mode delete). Which jobs, why run_at, and the
-- keyset walk of the primary key: see archive_failed_move.
-- Parameters: failed_after (interval), after_id (bigint; 0 for the first
-- batch), limit (int).
-- Locks: the deleted rows (FOR UPDATE SKIP LOCKED).
WITH batch AS (
    SELECT id FROM {jobs}
    WHERE status = 'failed' AND run_at < now() - %(failed_after)s
      AND id > %(after_id)s::bigint
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), deleted AS (
    DELETE FROM {jobs} AS j
    WHERE j.id = ANY (ARRAY(SELECT id FROM batch))
    RETURNING j.id
)
SELECT (SELECT count(*) FROM batch) AS matched,
       (SELECT count(*) FROM deleted) AS archived,
       (SELECT max(id) FROM batch) AS last_id
