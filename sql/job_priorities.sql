-- job_priorities: the priority of each listed job, for drain jobs on a table
-- with the priority column (the listing statements read only the article's
-- columns, so they work on every table; this one is sent only when the schema
-- check found the column).
-- Parameters: ids (bigint[]).
-- Locks: none. Reaches each row through the primary key.
SELECT id, priority
FROM {jobs}
WHERE id = ANY (%(ids)s::bigint[])
