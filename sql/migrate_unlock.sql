-- migrate_unlock: let the next migration of the queue table go (sql/migrate_lock.sql).
-- Parameters: lock_key (int).
-- Locks: releases the one advisory lock migrate_lock took.
SELECT pg_advisory_unlock(%(lock_key)s::int, -1)
