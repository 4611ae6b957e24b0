-- status_priorities: the ready jobs of each queue by priority, for drain status
-- on a table with the priority column (sent only when the schema check found it).
-- Parameters: none.
-- Locks: none. Read through <table>_priority_idx (queue, priority DESC, run_at)
-- WHERE status = 'queued'.
SELECT queue, priority, count(*) AS ready
FROM {jobs}
WHERE status = 'queued' AND run_at <= now()
GROUP BY queue, priority
ORDER BY queue, priority DESC
