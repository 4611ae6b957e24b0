-- database_time: a point in time on the database clock, the given time or
-- now() + delay, so a bulk enqueue schedules its jobs by the server's clock
-- rather than the client's.
-- Parameters: run_at (timestamptz or NULL), delay (interval).
-- Locks: none.
SELECT coalesce(%(run_at)s::timestamptz, now() + %(delay)s)
