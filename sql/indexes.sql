-- indexes: the indexes on the queue table with their definitions, so init can
-- say whether the ready index (and drain's running index) are in place.
-- Parameters: table_oid (oid).
-- Locks: none.
SELECT i.relname, pg_get_indexdef(i.oid)
FROM pg_index AS x
JOIN pg_class AS i ON i.oid = x.indexrelid
WHERE x.indrelid = %(table_oid)s::oid
ORDER BY i.relname
