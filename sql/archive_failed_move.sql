-- archive_failed_move: move one batch of failed jobs whose last attempt was due
-- more than failed_after ago into the archive table, in one short transaction
-- (drain archive --failed-after). The table keeps no failure time: a failure
-- for good keeps run_at, the time the last attempt was due, which is the
-- closest the table comes (created_at would count a job retried for a month
-- from its first day). A job that waited in a backlog counts from when it was
-- due, so it can go a little earlier than its failure plus the retention.
-- The batches walk the primary key upwards from the last id the previous
-- batch moved (a keyset scan), so a pass over a large table reads it once, not
-- once per batch.
-- Parameters: failed_after (interval), after_id (bigint; 0 for the first
-- batch), limit (int).
-- Locks: the moved rows (FOR UPDATE SKIP LOCKED: a row a retry holds is left).
WITH batch AS (
    SELECT id FROM {jobs}
    WHERE status = 'failed' AND run_at < now() - %(failed_after)s
      AND id > %(after_id)s::bigint
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), moved AS (
    DELETE FROM {jobs} AS j
    WHERE j.id = ANY (ARRAY(SELECT id FROM batch))
    RETURNING j.id, j.queue, j.payload, j.status, j.run_at, j.attempts, j.max_attempts,
              j.locked_until, j.last_error, j.created_at
), inserted AS (
    INSERT INTO {archive} (id, queue, payload, status, run_at, attempts, max_attempts,
                           locked_until, last_error, created_at, archived_at)
    SELECT id, queue, payload, status, run_at, attempts, max_attempts,
           locked_until, last_error, created_at, now()
    FROM moved
    RETURNING id
)
SELECT (SELECT count(*) FROM batch) AS matched,
       (SELECT count(*) FROM inserted) AS archived,
       (SELECT max(id) FROM batch) AS last_id
