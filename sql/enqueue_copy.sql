-- enqueue_copy: bulk enqueue through COPY, in the caller's transaction. The
-- caller writes one row per job: queue, payload (jsonb text), run_at,
-- max_attempts; run_at comes from the database clock (see database_time).
-- Parameters: none (rows are streamed).
-- Locks: none beyond the new rows.
COPY {jobs} (queue, payload, run_at, max_attempts) FROM STDIN
