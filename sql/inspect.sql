-- inspect: what a run must know before it writes anything: does the queue table
-- exist (and its oid), which columns and version comment does it have, do the archive, run
-- and schedule tables exist, and can this server take writes at all.
-- When max_runners is above 0 it also tries to take one of that many runner
-- slots (session advisory locks, held without a transaction until the
-- connection closes); slot is NULL when every slot is taken.
-- Parameters: schema, jobs, archive, runs, schedules (plain names, quoted on the server by
-- format's %I), lock_key (int), max_runners (int).
-- Locks: no rows; at most one advisory lock.
WITH target AS (
    SELECT to_regclass(format('%%I.%%I', %(schema)s::text, %(jobs)s::text)) AS jobs,
           to_regclass(format('%%I.%%I', %(schema)s::text, %(archive)s::text)) AS archive,
           to_regclass(format('%%I.%%I', %(schema)s::text, %(runs)s::text)) AS runs,
           to_regclass(format('%%I.%%I', %(schema)s::text, %(schedules)s::text)) AS schedules
)
SELECT target.jobs IS NOT NULL AS jobs_exists,
       target.jobs::oid AS table_oid,
       obj_description(target.jobs, 'pg_class') AS comment,
       (SELECT coalesce(jsonb_object_agg(a.attname, format_type(a.atttypid, a.atttypmod)), '{{}}')
          FROM pg_attribute AS a
         WHERE a.attrelid = target.jobs AND a.attnum > 0 AND NOT a.attisdropped) AS columns,
       target.archive IS NOT NULL AS archive_exists,
       target.runs IS NOT NULL AS runs_exists,
       target.schedules IS NOT NULL AS schedules_exists,
       pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on' AS read_only,
       (SELECT slot FROM generate_series(1, %(max_runners)s) AS slot
         WHERE pg_try_advisory_lock(%(lock_key)s::int, slot)
         LIMIT 1) AS runner_slot
FROM target
