-- demo_record: the demo handler's record of one execution (see demo_setup).
-- Parameters: job_id (bigint), attempt (int), runner_pid (int).
-- Locks: none beyond the new row.
INSERT INTO drain_demo_executions (job_id, attempt, runner_pid)
VALUES (%(job_id)s, %(attempt)s, %(runner_pid)s)
