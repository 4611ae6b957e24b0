-- rate_take: the second statement of a rated queue's claim, after
-- rate_refill.sql in the same transaction: take the whole tokens the claim may
-- use (no more than the claim asks for, nor than a cap's room cap_room.sql left
-- in drain.claim_room), and leave that room in drain.claim_room for the claim
-- that follows (claim.sql takes no more). Returns the room, and how long the
-- bucket takes from what is left to hold `want` tokens again: the run sleeps
-- that long (no transaction open, no statement sent) before it claims the
-- queue again.
-- Parameters: jobs_table (text), queue (text), limit (int), want (int).
-- Locks: the bucket's row, already locked by rate_refill.sql.
WITH old AS (
    SELECT tokens, burst, starts / period_seconds AS per_second
    FROM {rates}
    WHERE jobs_table = %(jobs_table)s AND queue = %(queue)s
),
room AS (
    SELECT least(%(limit)s,
                 coalesce(nullif(current_setting('drain.claim_room', true), '')::int,
                          %(limit)s),
                 floor(old.tokens)::int) AS n,
           old.tokens, old.burst, old.per_second
    FROM old
),
taken AS (
    UPDATE {rates} AS r
    SET tokens = r.tokens - room.n
    FROM room
    WHERE r.jobs_table = %(jobs_table)s AND r.queue = %(queue)s
    RETURNING room.n, r.tokens AS left_over, room.burst, room.per_second
)
SELECT n,
       set_config('drain.claim_room', n::text, true),
       greatest(0.0, least(burst, %(want)s::float8) - left_over) / per_second AS wait_seconds
FROM taken
