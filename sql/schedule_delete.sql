-- schedule_delete: remove a recurring job's schedule; jobs it already enqueued stay.
-- A run firing it at the same moment either enqueued its fire before the delete
-- or finds the row gone and enqueues nothing.
-- Parameters: jobs_table (text), name (text).
-- Locks: the schedule's row.
DELETE FROM {schedules} WHERE jobs_table = %(jobs_table)s AND name = %(name)s
RETURNING name
