-- migration_state: what drain migrate must know of the queue table's indexes and
-- constraints to tell a step done from one to apply or finish: each index with
-- whether it is valid (a CREATE INDEX CONCURRENTLY that failed leaves an INVALID
-- one behind) and its definition, each constraint with whether it is validated.
-- Parameters: table_oid (oid).
-- Locks: none.
SELECT 'index' AS kind, i.relname::text AS name, x.indisvalid AS valid,
       pg_get_indexdef(i.oid) AS definition
FROM pg_index AS x
JOIN pg_class AS i ON i.oid = x.indexrelid
WHERE x.indrelid = %(table_oid)s::oid
UNION ALL
SELECT 'constraint', c.conname::text, c.convalidated, pg_get_constraintdef(c.oid)
FROM pg_constraint AS c
WHERE c.conrelid = %(table_oid)s::oid
ORDER BY 1, 2
