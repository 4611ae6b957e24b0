-- claim: take up to `limit` ready jobs of one queue, oldest run_at first, and
-- lease them to this run in the same statement (committed at once by autocommit).
-- Rows that are queued but already exhausted (attempts >= max_attempts, with a
-- max_attempts below 1 counting as 1) are not run: they are marked failed here so
-- they never block the head of the queue, and come back with exhausted = true.
-- The payload comes back as text so each job is decoded on its own; a payload
-- whose stored size is over max_payload comes back NULL; a non-finite timestamp
-- comes back NULL. One poisoned row cannot break its batch.
-- A row the reaper marked (queued with a locked_until: it came back from a run
-- that died, perhaps because of this very job) comes back with suspect = true;
-- the runner runs such a job alone, so a job that kills its run every time
-- cannot take its batch-mates' attempts with it.
-- Parameters: queue (text), limit (int), lease (interval), max_payload (int).
-- Locks: the claimed rows (FOR UPDATE SKIP LOCKED: rows another run holds are
-- skipped, never waited for). Plan: Limit -> LockRows -> Index Scan on the ready index.
-- The update finds the claimed rows through the primary key (id = ANY of the
-- claimed ids): joined on id alone, the planner hashed the whole table, a
-- sequential scan of every row, done ones included, on every claim. On 20,000
-- jobs (PostgreSQL 15) a claim of 1,000 took 12.5 to 14.5 ms that way and 7 to
-- 10 ms this way, whatever the table's size.
WITH next AS (
    SELECT id, attempts >= greatest(max_attempts, 1) AS exhausted,
           locked_until IS NOT NULL AS suspect
    FROM {jobs}
    WHERE queue = %(queue)s AND status = 'queued' AND run_at <= now()
    ORDER BY run_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE {jobs} AS j
SET status       = CASE WHEN next.exhausted THEN 'failed' ELSE 'running' END,
    attempts     = CASE WHEN next.exhausted THEN j.attempts ELSE j.attempts + 1 END,
    locked_until = CASE WHEN next.exhausted THEN NULL ELSE now() + %(lease)s END,
    last_error   = CASE WHEN next.exhausted
                        THEN coalesce(j.last_error, 'attempts exhausted before this claim')
                        ELSE j.last_error END
FROM next
WHERE j.id = next.id AND j.id = ANY (ARRAY(SELECT id FROM next))
RETURNING j.id,
          j.attempts,
          greatest(j.max_attempts, 1),
          next.exhausted,
          CASE WHEN pg_column_size(j.payload) <= %(max_payload)s THEN j.payload::text END,
          pg_column_size(j.payload),
          CASE WHEN isfinite(j.created_at) THEN j.created_at END,
          CASE WHEN isfinite(j.run_at) THEN j.run_at END,
          next.suspect
