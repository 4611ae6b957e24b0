-- migrate_lock: one migration of a queue table at a time. Two at once would
-- each take the other's index, still being built CONCURRENTLY and so INVALID,
-- for one a failed build left, and drop it. A session advisory lock on the
-- table's key with -1 beside it (runner slots use 1 and up), held until
-- migrate_unlock or the connection's end; false when another migration has it.
-- Parameters: lock_key (int).
-- Locks: at most one advisory lock.
SELECT pg_try_advisory_lock(%(lock_key)s::int, -1)
