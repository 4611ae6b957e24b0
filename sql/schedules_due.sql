-- schedules_due: the schedules whose next fire has come, read by a run right
-- after it reaps. On the schedule index; no rows on nearly every run, so a run
-- with nothing due pays one cheap statement and never loads croniter.
-- Parameters: jobs_table (text).
-- Locks: none (schedules_fire re-checks each row under its lock).
SELECT name, cron, time_zone, queue, catch_up, catch_up_limit, next_fire, updated_at,
       now() AS database_time
  FROM {schedules}
 WHERE jobs_table = %(jobs_table)s AND next_fire <= now()
 ORDER BY name
