-- extra: dedupe
-- 0002_dedupe: dedupe keys, added only when asked for (drain init --with dedupe,
-- drain migrate --with dedupe), on a table drain created or one made by hand.
-- A nullable dedupe_key column, and a unique index on (queue, dedupe_key) over
-- the jobs that are queued or running: while a job with a key waits or runs,
-- enqueueing the same key on the same queue is a duplicate (sql/enqueue_key.sql);
-- once the job is done or failed it leaves the index and the key is free again.
-- A job without a key (NULL) never conflicts, so an INSERT that does not name
-- the column keeps working. An extra, not a schema version: the version comment
-- stays as it is, and a drain that knows nothing of dedupe keys runs the table.
-- Idempotent (drain skips it when the column and a valid index are there).
-- Placeholders (identifiers, quoted by the driver): jobs, dedupe_index.
-- Locks: ADD COLUMN takes an ACCESS EXCLUSIVE lock for an instant (no default, so
-- no rewrite; drain waits for it at most lock_timeout, and tries again);
-- CREATE INDEX CONCURRENTLY takes none that holds back enqueues or claims, runs
-- outside a transaction, and leaves an INVALID index when it fails, which drain
-- drops before it tries again.
ALTER TABLE {jobs} ADD COLUMN IF NOT EXISTS dedupe_key text;

CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS {dedupe_index} ON {jobs} (queue, dedupe_key)
    WHERE status IN ('queued', 'running');
