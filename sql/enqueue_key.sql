-- enqueue_key: add one job with a dedupe key, in the caller's transaction, unless
-- a job of the same queue with the same key is queued or running (the partial
-- unique index of sql/dedupe.sql, which ON CONFLICT names by its columns and
-- predicate).
-- Returns (id, false) for the new job, or (id, true) with the id of the job
-- that holds the key. No row at all when the holder committed while this
-- statement waited on it (so this statement's snapshot cannot see it) or was
-- done or failed in between: the caller runs the statement again, with a new
-- snapshot under READ COMMITTED.
-- Parameters: queue (text), payload (jsonb as text), run_at (timestamptz or
-- NULL), delay (interval), max_attempts (int), key (text).
-- Locks: the new row; on a conflict, a wait for the holder's transaction if it
-- has not committed yet.
WITH inserted AS (
    INSERT INTO {jobs} (queue, payload, run_at, max_attempts, dedupe_key)
    VALUES (%(queue)s, %(payload)s::jsonb, coalesce(%(run_at)s::timestamptz, now() + %(delay)s),
            %(max_attempts)s, %(key)s)
    ON CONFLICT (queue, dedupe_key) WHERE status IN ('queued', 'running') DO NOTHING
    RETURNING id
)
SELECT id, false AS duplicate FROM inserted
UNION ALL
SELECT j.id, true AS duplicate
FROM {jobs} AS j
WHERE j.queue = %(queue)s
  AND j.dedupe_key = %(key)s
  AND j.status IN ('queued', 'running')
  AND NOT EXISTS (SELECT FROM inserted)
LIMIT 1
