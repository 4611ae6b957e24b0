-- demo_setup: the demo's record of executions. The demo handler writes one row
-- each time it runs a job (the job, the attempt, the runner's process id), so
-- "every job ran exactly once" is checked from what ran, not from the jobs
-- table's own status alone. No index: inserts stay cheap while runs race.
-- Parameters: none.
-- Locks: none (a new table).
CREATE TABLE IF NOT EXISTS drain_demo_executions (
    job_id     bigint      NOT NULL,
    attempt    int         NOT NULL,
    runner_pid int         NOT NULL,
    ran_at     timestamptz NOT NULL DEFAULT clock_timestamp()
)
