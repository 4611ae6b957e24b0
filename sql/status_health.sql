-- status_health: the queue table's vacuum health from the statistics collector:
-- live and dead rows, when it was last vacuumed and analyzed (by autovacuum or
-- by hand, as seconds ago on the database clock), and its table and index sizes.
-- Parameters: table_oid (oid).
-- Locks: none (pg_table_size and pg_indexes_size read the files' sizes).
SELECT coalesce(s.n_live_tup, 0) AS live_rows,
       coalesce(s.n_dead_tup, 0) AS dead_rows,
       extract(epoch FROM now() - s.last_autovacuum)::float8 AS last_autovacuum_seconds,
       extract(epoch FROM now() - s.last_vacuum)::float8 AS last_vacuum_seconds,
       extract(epoch FROM now() - greatest(s.last_autoanalyze, s.last_analyze))::float8
           AS last_analyze_seconds,
       pg_table_size(%(table_oid)s::oid) AS table_bytes,
       pg_indexes_size(%(table_oid)s::oid) AS index_bytes
FROM (SELECT %(table_oid)s::oid AS relid) AS t
LEFT JOIN pg_stat_user_tables AS s ON s.relid = t.relid
