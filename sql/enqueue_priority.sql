-- enqueue_priority: sql/enqueue.sql with a priority (higher runs first), for a
-- table with the priority column; in the caller's transaction.
-- Parameters: queue (text), payload (jsonb as text), run_at (timestamptz or
-- NULL), delay (interval), max_attempts (int), priority (int).
-- Locks: none beyond the new row.
INSERT INTO {jobs} (queue, payload, run_at, max_attempts, priority)
VALUES (%(queue)s, %(payload)s::jsonb, coalesce(%(run_at)s::timestamptz, now() + %(delay)s),
        %(max_attempts)s, %(priority)s)
RETURNING id
