-- drop_index: drop an INVALID index a failed CREATE INDEX CONCURRENTLY left
-- behind, so the step that makes it can build it again (CREATE INDEX ... IF NOT
-- EXISTS would otherwise skip the name and leave the invalid index in place).
-- Placeholders (identifiers, quoted by the driver): index (schema-qualified).
-- Locks: CONCURRENTLY, outside a transaction: none that holds back enqueues or claims.
DROP INDEX CONCURRENTLY IF EXISTS {index}
