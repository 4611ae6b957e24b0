-- claim_priority: the claim of sql/claim.sql on a table with the priority
-- column (higher runs first, default 0): within the queue, the highest priority
-- first, then the oldest run_at. Everything else (the parameters, the room a
-- cap or a rate leaves in drain.claim_room, exhausted and suspect rows (a marked
-- row leased only alone, `head` read first), the
-- payload limits, the lease from clock_timestamp(), why the update does not
-- join `next`) is claim.sql's, line for line; its notes say why.
-- Chosen once per run, when the schema check finds the column
-- (drain.store.schema.Inspection.has_priority).
-- Locks: the claimed rows (FOR UPDATE SKIP LOCKED).
-- Plan: Limit -> LockRows -> Index Scan on <table>_priority_idx, (queue,
-- priority DESC, run_at) WHERE status = 'queued', which hands the rows over in
-- the order asked for; run_at <= now() is checked on each index entry, so a job
-- of high priority scheduled for later is stepped over in the index without
-- reading its row.
-- The rows come back in the order they were claimed in: priority, then run_at.
WITH head AS (
    SELECT locked_until IS NOT NULL AS suspect
    FROM {jobs}
    WHERE queue = %(queue)s AND status = 'queued' AND run_at <= now()
    ORDER BY priority DESC, run_at
    LIMIT 1
),
next AS MATERIALIZED (
    SELECT id, priority, run_at, locked_until IS NOT NULL AS suspect,
           octet_length(payload::text) AS size
    FROM {jobs}
    WHERE queue = %(queue)s AND status = 'queued' AND run_at <= now()
    ORDER BY priority DESC, run_at
    LIMIT least(CASE WHEN (SELECT suspect FROM head) THEN 1 ELSE %(limit)s END,
                nullif(current_setting('drain.claim_room', true), '')::int)
    FOR UPDATE SKIP LOCKED
),
fits AS MATERIALIZED (
    SELECT id, suspect
    FROM (SELECT id, suspect, size,
                 sum(coalesce(size, 0)) OVER (ORDER BY priority DESC, run_at, id) AS upto,
                 row_number() OVER (ORDER BY priority DESC, run_at, id) AS place,
                 bool_or(suspect) OVER (ORDER BY priority DESC, run_at, id) AS suspect_so_far
          FROM next) AS running_total
    WHERE upto - coalesce(size, 0) < %(max_bytes)s
      AND (place = 1 OR NOT suspect_so_far)
),
claimed AS (
    UPDATE {jobs} AS j
    SET status       = CASE WHEN j.attempts IS NULL OR j.attempts >= greatest(j.max_attempts, 1)
                            THEN 'failed' ELSE 'running' END,
        attempts     = CASE WHEN j.attempts IS NULL THEN 0
                            WHEN j.attempts >= greatest(j.max_attempts, 1) THEN j.attempts
                            ELSE j.attempts + 1 END,
        locked_until = CASE WHEN j.attempts IS NULL OR j.attempts >= greatest(j.max_attempts, 1)
                            THEN NULL ELSE clock_timestamp() + %(lease)s END,
        last_error   = CASE WHEN j.attempts IS NULL
                            THEN 'attempts is NULL; set it to 0 (or run drain retry) to run this job'
                            WHEN j.attempts >= greatest(j.max_attempts, 1)
                            THEN coalesce(j.last_error, 'attempts exhausted before this claim')
                            ELSE j.last_error END
    WHERE j.id = ANY (ARRAY(SELECT id FROM fits))
    RETURNING j.id,
              j.attempts,
              greatest(j.max_attempts, 1) AS max_attempts,
              j.status = 'failed' AS exhausted,
              j.payload,
              j.created_at,
              j.run_at,
              j.priority,
              j.id = ANY (ARRAY(SELECT id FROM fits WHERE suspect)) AS suspect
)
SELECT c.id, c.attempts, c.max_attempts, c.exhausted,
       CASE WHEN octet_length(p.text) <= %(max_payload)s THEN p.text END,
       octet_length(p.text),
       CASE WHEN c.created_at BETWEEN '0001-01-02 00:00+00' AND '9999-12-30 00:00+00' THEN c.created_at END,
       CASE WHEN c.run_at BETWEEN '0001-01-02 00:00+00' AND '9999-12-30 00:00+00' THEN c.run_at END,
       c.suspect
FROM claimed AS c
-- a subquery of its own (OFFSET 0), so each payload is turned into text once
CROSS JOIN LATERAL (SELECT c.payload::text AS text OFFSET 0) AS p
ORDER BY c.priority DESC, c.run_at, c.id
