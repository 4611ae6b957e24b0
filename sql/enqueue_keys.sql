-- enqueue_keys: bulk enqueue with dedupe keys, one batch per statement, in the
-- caller's transaction. COPY cannot skip a conflict, so the batch comes as two
-- parallel JSON arrays (payloads, and keys: a string or null each) zipped by
-- position; a row whose key is held by a queued or running job of the queue, or
-- by an earlier row of the same batch, is skipped. The command tag counts the
-- new jobs.
-- Measured against COPY into a temporary table then INSERT ... ON CONFLICT, and
-- against unnest of two text[] parameters (BENCHMARKS.md, "Bulk enqueue with
-- dedupe keys"): as fast as the first without a temporary table's catalog rows
-- (or the TEMP privilege), faster than the second.
-- Parameters: queue (text), payloads (jsonb array as text), keys (jsonb array
-- as text), run_at (timestamptz, from database_time), max_attempts (int).
-- Locks: the new rows; waits on any uncommitted job holding one of the keys.
INSERT INTO {jobs} (queue, payload, run_at, max_attempts, dedupe_key)
SELECT %(queue)s, p.payload, %(run_at)s::timestamptz, %(max_attempts)s, k.key
FROM jsonb_array_elements(%(payloads)s::jsonb) WITH ORDINALITY AS p(payload, n)
JOIN jsonb_array_elements_text(%(keys)s::jsonb) WITH ORDINALITY AS k(key, n) USING (n)
ORDER BY n
ON CONFLICT (queue, dedupe_key) WHERE status IN ('queued', 'running') DO NOTHING
