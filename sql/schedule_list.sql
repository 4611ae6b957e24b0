-- schedule_list: every schedule of one queue table, by name, with the database's
-- time so a reader can say what is due and how late the last fire was enqueued.
-- Parameters: jobs_table (text).
-- Locks: none.
SELECT name, cron, time_zone, queue, payload::text, max_attempts, catch_up, catch_up_limit,
       next_fire, last_fire, fired_at, created_at, updated_at, now() AS database_time
  FROM {schedules}
 WHERE jobs_table = %(jobs_table)s
 ORDER BY name
