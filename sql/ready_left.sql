-- ready_left: whether any of the given queues still has a job ready now; asked
-- only when a run stops on its budget, to choose between exit 0 and exit 3.
-- Parameters: queues (text[]).
-- Locks: none.
SELECT EXISTS (
    SELECT 1 FROM {jobs}
    WHERE queue = ANY(%(queues)s::text[]) AND status = 'queued' AND run_at <= now()
)
