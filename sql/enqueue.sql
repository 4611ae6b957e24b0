-- enqueue: add one job, in the caller's transaction (drain never commits it).
-- run_at is the given time, or now() + delay on the database clock.
-- Parameters: queue (text), payload (jsonb as text), run_at (timestamptz or
-- NULL), delay (interval), max_attempts (int).
-- Locks: none beyond the new row.
INSERT INTO {jobs} (queue, payload, run_at, max_attempts)
VALUES (%(queue)s, %(payload)s::jsonb, coalesce(%(run_at)s::timestamptz, now() + %(delay)s),
        %(max_attempts)s)
RETURNING id
