-- extra: priority
-- 0003_priority: job priorities, added only when asked for (drain init --with
-- priority, drain migrate --with priority). Higher runs first; 0 by default, so
-- an INSERT that does not name the column keeps working and every existing job
-- keeps its place. The index serves the claim's order within a queue: the
-- highest priority first, then run_at, over the queued jobs alone. An extra, not
-- a schema version: a drain that knows nothing of priorities runs the table.
-- Idempotent: the column and index only when missing; the range check is
-- replaced by itself (drain skips the step when all three are in place).
-- Placeholders (identifiers, quoted by the driver): jobs, priority_index,
-- priority_check.
-- Locks, on a live table:
--   ADD COLUMN with a constant default is a catalog change on PostgreSQL 11 and
--   later (no rewrite): an ACCESS EXCLUSIVE lock for an instant, waited for at
--   most lock_timeout and tried again.
--   The CHECK is added NOT VALID (an instant, no scan) and VALIDATEd apart, under
--   a SHARE UPDATE EXCLUSIVE lock that lets enqueues and claims go on.
--   CREATE INDEX CONCURRENTLY takes no lock that holds back enqueues or claims,
--   runs outside a transaction, and leaves an INVALID index when it fails, which
--   drain drops before it tries again.
ALTER TABLE {jobs} ADD COLUMN IF NOT EXISTS priority integer NOT NULL DEFAULT 0;

ALTER TABLE {jobs}
    DROP CONSTRAINT IF EXISTS {priority_check},
    ADD CONSTRAINT {priority_check} CHECK (priority BETWEEN -32767 AND 32767) NOT VALID;

ALTER TABLE {jobs} VALIDATE CONSTRAINT {priority_check};

CREATE INDEX CONCURRENTLY IF NOT EXISTS {priority_index} ON {jobs} (queue, priority DESC, run_at)
    WHERE status = 'queued';
