-- enqueue_copy_priority: sql/enqueue_copy.sql with a priority column, for a
-- table that has it. The caller writes one row per job: queue, payload (jsonb
-- text), run_at, max_attempts, priority.
-- Parameters: none (rows are streamed).
-- Locks: none beyond the new rows.
COPY {jobs} (queue, payload, run_at, max_attempts, priority) FROM STDIN
