-- rate_refill: the first statement of a rated queue's claim: make the queue's
-- bucket if it is new (full), or refill it for the time since it was last
-- refilled, up to its burst, on the database's clock. The row stays locked
-- until the claim's transaction ends, so two runs claiming the same rated queue
-- take their tokens one after the other, never both from the same ones.
-- The run's own rate is written on the row: the last run to claim sets it.
-- Parameters: jobs_table (text), queue (text), starts (int), period (float8),
-- burst (float8).
-- Locks: the bucket's row (a run claiming the same queue waits for it, for as
-- long as one claim takes).
INSERT INTO {rates} AS r (jobs_table, queue, starts, period_seconds, burst, tokens, refilled_at)
VALUES (%(jobs_table)s, %(queue)s, %(starts)s, %(period)s, %(burst)s, %(burst)s,
        clock_timestamp())
ON CONFLICT (jobs_table, queue) DO UPDATE
SET tokens = least(
        excluded.burst,
        r.tokens + greatest(0.0, extract(epoch FROM clock_timestamp() - r.refilled_at))
                   * excluded.starts / excluded.period_seconds),
    refilled_at = clock_timestamp(),
    starts = excluded.starts,
    period_seconds = excluded.period_seconds,
    burst = excluded.burst
