-- status_server: facts about the server that every part of drain status reads
-- against: its version, the database clock, how full the LISTEN/NOTIFY queue is
-- (above zero only while some listener lags behind), and whether this role may
-- read every session's state in pg_stat_activity.
-- Parameters: none.
-- Locks: none.
SELECT current_setting('server_version') AS server_version,
       now() AS database_time,
       pg_notification_queue_usage() AS notification_queue_usage,
       pg_has_role(current_user, 'pg_read_all_stats', 'USAGE') AS sees_all_sessions
