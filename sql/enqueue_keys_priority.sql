-- enqueue_keys_priority: sql/enqueue_keys.sql with one priority for the whole
-- batch (higher runs first), for a table with dedupe keys and the priority
-- column; in the caller's transaction. See enqueue_keys.sql for the batch's
-- shape and the measurements behind it.
-- Parameters: those of enqueue_keys.sql, and priority (int).
-- Locks: the new rows; waits on any uncommitted job holding one of the keys.
INSERT INTO {jobs} (queue, payload, run_at, max_attempts, dedupe_key, priority)
SELECT %(queue)s, p.payload, %(run_at)s::timestamptz, %(max_attempts)s, k.key, %(priority)s
FROM jsonb_array_elements(%(payloads)s::jsonb) WITH ORDINALITY AS p(payload, n)
JOIN jsonb_array_elements_text(%(keys)s::jsonb) WITH ORDINALITY AS k(key, n) USING (n)
ORDER BY n
ON CONFLICT (queue, dedupe_key) WHERE status IN ('queued', 'running') DO NOTHING
