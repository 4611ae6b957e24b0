-- purge: delete one batch of archive rows archived more than older_than ago, in
-- one short transaction (drain purge --archive-older-than). The archive has no
-- index on archived_at (drain init makes none, and a hand-made archive may have
-- none either), so the batches walk the primary key upwards from the last id the
-- previous batch deleted (a keyset scan): the whole purge reads the archive
-- once, however many batches it takes.
-- Parameters: older_than (interval), after_id (bigint; 0 for the first batch),
-- limit (int).
-- Locks: the deleted rows (FOR UPDATE SKIP LOCKED).
WITH batch AS (
    SELECT id FROM {archive}
    WHERE archived_at < now() - %(older_than)s
      AND id > %(after_id)s::bigint
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), deleted AS (
    DELETE FROM {archive} AS a
    WHERE a.id = ANY (ARRAY(SELECT id FROM batch))
    RETURNING a.id
)
SELECT (SELECT count(*) FROM batch) AS matched,
       (SELECT count(*) FROM deleted) AS purged,
       (SELECT max(id) FROM batch) AS last_id
