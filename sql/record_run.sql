-- record_run: one row per run in the run table, on the database clock, for
-- drain status and drain plan --dsn to read.
-- Parameters: jobs_table (text), seconds (float), the counters (int),
-- exit_reason (text), exit_code (int), error (text or NULL).
-- Locks: none beyond the new row.
INSERT INTO {runs} (jobs_table, started_at, finished_at, seconds, claimed, done, retried,
                    failed, lost, reaped, released, archived, exit_reason, exit_code, error)
VALUES (%(jobs_table)s, now() - make_interval(secs => %(seconds)s), now(), %(seconds)s,
        %(claimed)s, %(done)s, %(retried)s, %(failed)s, %(lost)s, %(reaped)s, %(released)s,
        %(archived)s, %(exit_reason)s, %(exit_code)s, %(error)s)
