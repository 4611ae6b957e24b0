-- claim_time_limit: bound the next claim's run time, for the rest of the current
-- (implicit, pipelined) transaction only. The run's one connection is shared
-- with the lease keeper, which waits while a statement runs; a claim that ran
-- longer than a third of a lease (a bad plan, a server under load) would hold
-- back renewals until leases expired. A role's own statement_timeout is kept when
-- it is tighter. set_config(..., true) ends with the transaction, so nothing is
-- left on the session (safe behind a transaction pooler).
-- Parameters: limit (interval).
-- Locks: none.
SELECT set_config(
    'statement_timeout',
    CASE WHEN current_setting('statement_timeout')::interval > interval '0'
              AND current_setting('statement_timeout')::interval <= %(limit)s::interval
         THEN current_setting('statement_timeout')
         ELSE (ceil(extract(epoch FROM %(limit)s::interval) * 1000))::bigint::text
    END,
    true)
