-- enqueue_key_priority: sql/enqueue_key.sql with a priority (higher runs
-- first), for a table with both dedupe keys and the priority column. A
-- duplicate keeps the priority of the job that holds the key, as it keeps its
-- payload and run time: the first enqueue wins. See enqueue_key.sql for the
-- answer's rows and why there may be none.
-- Parameters: those of enqueue_key.sql, and priority (int).
-- Locks: the new row; on a conflict, a wait for the holder's transaction if it
-- has not committed yet.
WITH inserted AS (
    INSERT INTO {jobs} (queue, payload, run_at, max_attempts, dedupe_key, priority)
    VALUES (%(queue)s, %(payload)s::jsonb, coalesce(%(run_at)s::timestamptz, now() + %(delay)s),
            %(max_attempts)s, %(key)s, %(priority)s)
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
