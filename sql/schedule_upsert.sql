-- schedule_upsert: add a recurring job's schedule, or replace the one of that
-- name, in the caller's transaction. An update starts the schedule afresh: its
-- next fire is the first after the update (a fire due and not yet enqueued is
-- dropped), and its last fire is kept for the record.
-- Parameters: jobs_table (text, schema.table), name, cron, time_zone, queue (text),
-- payload (jsonb as text), max_attempts, catch_up_limit (int), catch_up (text),
-- next_fire (timestamptz, computed by drain from the database's now()).
-- Locks: the schedule's row.
INSERT INTO {schedules} AS s (jobs_table, name, cron, time_zone, queue, payload, max_attempts,
                              catch_up, catch_up_limit, next_fire)
VALUES (%(jobs_table)s, %(name)s, %(cron)s, %(time_zone)s, %(queue)s, %(payload)s::jsonb,
        %(max_attempts)s, %(catch_up)s, %(catch_up_limit)s, %(next_fire)s)
ON CONFLICT (jobs_table, name) DO UPDATE
   SET cron = excluded.cron, time_zone = excluded.time_zone, queue = excluded.queue,
       payload = excluded.payload, max_attempts = excluded.max_attempts,
       catch_up = excluded.catch_up, catch_up_limit = excluded.catch_up_limit,
       next_fire = excluded.next_fire, updated_at = now()
RETURNING (xmax = 0) AS created
