-- table_health: the queue table's dead and live row counts, for the vacuum
-- decision when archiving is off (otherwise the archive statement reports them).
-- Parameters: table_oid (oid).
-- Locks: none.
SELECT coalesce(pg_stat_get_dead_tuples(%(table_oid)s::oid), 0) AS dead_rows,
       coalesce(pg_stat_get_live_tuples(%(table_oid)s::oid), 0) AS live_rows
