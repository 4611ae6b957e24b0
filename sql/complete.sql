-- complete: mark a batch of jobs done, but only those this run still owns
-- (still running, with the attempt number the claim returned). Rows missing from
-- the result are no longer ours: the caller counts them as lost and never
-- retries the update blindly.
-- Parameters: ids (bigint[]), attempts (int[]), the two arrays aligned.
-- Locks: the owned rows, for the length of this one statement.
UPDATE {jobs} AS j
SET status = 'done', locked_until = NULL
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS owned(id, attempts)
WHERE j.id = owned.id AND j.status = 'running' AND j.attempts = owned.attempts
RETURNING j.id
