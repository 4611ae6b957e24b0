-- version: 1
-- 0001_schema: schema version 1, the queue table (the article's jobs table,
-- column for column), its ready index, drain's running index, the archive, the
-- run record and the recurring jobs' schedules.
-- Idempotent: every object is created only when missing, so it runs on a fresh
-- database, on a table made by hand from the article (drain migrate from version
-- 0), and again on a table it made, where it changes nothing but the comment.
-- Placeholders (identifiers, quoted by the driver): schema, jobs, archive, runs,
-- ready_index, running_index, runs_index, schedules, schedules_index;
-- version_comment is a literal.
-- Locks: drain init applies it to a new table in one transaction, CONCURRENTLY
-- left out (nothing else can use the table yet). drain migrate applies it to an
-- existing table one statement at a time: CREATE INDEX CONCURRENTLY takes no lock
-- that holds back enqueues or claims, and must run outside a transaction.
CREATE SCHEMA IF NOT EXISTS {schema};

CREATE TABLE IF NOT EXISTS {jobs} (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue        text        NOT NULL DEFAULT 'default',
    payload      jsonb       NOT NULL,
    status       text        NOT NULL DEFAULT 'queued'
                 CHECK (status IN ('queued', 'running', 'done', 'failed')),
    run_at       timestamptz NOT NULL DEFAULT now(),
    attempts     int         NOT NULL DEFAULT 0,
    max_attempts int         NOT NULL DEFAULT 5,
    locked_until timestamptz,
    last_error   text,
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX CONCURRENTLY IF NOT EXISTS {ready_index} ON {jobs} (queue, run_at) WHERE status = 'queued';

CREATE INDEX CONCURRENTLY IF NOT EXISTS {running_index} ON {jobs} (locked_until) WHERE status = 'running';

CREATE TABLE IF NOT EXISTS {archive} (
    id           bigint      PRIMARY KEY,
    queue        text        NOT NULL,
    payload      jsonb       NOT NULL,
    status       text        NOT NULL,
    run_at       timestamptz NOT NULL,
    attempts     int         NOT NULL,
    max_attempts int         NOT NULL,
    locked_until timestamptz,
    last_error   text,
    created_at   timestamptz NOT NULL,
    archived_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS {runs} (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    jobs_table   text             NOT NULL,
    started_at   timestamptz      NOT NULL,
    finished_at  timestamptz      NOT NULL DEFAULT now(),
    seconds      double precision NOT NULL,
    claimed      int              NOT NULL,
    done         int              NOT NULL,
    retried      int              NOT NULL,
    failed       int              NOT NULL,
    lost         int              NOT NULL,
    reaped       int              NOT NULL,
    released     int              NOT NULL,
    archived     int              NOT NULL,
    exit_reason  text             NOT NULL,
    exit_code    int              NOT NULL,
    error        text
);

CREATE INDEX CONCURRENTLY IF NOT EXISTS {runs_index} ON {runs} (jobs_table, started_at);

-- Recurring jobs: a run fires every schedule of its queue table whose next_fire
-- has come (drain.recurring), so the schedule lives here, not in a process.
-- next_fire is kept by drain (croniter, in the schedule's zone); last_fire is the
-- latest fire a run recorded, fired_at when that run enqueued it.
CREATE TABLE IF NOT EXISTS {schedules} (
    jobs_table     text        NOT NULL,
    name           text        NOT NULL,
    cron           text        NOT NULL,
    time_zone      text        NOT NULL DEFAULT 'UTC',
    queue          text        NOT NULL,
    payload        jsonb       NOT NULL DEFAULT '{{}}',
    max_attempts   int         NOT NULL DEFAULT 5,
    catch_up       text        NOT NULL DEFAULT 'latest'
                   CHECK (catch_up IN ('latest', 'all', 'none')),
    catch_up_limit int         NOT NULL DEFAULT 100 CHECK (catch_up_limit >= 1),
    next_fire      timestamptz NOT NULL,
    last_fire      timestamptz,
    fired_at       timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (jobs_table, name)
);

CREATE INDEX CONCURRENTLY IF NOT EXISTS {schedules_index} ON {schedules} (jobs_table, next_fire);

COMMENT ON TABLE {jobs} IS {version_comment};
