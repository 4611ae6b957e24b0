-- floor: the lease protocol run inside the server, with no client in the loop:
-- the yardstick for how fast one connection could ever drain a queue.
-- Each round claims up to `batch` jobs with the article's claim (queue
-- condition, ORDER BY run_at LIMIT n FOR UPDATE SKIP LOCKED, status running,
-- attempts + 1, a lease), completes them fenced by attempt (status done only
-- where the row is still running with the attempt the claim gave it), and
-- commits; it stops when a claim comes back empty. Every statement goes through
-- EXECUTE, so each one is planned for its own parameters, as drain's statements
-- are (no cached generic plan).
-- Created once in the bench database (not timed); CALL it outside a transaction
-- block (autocommit), since it commits. Parameters: jobs (the queue table),
-- queue, batch, lease; done (INOUT) comes back as the number of jobs completed.
-- Locks: each round's claimed rows, until that round's COMMIT.
CREATE OR REPLACE PROCEDURE drain_bench_floor(
    jobs regclass,
    queue text,
    batch int,
    lease interval,
    INOUT done bigint DEFAULT 0
)
LANGUAGE plpgsql
AS $procedure$
DECLARE
    ids bigint[];
    tries int[];
    payloads jsonb[];
    completed bigint;
BEGIN
    done := 0;
    LOOP
        EXECUTE format($claim$
            WITH next AS (
                SELECT id FROM %1$s
                WHERE queue = $1 AND status = 'queued' AND run_at <= now()
                ORDER BY run_at
                LIMIT $2
                FOR UPDATE SKIP LOCKED
            ), claimed AS (
                UPDATE %1$s AS j
                SET status       = 'running',
                    attempts     = j.attempts + 1,
                    locked_until = now() + $3
                FROM next
                WHERE j.id = next.id
                RETURNING j.id, j.payload, j.attempts
            )
            SELECT array_agg(id), array_agg(attempts), array_agg(payload) FROM claimed
        $claim$, jobs) INTO ids, tries, payloads USING queue, batch, lease;
        EXIT WHEN ids IS NULL;
        EXECUTE format($complete$
            UPDATE %1$s AS j
            SET status = 'done', locked_until = NULL
            FROM unnest($1::bigint[], $2::int[]) AS owned(id, attempts)
            WHERE j.id = owned.id AND j.status = 'running' AND j.attempts = owned.attempts
        $complete$, jobs) USING ids, tries;
        GET DIAGNOSTICS completed = ROW_COUNT;
        done := done + completed;
        COMMIT;
    END LOOP;
END
$procedure$
