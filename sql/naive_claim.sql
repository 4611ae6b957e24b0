-- naive_claim: THE WRONG WAY TO CLAIM A JOB, kept only for `drain demo --naive`.
-- It is the obvious statement from the article, with status = 'done' so each
-- claim is also a completion (as the article's pgbench run did). It looks atomic
-- but is not: the subquery picks the oldest queued id without locking it, a
-- concurrent claim that picked the same id waits for the row, and once the first
-- commits, READ COMMITTED re-checks only id = <that id>, which still matches, so
-- the same job is claimed again while later jobs stay queued. drain claims with
-- FOR UPDATE SKIP LOCKED instead (see claim.sql). Never use this statement.
-- Parameters: none.
-- Locks: the picked row, after the pick (which is the bug).
UPDATE {jobs}
SET status = 'done', attempts = attempts + 1
WHERE id = (
    SELECT id FROM {jobs}
    WHERE status = 'queued'
    ORDER BY run_at
    LIMIT 1
)
RETURNING id, attempts
