-- extend: push the lease of jobs that are still working forward to now() + lease.
-- A lease of zero cuts it short instead, so the next run reaps the job at once
-- (used for jobs still working when a run has to leave). Rows missing from the
-- result are no longer ours: their results must not be recorded. cancelled says
-- `drain cancel` asked for the job while it ran (cancel.sql's mark: no attempt
-- left, last_error 'cancelled'), so the handler can see it without LISTEN.
-- Parameters: ids (bigint[]), attempts (int[]), aligned; lease (interval).
-- Locks: the owned rows, for the length of this one statement.
UPDATE {jobs} AS j
SET locked_until = now() + %(lease)s
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS owned(id, attempts)
WHERE j.id = owned.id AND j.status = 'running' AND j.attempts = owned.attempts
RETURNING j.id,
          j.last_error = 'cancelled' AND j.attempts >= greatest(j.max_attempts, 1) AS cancelled
