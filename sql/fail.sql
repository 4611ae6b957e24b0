-- fail: record a batch of failed attempts. A job goes back to queued with
-- run_at = now() + least(cap, base * 2^attempts) (20 s, 40 s, 80 s, 160 s with the
-- defaults), or to failed for good once attempts >= max_attempts (below 1 counts
-- as 1) or when the handler said the failure is permanent. Ownership is checked
-- exactly as in complete; rows missing from the result are no longer ours.
-- Parameters: ids (bigint[]), attempts (int[]), errors (text[]), permanent
-- (boolean[]), all aligned; base and cap (interval).
-- Locks: the owned rows, for the length of this one statement.
UPDATE {jobs} AS j
SET status       = CASE WHEN f.permanent OR j.attempts >= greatest(j.max_attempts, 1)
                        THEN 'failed' ELSE 'queued' END,
    run_at       = CASE WHEN f.permanent OR j.attempts >= greatest(j.max_attempts, 1)
                        THEN j.run_at
                        ELSE now() + least(%(cap)s::interval,
                                           %(base)s::interval * 2 ^ least(j.attempts, 40)) END,
    locked_until = NULL,
    last_error   = f.error
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(errors)s::text[], %(permanent)s::boolean[])
     AS f(id, attempts, error, permanent)
WHERE j.id = f.id AND j.status = 'running' AND j.attempts = f.attempts
RETURNING j.id, j.status
