-- retry_keyed: retry (see retry.sql) on a table with dedupe keys (drain init --with
-- dedupe). A failed job whose key is queued or running again (a newer job holds
-- it) stays failed: putting it back would break the key's promise, and the
-- unique index would refuse it. Of several failed jobs with one key, only the
-- newest goes back. Jobs without a key are retried as by retry.sql. Each row of
-- the batch comes back, retried or not, and the batch moves on by id (after), so
-- a job left failed is not looked at again.
-- Parameters: as retry.sql, and after (bigint: the last id of the previous batch).
-- Locks: the batch's rows (FOR UPDATE SKIP LOCKED), one short transaction.
WITH batch AS (
    SELECT id, queue, dedupe_key FROM {jobs}
    WHERE status = 'failed' AND id > %(after)s
      AND (%(queues)s::text[] IS NULL OR queue = ANY(%(queues)s::text[]))
      AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
      AND (%(error_contains)s::text IS NULL
           OR strpos(lower(last_error), lower(%(error_contains)s::text)) > 0)
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
chosen AS (
    SELECT b.id FROM batch AS b
    WHERE b.dedupe_key IS NULL
       OR (NOT EXISTS (SELECT 1 FROM {jobs} AS h
                        WHERE h.queue = b.queue AND h.dedupe_key = b.dedupe_key
                          AND h.status IN ('queued', 'running'))
           AND b.id = (SELECT max(o.id) FROM batch AS o
                        WHERE o.queue = b.queue AND o.dedupe_key = b.dedupe_key))
),
retried AS (
    UPDATE {jobs} AS j
    SET status       = 'queued',
        max_attempts = least(coalesce(j.attempts, 0)::bigint + greatest(j.max_attempts, 1),
                             2147483647)::int,
        run_at       = now(),
        locked_until = NULL,
        last_error   = NULL
    FROM chosen
    WHERE j.id = chosen.id
    RETURNING j.id
)
SELECT b.id, b.id IN (SELECT id FROM retried) AS retried FROM batch AS b ORDER BY b.id
