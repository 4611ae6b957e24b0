-- jobs_list: the newest jobs (highest id first) of any status, or of one status
-- that has no index of its own (done, failed), optionally of one queue; for
-- drain jobs. The table keeps no finish time, so "newest" is the id order.
-- The plan is a backward walk of the primary key that stops after limit rows
-- match (a keyset scan): on 1,000,000 rows it reads a few pages when the
-- matching jobs are common, and one pass of the key at worst (a rare status
-- or queue whose jobs are all old); never a sort of the whole table.
-- Times come as epoch seconds, so an infinite run_at (a hand-made row) is a
-- float infinity, not a value the driver refuses. The error is cut on the
-- server at the length drain stores (so a huge one never crosses the wire) and
-- redacted by drain before it is shown.
-- Parameters: status (text or NULL), queue (text or NULL), limit (int),
-- error_length (int).
-- Locks: none.
SELECT id, queue, status, attempts, max_attempts,
       extract(epoch FROM run_at)::float8 AS run_at,
       extract(epoch FROM created_at)::float8 AS created_at,
       extract(epoch FROM locked_until)::float8 AS locked_until,
       left(last_error, %(error_length)s) AS last_error
FROM {jobs}
WHERE (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
ORDER BY id DESC
LIMIT %(limit)s
