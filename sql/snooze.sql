-- snooze: a handler asked to run its job again later without that counting as
-- an error. The job goes back to queued at the requested time (an absolute
-- time, or a delay on the database clock); max_attempts grows by one so the
-- snooze does not use up a retry, while attempts keeps counting up so the
-- ownership fence (id, attempts) never sees the same attempt number twice.
-- max_attempts stops at the int's limit (2147483647, "retry forever"): one more
-- would fail the statement, and every outcome sent with it.
-- The job comes back at the later of the two: an absolute time sent with a delay
-- (the runner sends the one-second floor, drain.jobs.RetryLater) never puts it
-- in the past, where the same run would claim and snooze it again at once.
-- A job cancelled while it ran (cancel.sql's mark) is not snoozed: it fails.
-- Parameters: ids (bigint[]), attempts (int[]), run_ats (timestamptz[], NULL
-- where only a delay is given), delays (interval[]), all aligned.
-- Locks: the owned rows, for the length of this one statement.
UPDATE {jobs} AS j
SET status       = CASE WHEN j.last_error = 'cancelled' AND j.attempts >= greatest(j.max_attempts, 1)
                        THEN 'failed' ELSE 'queued' END,
    run_at       = CASE WHEN j.last_error = 'cancelled' AND j.attempts >= greatest(j.max_attempts, 1)
                        THEN j.run_at ELSE greatest(s.run_at, now() + s.delay) END,
    max_attempts = CASE WHEN j.last_error = 'cancelled' AND j.attempts >= greatest(j.max_attempts, 1)
                        THEN j.max_attempts
                        ELSE least(greatest(j.max_attempts, 1), 2147483646) + 1 END,
    locked_until = NULL
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(run_ats)s::timestamptz[],
            %(delays)s::interval[]) AS s(id, attempts, run_at, delay)
WHERE j.id = s.id AND j.status = 'running' AND j.attempts = s.attempts
RETURNING j.id
