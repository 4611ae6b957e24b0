-- status_transactions: open transactions in this database that hold vacuum back
-- (a session whose snapshot or transaction id pins the horizon, or a prepared
-- transaction), the one pinning it longest first. Ages in seconds on the database
-- clock and in transaction ids. The query text leaves the server only when
-- with_query is true (drain status --verbose), cut to query_length.
-- Our own session and autovacuum workers (whose horizon vacuum ignores) are left
-- out. Every role sees every session's xmin, but the state, transaction start and
-- query of other roles' sessions only with pg_read_all_stats; those come back NULL.
-- Parameters: with_query (boolean), query_length (int), limit (int).
-- Locks: none.
SELECT kind, pid, application_name, usename, state, transaction_seconds, state_seconds,
       xmin_age, query
FROM (
    SELECT 'session' AS kind, pid, application_name, usename::text AS usename, state,
           extract(epoch FROM now() - xact_start)::float8 AS transaction_seconds,
           extract(epoch FROM now() - state_change)::float8 AS state_seconds,
           greatest(age(backend_xmin), age(backend_xid)) AS xmin_age,
           CASE WHEN %(with_query)s THEN left(query, %(query_length)s) END AS query
    FROM pg_stat_activity
    WHERE datname = current_database()
      AND pid <> pg_backend_pid()
      AND backend_type IS DISTINCT FROM 'autovacuum worker'
      AND (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)
    UNION ALL
    SELECT 'prepared transaction', NULL, gid, owner::text, 'prepared',
           extract(epoch FROM now() - prepared)::float8, NULL, age(transaction), NULL
    FROM pg_prepared_xacts
    WHERE database = current_database()
) AS open_transactions
ORDER BY xmin_age DESC NULLS LAST, transaction_seconds DESC NULLS LAST
LIMIT %(limit)s
