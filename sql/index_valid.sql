-- index_valid: whether an index of this name in the schema is valid; no row when
-- there is none. A CREATE INDEX CONCURRENTLY that failed (a lock timeout, a
-- cancel, a duplicate under a unique index) leaves an INVALID index of its name.
-- Parameters: schema, index (plain names).
-- Locks: none.
SELECT x.indisvalid
FROM pg_class AS i
JOIN pg_namespace AS n ON n.oid = i.relnamespace
JOIN pg_index AS x ON x.indexrelid = i.oid
WHERE n.nspname = %(schema)s AND i.relname = %(index)s
