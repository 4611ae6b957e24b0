-- cap_room: how many more jobs of a capped queue may run, across every run: the
-- cap less the queue's running jobs (on the running index), kept for the claim
-- that follows in the same transaction (set_config(..., true) ends with it) and
-- returned, so an empty claim can tell "no place" from "no job".
-- Parameters: queue (text), cap (int).
-- Locks: none (cap_lock serialises the claims).
SELECT set_config('drain.claim_room',
                  greatest(0, %(cap)s - count(*))::text, true)::int AS room
  FROM {jobs}
 WHERE queue = %(queue)s AND status = 'running'
