-- status_sessions: every other session on the server (all databases: the compute
-- is the whole server), grouped by database, application, role, kind and state,
-- with whether the group keeps a scale-to-zero compute awake: a session that is
-- not idle (active, idle in transaction) does so now, an idle one until
-- idle_timeout after its last state change; autovacuum workers and WAL senders
-- count as they are active. listening counts sessions whose last statement was a
-- LISTEN, which is all pg_stat_activity can tell: a listener that has run any
-- statement since looks like any idle session. hidden marks sessions of other
-- roles whose kind, state and query this role may not read (see
-- pg_read_all_stats): rows with a database and a role but no backend type.
-- Parameters: idle_timeout (interval).
-- Locks: none.
WITH other AS (
    SELECT datname, application_name, usename::text AS usename, backend_type, state,
           state IS NULL AS hidden,
           coalesce(state <> 'idle' OR state_change > now() - %(idle_timeout)s, false) AS awake,
           coalesce(query ~* '^\s*listen\s', false) AS listening,
           extract(epoch FROM now() - state_change)::float8 AS since_change
    FROM pg_stat_activity
    WHERE pid <> pg_backend_pid()
      AND (backend_type IN ('client backend', 'autovacuum worker', 'walsender')
           OR (backend_type IS NULL AND datname IS NOT NULL AND usename IS NOT NULL))
)
SELECT datname, application_name, usename, backend_type, state, hidden, awake,
       count(*) AS sessions,
       count(*) FILTER (WHERE listening) AS listening,
       min(since_change) AS latest_change_seconds,
       max(since_change) AS earliest_change_seconds
FROM other
GROUP BY datname, application_name, usename, backend_type, state, hidden, awake
ORDER BY awake DESC, sessions DESC, application_name, state
