-- retry: put one batch of failed jobs back to queued, to run at once on the
-- database clock, with as many tries as the job had: attempts is kept and
-- max_attempts is raised to attempts + max_attempts (a max_attempts below 1
-- counting as 1, a NULL attempts as 0), added as bigint and stopped at the
-- int's limit (2147483647): a job that may already retry (nearly) for ever keeps
-- doing so, and its batch-mates are not refused with it.
-- attempts is the fencing token of every fenced statement (complete, fail,
-- snooze, extend and release match id and attempts): resetting it would hand an
-- attempt number out again while a run that held it (frozen, or cut off from
-- the database) may still send an outcome under it, and that outcome would land
-- on the new attempt's row. So the counter only goes up.
-- locked_until is cleared, the reaper's mark included: a mass retry after an
-- incident would otherwise come back as thousands of suspects, each run alone.
-- The price: confirm_outcomes, asked about the attempt the reaper failed, sees
-- a queued row with that attempt and no mark, as if that attempt had requeued it
-- (a run's count can be off; no row changes).
-- last_error is cleared: the job starts over, and the reaper keeps an existing
-- last_error, so a stale one would later be shown as the reason for a lease
-- that expired.
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
SET status       = 'queued',
    max_attempts = least(coalesce(j.attempts, 0)::bigint + greatest(j.max_attempts, 1),
                         2147483647)::int,
    run_at       = now(),
    locked_until = NULL,
    last_error   = NULL
FROM batch
WHERE j.id = batch.id
RETURNING j.id
