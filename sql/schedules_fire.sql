-- schedules_fire: enqueue the due fires of several schedules and advance each
-- schedule past them, in one statement, so that any number of runs racing enqueue
-- each fire exactly once. A schedule is fired only if its row is still the one the
-- run read (same next_fire and updated_at): a rival run that fired it first moved
-- next_fire on, an update or a delete changed or removed the row, and the run then
-- enqueues nothing for it. Rows another transaction holds are skipped, never
-- waited for: whoever holds them fires them.
-- Parameters: jobs_table (text); per schedule, in arrays of one order: names,
-- expected_next, expected_updated, new_last (NULL: no fire was due after all, as
-- on a daylight-saving day), new_next (timestamptz); per job to
-- enqueue: fire_names (text[]) and fire_times (timestamptz[]).
-- Locks: the fired schedules' rows; the new jobs' rows.
WITH wanted AS (
    SELECT * FROM unnest(%(names)s::text[], %(expected_next)s::timestamptz[],
                         %(expected_updated)s::timestamptz[], %(new_last)s::timestamptz[],
                         %(new_next)s::timestamptz[])
                  AS w(name, expected_next, expected_updated, new_last, new_next)
), held AS MATERIALIZED (
    SELECT s.name, w.new_last, w.new_next
      FROM {schedules} AS s
      JOIN wanted AS w ON w.name = s.name
     WHERE s.jobs_table = %(jobs_table)s
       AND s.next_fire = w.expected_next AND s.updated_at = w.expected_updated
     ORDER BY s.name
       FOR UPDATE OF s SKIP LOCKED
), fired AS (
    UPDATE {schedules} AS s
       SET last_fire = coalesce(held.new_last, s.last_fire), next_fire = held.new_next, fired_at = now()
      FROM held
     WHERE s.jobs_table = %(jobs_table)s AND s.name = held.name
    RETURNING s.name, s.queue, s.payload, s.max_attempts
), fires AS (
    SELECT fired.queue, fired.payload, fire.at, fired.max_attempts, fired.name
      FROM fired
      JOIN unnest(%(fire_names)s::text[], %(fire_times)s::timestamptz[]) AS fire(name, at)
        ON fire.name = fired.name
), enqueued AS (
    INSERT INTO {jobs} (queue, payload, run_at, max_attempts)
    SELECT queue, payload, at, max_attempts FROM fires ORDER BY name, at
    RETURNING id
)
SELECT fired.name, (SELECT count(*) FROM fires WHERE fires.name = fired.name)::int AS enqueued
  FROM fired
 ORDER BY fired.name
