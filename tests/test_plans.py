"""Every queue statement keeps a plan linear in its batch, whatever the statistics say.

A benchmark refills its table and analyzes it with the jobs queued; a deployment
runs on one long-lived table whose statistics were last taken by drain's own
end-of-run VACUUM (ANALYZE), with every job done. The planner then believes
nothing is queued, and a plan that was linear with fresh statistics can turn
quadratic (issue 13: a claim of 1,000 spent 0.5 s, one of 10,000 55 s, in a
nested loop that threw 499,500 rows away in its join filter). So each statement
is explained here, as drain sends it (the functions of ``drain.store.claims``, ``fencing`` and ``upkeep``, with
their own parameters), in each state a table lives through:

* ``no-statistics``: a fresh table, never analyzed;
* ``queued-statistics``: analyzed with everything queued (the benchmark's case);
* ``done-statistics``: every job done, then drain's own ``sql/vacuum.sql``, then a
  burst (the state each run leaves for the next);
* ``stale-history``: 1,000,000 done rows under 100 queued, the statistics last
  taken by drain's vacuum when the history was a hundredth of that size;
* ``after-archive``: every row archived away, drain's vacuum, then a burst.

The claim by priority (sql/claim_priority.sql) is explained in each of these
states too, on a table that had the priority column before its rows arrived
(``priority:<state>``, priorities 0 to 2), and must keep the same shape on the
priority index.

Autovacuum is off for the table, so no statistics arrive behind the test's back.
Each state is built once per module as a template database and copied for every
test (the million rows of stale-history are shared instead; see
:meth:`States.database`). Each test's own set-up and statements are rolled back.

What each test asserts: the claim keeps its shape (Limit -> LockRows -> Index
Scan on the ready index, then the primary key once for the claimed rows); no
statement reads the table whole when it is bigger than the batch, throws away
more rows in a join filter than the batch, or touches more than ``budget(batch)``
rows. The archive may read the table to find its batch (no index serves that
selection) but must reach the rows it found only once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from drain.core.config import DEFAULT_ARCHIVE_AFTER, DEFAULT_ARCHIVE_BATCH
from drain.core.jobs import Attempt
from drain.core.settings import ArchiveMode
from drain.core.table import JobTable
from drain.store import claims, fencing, upkeep
from drain.store.sqlfiles import statement_for
from tests.support import add_jobs, with_dbname
from tests.support.plans import (
    ExplainingConnection,
    Plan,
    assert_join_filters_within,
    assert_no_seq_scan,
    assert_reached_once_by_key,
    assert_rows_touched_within,
    explain,
    head_look,
    selection_under_lock,
    touched,
)
from tests.support.priority import add_priority_column, priority_index_name

TABLE = JobTable()
BATCHES = (100, 1_000, 10_000)
BURSTS = ("no-statistics", "queued-statistics", "done-statistics", "after-archive")
STATES = (*BURSTS, "stale-history")
# The same states on a table with the priority column (drain migrate --with priority).
PRIORITY = "priority:"
PRIORITY_STATES = tuple(PRIORITY + state for state in STATES)
HISTORY = 1_000_000  # done rows under the stale-history state's 100 queued jobs
STALE_AT = 10_000  # how many of them there were when the statistics were taken
HISTORY_QUEUED = 100
HISTORY_OLD = 5_000  # of them past the retention, waiting for the archive
RETENTION = timedelta(seconds=DEFAULT_ARCHIVE_AFTER)
# A table of a few pages is read faster whole than through an index, and the
# planner rightly says so: every state holds at least this many queued jobs, so
# a sequential scan is a real cost wherever it appears.
MIN_QUEUED = 5_000


def queued_for(batch: int) -> int:
    return max(2 * batch, MIN_QUEUED)


def budget(batch: int) -> int:
    """Rows a linear statement may touch for a batch: a small multiple, plus slack."""
    return 4 * batch + 100


# -- building the states ---------------------------------------------------------------


def _vacuum_as_a_run_does(conn: psycopg.Connection[Any]) -> None:
    """drain's end-of-run vacuum, the statement itself (whatever columns it analyzes)."""
    conn.execute(statement_for(TABLE, "vacuum"))


def _base(state: str) -> str:
    """The statistics state of a state's name: ``priority:done-statistics`` is the
    done-statistics state of a table with the priority column."""
    return state.removeprefix(PRIORITY)


def _build(conn: psycopg.Connection[Any], state: str, batch: int) -> None:
    if state.startswith(PRIORITY):
        # The column and index as the migration adds them, before any row: every job
        # the state puts in takes a priority of 0, 1 or 2 (a volatile default, reset
        # to the migration's 0 once the state is built).
        add_priority_column(conn)
        conn.execute("ALTER TABLE jobs ALTER COLUMN priority SET DEFAULT (random() * 2)::int")
        _build(conn, _base(state), batch)
        conn.execute("ALTER TABLE jobs ALTER COLUMN priority SET DEFAULT 0")
        return
    conn.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")
    burst = queued_for(batch)
    if state == "no-statistics":
        add_jobs(conn, burst)
    elif state == "queued-statistics":
        add_jobs(conn, burst)
        conn.execute("VACUUM (ANALYZE) jobs")
    elif state == "done-statistics":
        add_jobs(conn, burst, status="done", attempts=1)
        _vacuum_as_a_run_does(conn)
        add_jobs(conn, burst)
    elif state == "after-archive":
        add_jobs(conn, burst, status="done", attempts=1, created_ago=DEFAULT_ARCHIVE_AFTER + 86400)
        oid = conn.execute("SELECT 'jobs'::regclass::oid").fetchone()[0]  # type: ignore[index]
        outcome = upkeep.archive(conn, TABLE, oid, DEFAULT_ARCHIVE_AFTER, DEFAULT_ARCHIVE_BATCH)
        assert outcome.archived == burst and outcome.complete
        _vacuum_as_a_run_does(conn)
        add_jobs(conn, burst)
    elif state == "stale-history":
        # One history, oldest rows first (lowest ids), as a table that grew run
        # after run has it: drain's vacuum took the statistics when the first
        # hundredth of it was there, and none since (the compute slept through
        # autovacuum's chances). The oldest rows are past the retention and
        # fewer than an archive batch, as each run finds them (earlier runs took
        # the rest); no row is near the retention, so none crosses it mid-test.
        history = (
            "INSERT INTO jobs (queue, payload, status, attempts, created_at) "
            "SELECT 'default', jsonb_build_object('n', g), 'done', 1, "
            "       now() - CASE WHEN g <= %(old)s THEN %(retention)s + interval '1 day' "
            "                    ELSE interval '6 days' * (%(rows)s - g) / %(rows)s END "
            "FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g"
        )
        shape = {"rows": HISTORY, "old": HISTORY_OLD, "retention": RETENTION}
        conn.execute(history, {**shape, "first": 1, "last": STALE_AT})
        _vacuum_as_a_run_does(conn)
        conn.execute(history, {**shape, "first": STALE_AT + 1, "last": HISTORY})
        add_jobs(conn, HISTORY_QUEUED)
    else:
        raise ValueError(state)


class States:
    """One template database per state (and batch), built on first use, copied per test."""

    def __init__(self, server_dsn: str, template: str) -> None:
        self.server_dsn = server_dsn
        self.template = template
        self.built: dict[tuple[str, int], str] = {}

    def _create(self, name: str, template: str) -> None:
        with psycopg.connect(self.server_dsn, autocommit=True) as admin:
            admin.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                    sql.Identifier(name), sql.Identifier(template)
                )
            )

    def _drop(self, name: str) -> None:
        with psycopg.connect(self.server_dsn, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    def template_for(self, state: str, batch: int) -> str:
        key = (state, 0 if _base(state) == "stale-history" else batch)
        if key not in self.built:
            name = f"drain_plans_{uuid.uuid4().hex[:10]}"
            self._create(name, self.template)
            try:
                with psycopg.connect(with_dbname(self.server_dsn, name), autocommit=True) as conn:
                    _build(conn, state, batch)
            except BaseException:
                self._drop(name)
                raise
            self.built[key] = name
        return self.built[key]

    @contextmanager
    def database(self, state: str, batch: int) -> Iterator[str]:
        """A database in ``state``: a copy of its template, or the template itself.

        The stale-history state's million rows take seconds to copy, so its
        tests share the template and leave it as they found it (everything they
        do is rolled back, see :func:`explaining`). A rolled-back update leaves
        dead rows behind, which a million rows hardly notice; the small states'
        tables would, so each of their tests gets a copy of its own.
        """
        template = self.template_for(state, batch)
        if _base(state) == "stale-history":
            yield with_dbname(self.server_dsn, template)
            return
        name = f"drain_plans_{uuid.uuid4().hex[:10]}"
        self._create(name, template)
        try:
            yield with_dbname(self.server_dsn, name)
        finally:
            self._drop(name)

    def close(self) -> None:
        for name in self.built.values():
            self._drop(name)


@pytest.fixture(scope="module")
def states(server_dsn: str, template_name: str) -> Iterator[States]:
    built = States(server_dsn, template_name)
    try:
        yield built
    finally:
        built.close()


@contextmanager
def explaining(states: States, state: str, batch: int) -> Iterator[ExplainingConnection]:
    """A connection to a database in ``state``, inside a transaction that is rolled back.

    The test's own set-up (jobs put in the running state, say) happens in that
    transaction too, with no statistics taken, as happens between two analyzes.
    """
    with (
        states.database(state, batch) as dsn,
        ExplainingConnection.connect(dsn, autocommit=True, prepare_threshold=None) as conn,
        conn.transaction(force_rollback=True),
    ):
        yield conn


def _primary_key(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute(
        "SELECT conname FROM pg_constraint WHERE conrelid = 'jobs'::regclass AND contype = 'p'"
    ).fetchone()
    assert row is not None
    return str(row[0])


_CLAIM_OLDEST_QUEUED = (
    "UPDATE jobs SET status = 'running', attempts = attempts + 1, "
    "       locked_until = now() + make_interval(secs => %(lease_left)s) "
    "WHERE id = ANY (ARRAY(SELECT id FROM jobs WHERE status = 'queued' "
    "                      ORDER BY id LIMIT %(batch)s)) "
    "RETURNING id, attempts"
)
_CLAIM_NEWEST_DONE = (
    "UPDATE jobs SET status = 'running', attempts = attempts + 1, "
    "       locked_until = now() + make_interval(secs => %(lease_left)s) "
    "WHERE id = ANY (ARRAY(SELECT id FROM jobs WHERE status = 'done' "
    "                      ORDER BY id DESC LIMIT %(batch)s)) "
    "RETURNING id, attempts"
)


def _claimed(
    conn: psycopg.Connection[Any], batch: int, *, lease_left: float = 300.0
) -> list[Attempt]:
    """``batch`` jobs put in the state a claim leaves them in: running, leased.

    The oldest queued jobs, as a claim takes them; where fewer are queued than
    the batch (the stale-history state has 100), the newest done rows make up
    the rest, so the statements on claimed jobs meet a long history under a
    full batch. Set up without the claim, so these tests do not depend on its
    plan.
    """
    claimed: list[Attempt] = []
    for pick in (_CLAIM_OLDEST_QUEUED, _CLAIM_NEWEST_DONE):
        rows = conn.execute(
            pick, {"batch": batch - len(claimed), "lease_left": lease_left}
        ).fetchall()
        claimed += [Attempt(job_id, attempt) for job_id, attempt in rows]
    assert len(claimed) == batch
    return claimed


def _params(states: tuple[str, ...], batches: tuple[int, ...]) -> list[Any]:
    return [
        pytest.param(state, batch, id=f"{state}-{batch}") for state in states for batch in batches
    ]


# -- the claim ---------------------------------------------------------------------------


@pytest.mark.parametrize(("state", "batch"), _params(STATES, BATCHES))
def test_claim_plan_is_linear_in_its_batch(states: States, state: str, batch: int) -> None:
    with explaining(states, state, batch) as conn:
        primary_key = _primary_key(conn)
        plan = explain(conn, lambda c: claims.send_claim(c, TABLE, "default", batch).result())
    claimed = min(batch, HISTORY_QUEUED if state == "stale-history" else queued_for(batch))
    selection = selection_under_lock(plan)
    assert (selection["Node Type"], selection.get("Index Name")) == (
        "Index Scan",
        "jobs_ready_idx",
    ), f"the claim does not select through an Index Scan on jobs_ready_idx:\n{plan.render()}"
    assert float(selection["Actual Rows"]) == claimed, plan.render()
    update_side = _update_side(plan, selection)
    assert update_side, f"the update reads no rows of jobs:\n{plan.render()}"
    assert_reached_once_by_key(plan, "jobs", primary_key, update_side, most=batch)
    assert_no_seq_scan(plan, "jobs")
    assert_join_filters_within(plan, batch)
    assert_rows_touched_within(plan, "jobs", budget(batch))


@pytest.mark.parametrize(("state", "batch"), _params(PRIORITY_STATES, BATCHES))
def test_priority_claim_plan_is_linear_in_its_batch(states: States, state: str, batch: int) -> None:
    """The claim by priority (sql/claim_priority.sql) keeps the claim's shape, on
    <table>_priority_idx, which hands rows over in priority then run_at order."""
    with explaining(states, state, batch) as conn:
        primary_key = _primary_key(conn)
        plan = explain(
            conn,
            lambda c: claims.send_claim(c, TABLE, "default", batch, by_priority=True).result(),
        )
    stale = _base(state) == "stale-history"
    claimed = min(batch, HISTORY_QUEUED if stale else queued_for(batch))
    selection = selection_under_lock(plan)
    assert (selection["Node Type"], selection.get("Index Name")) == (
        "Index Scan",
        priority_index_name(TABLE),
    ), f"the claim does not select through an Index Scan on the priority index:\n{plan.render()}"
    assert float(selection["Actual Rows"]) == claimed, plan.render()
    update_side = _update_side(plan, selection)
    assert update_side, f"the update reads no rows of jobs:\n{plan.render()}"
    assert_reached_once_by_key(plan, "jobs", primary_key, update_side, most=batch)
    assert_no_seq_scan(plan, "jobs")
    assert_join_filters_within(plan, batch)
    assert_rows_touched_within(plan, "jobs", budget(batch))


# -- statements on claimed jobs ----------------------------------------------------------


FencedCall = Callable[[ExplainingConnection, list[Attempt]], object]
# The statements that change claimed jobs, in the order a run may send them.
FENCED: dict[str, FencedCall] = {
    "complete": lambda c, jobs: fencing.send_complete(c, TABLE, jobs).result(),
    "fail": lambda c, jobs: fencing.send_fail(
        c, TABLE, [fencing.Failure(j, "boom") for j in jobs]
    ).result(),
    "snooze": lambda c, jobs: fencing.send_snooze(
        c, TABLE, [fencing.Snooze(j, delay=60) for j in jobs]
    ).result(),
    "extend": lambda c, jobs: fencing.extend(c, TABLE, jobs),
    "release": lambda c, jobs: fencing.release(c, TABLE, jobs),
}


def _update_side(plan: Plan, selection: dict[str, Any]) -> list[dict[str, Any]]:
    """The claim's scans of jobs besides its selection and its look at the head,
    which reads one row at most."""
    head = head_look(plan, "jobs")
    assert head and all(touched(node) <= 1 for node in head), plan.render()
    apart = {id(selection), *map(id, head)}
    return [node for node in plan.scans("jobs") if id(node) not in apart]


def _check_linear(plan: Plan, batch: int) -> None:
    """Linear in the batch: no long sequential scan, no wasteful join, few rows read.

    A small table may be read whole (the planner rightly does so), so a
    sequential scan fails here only when it reads more than the batch's budget.
    """
    assert_no_seq_scan(plan, "jobs", tolerated_rows=budget(batch))
    assert_join_filters_within(plan, batch)
    assert_rows_touched_within(plan, "jobs", budget(batch))


@pytest.mark.parametrize(("state", "batch"), _params(STATES, BATCHES))
def test_statements_on_claimed_jobs_are_linear(states: States, state: str, batch: int) -> None:
    """complete, fail, snooze, extend and release, fenced by id and attempt.

    One copy of the state serves all five (a copy each would triple this
    file's time): each is rolled back, so each finds the jobs as the claim left
    them, beside the dead row versions the ones before it left, as a busy
    table has them.
    """
    failures: list[str] = []
    with explaining(states, state, batch) as conn:
        jobs = _claimed(conn, batch)
        for name, call in FENCED.items():
            plan = explain(conn, lambda c, call=call: call(c, jobs))  # type: ignore[misc]
            try:
                _check_linear(plan, batch)
            except AssertionError as exc:
                failures.append(f"{name}: {exc}")
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize(("state", "batch"), _params(STATES, BATCHES))
def test_confirm_outcomes_is_linear(states: States, state: str, batch: int) -> None:
    """After a reconnect, the outcomes of the attempts a repeated statement missed.

    The attempts it asks about finished (done here), as after a completion
    whose reply was lost.
    """
    with explaining(states, state, batch) as conn:
        jobs = _claimed(conn, batch)
        fencing.send_complete(conn, TABLE, jobs).result()
        plan = explain(conn, lambda c: fencing.confirm_outcomes(c, TABLE, jobs))
    _check_linear(plan, batch)


# -- statements on the whole table -------------------------------------------------------


@pytest.mark.parametrize(("state", "batch"), _params(STATES, (1_000,)))
def test_reap_reads_only_the_expired_leases(states: States, state: str, batch: int) -> None:
    with explaining(states, state, batch) as conn:
        _claimed(conn, batch, lease_left=-1)
        plan = explain(conn, lambda c: upkeep.reap(c, TABLE))
    _check_linear(plan, batch)


@pytest.mark.parametrize(("state", "batch"), _params(STATES, (1_000,)))
def test_ready_left_reads_one_ready_row(states: States, state: str, batch: int) -> None:
    with explaining(states, state, batch) as conn:
        plan = explain(conn, lambda c: upkeep.ready_left(c, TABLE, ["default"]))
    _check_linear(plan, 1)


def _finished_long_ago(conn: psycopg.Connection[Any], count: int) -> int:
    """Rows past the retention for the archive to take; how many there are in all.

    The stale-history state has its own (the oldest of its history); the other
    states get ``count`` of their queued jobs turned into old done ones, without
    new statistics, as jobs finished since the statistics were taken.
    """
    conn.execute(
        "UPDATE jobs SET status = 'done', attempts = 1, "
        "       created_at = now() - make_interval(secs => %(age)s) "
        "WHERE id = ANY (ARRAY(SELECT id FROM jobs WHERE status = 'queued' "
        "                      ORDER BY id LIMIT %(count)s))",
        {"count": count, "age": DEFAULT_ARCHIVE_AFTER + 86400},
    )
    row = conn.execute(
        "SELECT count(*) FROM jobs "
        "WHERE status = 'done' AND created_at < now() - make_interval(secs => %s)",
        [DEFAULT_ARCHIVE_AFTER],
    ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("mode", ["move", "delete"])
@pytest.mark.parametrize(("state", "batch"), _params(STATES, (1_000,)))
def test_archive_reaches_each_archived_row_once(
    states: States, state: str, batch: int, mode: ArchiveMode
) -> None:
    """The archive's selection may read the table; the delete reaches each row once.

    No index serves the selection (done rows past the retention): it is a
    sequential scan under Limit -> LockRows, and the batch that comes back short
    (every run's last) reads the whole table. On the stale-history state's
    1,000,000 rows that took 200 to 400 ms (PostgreSQL 15 and 18, a busy 2-core
    machine). What must not happen on top of it is a second pass over the table
    to find the selected rows again.
    """
    with explaining(states, state, batch) as conn:
        primary_key = _primary_key(conn)
        old = _finished_long_ago(conn, 0 if state == "stale-history" else batch)
        oid = conn.execute("SELECT 'jobs'::regclass::oid").fetchone()[0]  # type: ignore[index]
        plan = explain(
            conn,
            lambda c: upkeep.archive(
                c, TABLE, oid, DEFAULT_ARCHIVE_AFTER, DEFAULT_ARCHIVE_BATCH, mode
            ),
        )
    archived = min(old, DEFAULT_ARCHIVE_BATCH)
    selection = selection_under_lock(plan)
    assert float(selection["Actual Rows"]) == archived, plan.render()
    delete_side = [node for node in plan.scans("jobs") if node is not selection]
    assert_reached_once_by_key(
        plan, "jobs", primary_key, delete_side, most=budget(archived), lookups_per_row=True
    )
    assert_join_filters_within(plan, archived)
    assert_rows_touched_within(plan, "jobs", budget(archived), leaving_out=selection)
