-- rate_table: the token buckets of --queue-rate, one row per queue table and
-- queue, shared by every run of every table in the schema (like drain_runs).
-- A bucket holds at most `burst` tokens and refills at starts / period_seconds
-- a second; each claim of a rated queue takes a token per job it may lease
-- (rate_take.sql), in the claim's own transaction, and gives back what it did
-- not lease (rate_refund.sql). The rate a run was given is kept on the row, so
-- drain status can say what it means for the backlog.
-- Created by the first run given --queue-rate (after rate_exists.sql found it
-- missing), so a worker role that may not create tables needs it made once by
-- the owner: this statement, as it is.
-- Placeholders (identifiers, quoted by the driver): rates.
-- Locks: none on the queue table.
CREATE TABLE IF NOT EXISTS {rates} (
    jobs_table     text             NOT NULL,
    queue          text             NOT NULL,
    starts         int              NOT NULL CHECK (starts >= 1),
    period_seconds double precision NOT NULL CHECK (period_seconds > 0),
    burst          double precision NOT NULL CHECK (burst >= 1),
    tokens         double precision NOT NULL CHECK (tokens >= 0),
    refilled_at    timestamptz      NOT NULL,
    PRIMARY KEY (jobs_table, queue)
)
