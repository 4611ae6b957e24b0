-- claim: take up to `limit` ready jobs of one queue, oldest run_at first, and
-- lease them to this run in the same statement (committed at once).
-- Parameters: queue (text), limit (int), lease (interval), max_payload (int),
-- max_bytes (bigint). A queue with a cap across runs takes no more than the room
-- cap_room.sql left in drain.claim_room, earlier in the same transaction, and a
-- queue with a rate no more than the tokens rate_take.sql took (it leaves the
-- least of the two there); unset, or empty once a transaction that set it is
-- over, it leaves the limit alone.
-- Locks: the claimed rows (FOR UPDATE SKIP LOCKED: rows another run holds are
-- skipped, never waited for). Plan: Limit -> LockRows -> Index Scan on the ready
-- index for `next`; the update reaches each claimed row once, through the
-- primary key (an index scan of id = ANY of one array, computed once).
--
-- Why the update does not join `next`: a join's plan depends on what the
-- statistics say `next` holds, and the statistics a run leaves behind (its own
-- VACUUM (ANALYZE) with every job done) say "nothing is queued". The planner then
-- put the array scan inside a nested loop, once per claimed row: a claim of
-- 1,000 took 816 ms (499,500 rows removed by the join filter), one of 10,000 took
-- 55 s; joined on id alone it hashed a sequential scan of the whole table. The
-- array has one plan whatever the statistics say. `exhausted` and `suspect` are
-- told apart without the join: only an exhausted row becomes 'failed' here, and
-- the suspects' ids travel as a second array (usually empty).
--
-- Rows:
-- * queued rows that are already exhausted (attempts >= max_attempts, below 1
--   counting as 1) or whose attempts is NULL (a hand-made table without NOT NULL)
--   are not run: they become failed here, with a last_error saying why, so they
--   never block the head of the queue; they come back with exhausted = true;
-- * a row the reaper marked (queued with a locked_until: it came back from a run
--   that died, perhaps because of this very job) comes back with suspect = true;
--   the runner runs such a job alone, so a job that kills its run every time
--   cannot take its batch-mates' attempts with it. So the claim leases a marked
--   row only alone: it stops before the first marked row it meets, and when the
--   head of the queue (`head`, read without a lock) is marked it locks one row
--   only. A run that died holding 2,000 jobs used to leave the next run claiming
--   1,000 rows to keep one and give 999 back, 2,000 times (111 s for 102,000 no-op
--   jobs, where they took 3 s without the marks);
-- * the payload comes back as text, so each job is decoded on its own, and
--   NULL when its decoded size (what the runner will hold in memory, not the
--   compressed size stored) is over max_payload; the decoded size comes back
--   beside it; a timestamp a client cannot hold (infinite, or outside the
--   years 1 to 9999 that Python's datetime spans, a day's margin kept for any
--   time zone) comes back NULL. One poisoned row cannot break its batch: a
--   single such value used to fail the whole reply's decoding in the client. A payload is turned into text twice, once to size the
--   claim and once to send it (a 4 MB jsonb takes 25 to 40 ms each time);
-- * the claim stops at max_bytes of decoded payload (the first row always
--   counts): rows locked past that are left queued, so a claim of large
--   payloads brings what fits in memory, however many rows it asked for.
-- The rows come back oldest run_at first, the order they were claimed in.
-- The lease counts from clock_timestamp() (the moment each row is leased),
-- not from now() (the start of the transaction): a claim that had to wait still
-- hands out leases of the full length.
WITH head AS (
    SELECT locked_until IS NOT NULL AS suspect
    FROM {jobs}
    WHERE queue = %(queue)s AND status = 'queued' AND run_at <= now()
    ORDER BY run_at
    LIMIT 1
),
next AS MATERIALIZED (
    SELECT id, run_at, locked_until IS NOT NULL AS suspect,
           octet_length(payload::text) AS size
    FROM {jobs}
    WHERE queue = %(queue)s AND status = 'queued' AND run_at <= now()
    ORDER BY run_at
    LIMIT least(CASE WHEN (SELECT suspect FROM head) THEN 1 ELSE %(limit)s END,
                nullif(current_setting('drain.claim_room', true), '')::int)
    FOR UPDATE SKIP LOCKED
),
fits AS MATERIALIZED (
    SELECT id, suspect
    FROM (SELECT id, suspect, size,
                 sum(coalesce(size, 0)) OVER (ORDER BY run_at, id) AS upto,
                 row_number() OVER (ORDER BY run_at, id) AS place,
                 bool_or(suspect) OVER (ORDER BY run_at, id) AS suspect_so_far
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
ORDER BY c.run_at, c.id
