-- purge_count: how many archive rows a purge with the same retention would
-- delete, and the oldest and newest archived_at among them, changing nothing
-- (drain purge --dry-run). One pass over the archive (no index on archived_at).
-- Parameters: older_than (interval).
-- Locks: none.
SELECT count(*) AS rows,
       extract(epoch FROM now() - min(archived_at))::float8 AS oldest_seconds_ago,
       extract(epoch FROM now() - max(archived_at))::float8 AS newest_seconds_ago
FROM {archive}
WHERE archived_at < now() - %(older_than)s
