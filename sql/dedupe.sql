-- dedupe: dedupe keys, added only when asked for (drain init --with dedupe), on a
-- table drain created or one made by hand from the article.
-- A nullable dedupe_key column, and a unique index on (queue, dedupe_key) over
-- the jobs that are queued or running: while a job with a key waits or runs,
-- enqueueing the same key on the same queue is a duplicate (sql/enqueue_key.sql);
-- once the job is done or failed it leaves the index and the key is free again.
-- A job without a key (NULL) never conflicts, so an INSERT that does not name
-- the column keeps working.
-- Idempotent (init skips it when the column and index are already there).
-- Placeholders (identifiers, quoted by the driver): jobs, dedupe_index.
-- Locks: ADD COLUMN takes an ACCESS EXCLUSIVE lock for an instant (no default, so
-- no rewrite); CREATE INDEX a SHARE lock while it builds, which holds back
-- enqueues and claims on a big table for that long.
ALTER TABLE {jobs} ADD COLUMN IF NOT EXISTS dedupe_key text;

CREATE UNIQUE INDEX IF NOT EXISTS {dedupe_index} ON {jobs} (queue, dedupe_key)
    WHERE status IN ('queued', 'running');
