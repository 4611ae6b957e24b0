-- fail: record a batch of failed attempts. A job goes back to queued with
-- run_at = now() + least(cap, base * 2^attempts) (20 s, 40 s, 80 s, 160 s with the
-- defaults), or to failed for good once attempts >= max_attempts (below 1 counts
-- as 1) or when the handler said the failure is permanent. Ownership is checked
-- exactly as in complete; rows missing from the result are no longer ours.
-- The backoff is worked out in seconds (double precision), the exponent kept
-- between 0 and 40, and capped (by cap, and by 100 years whatever cap a caller
-- passed) before it becomes an interval: base * 2^attempts
-- as an interval overflowed past 178 million years (a 1-day base at attempt 37),
-- and 2^attempts underflowed for a hand-made attempts far below zero, failing the
-- statement and every outcome sent with it.
-- Parameters: ids (bigint[]), attempts (int[]), errors (text[]), permanent
-- (boolean[]), all aligned; base and cap (interval).
-- Locks: the owned rows, for the length of this one statement.
UPDATE {jobs} AS j
SET status       = CASE WHEN f.permanent OR j.attempts >= greatest(j.max_attempts, 1)
                        THEN 'failed' ELSE 'queued' END,
    run_at       = CASE WHEN f.permanent OR j.attempts >= greatest(j.max_attempts, 1)
                        THEN j.run_at
                        ELSE now() + make_interval(secs => least(
                                 extract(epoch FROM %(cap)s::interval)::float8,
                                 extract(epoch FROM %(base)s::interval)::float8
                                     * 2 ^ least(greatest(j.attempts, 0), 40),
                                 extract(epoch FROM interval '100 years')::float8)) END,
    locked_until = NULL,
    last_error   = f.error
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(errors)s::text[], %(permanent)s::boolean[])
     AS f(id, attempts, error, permanent)
WHERE j.id = f.id AND j.status = 'running' AND j.attempts = f.attempts
RETURNING j.id, j.status
