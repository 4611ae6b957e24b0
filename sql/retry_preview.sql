-- retry_preview: what retry would put back, without changing anything (drain
-- retry --dry-run): how many failed jobs match the same filters as retry, the
-- first few ids, and the count per queue.
-- Parameters: queues (text[]), ids (bigint[]), error_contains (text), each NULL
-- when not given; sample (int).
-- Locks: none.
WITH matched AS (
    SELECT id, queue FROM {jobs}
    WHERE status = 'failed'
      AND (%(queues)s::text[] IS NULL OR queue = ANY(%(queues)s::text[]))
      AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
      AND (%(error_contains)s::text IS NULL
           OR strpos(lower(last_error), lower(%(error_contains)s::text)) > 0)
)
SELECT (SELECT count(*) FROM matched) AS jobs,
       (SELECT coalesce(array_agg(id ORDER BY id), '{{}}')
          FROM (SELECT id FROM matched ORDER BY id LIMIT %(sample)s) AS first) AS sample,
       (SELECT coalesce(jsonb_object_agg(queue, jobs), '{{}}')
          FROM (SELECT queue, count(*) AS jobs FROM matched GROUP BY queue) AS per) AS per_queue
