-- retry: put one batch of failed jobs back to queued, to run at once on the
-- database clock with a fresh set of attempts (attempts = 0). last_error is
-- cleared: the job starts over, and the reaper keeps an existing last_error, so
-- a stale one would later be shown as the reason for a lease that expired.
-- Filters, each NULL when not given, combine with AND: queues (text[]), ids
-- (bigint[]), error_contains (text, matched case-insensitively in last_error).
-- Parameters: queues, ids, error_contains, limit (int).
-- Locks: the batch's rows (FOR UPDATE SKIP LOCKED), one short transaction.
WITH batch AS (
    SELECT id FROM {jobs}
    WHERE status = 'failed'
      AND (%(queues)s::text[] IS NULL OR queue = ANY(%(queues)s::text[]))
      AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
      AND (%(error_contains)s::text IS NULL
           OR strpos(lower(last_error), lower(%(error_contains)s::text)) > 0)
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE {jobs} AS j
SET status = 'queued', attempts = 0, run_at = now(), locked_until = NULL, last_error = NULL
FROM batch
WHERE j.id = batch.id
RETURNING j.id
