"""The queue statements, one by one, on a real server: ownership, backoff, limits, archive."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest

from drain.core.jobs import Attempt
from drain.core.table import JobTable
from drain.store import claims, fencing, producer, upkeep
from drain.store.sqlfiles import statement_for
from tests.support import add_jobs, job, statuses
from tests.support.priority import add_priority_column


def expire(conn: psycopg.Connection[Any], job_id: int) -> None:
    """Make a running job's lease run out, as if its owner had stalled."""
    conn.execute(
        "UPDATE jobs SET locked_until = now() - interval '1 second' WHERE id = %s", (job_id,)
    )


def make_ready(conn: psycopg.Connection[Any], job_id: int) -> None:
    conn.execute("UPDATE jobs SET run_at = now() WHERE id = %s", (job_id,))


def test_claim_leases_ready_jobs_oldest_first(
    conn: psycopg.Connection[Any], table: JobTable
) -> None:
    later = add_jobs(conn, 1, run_in=-10)
    older = add_jobs(conn, 1, run_in=-60)
    add_jobs(conn, 1, run_in=3600)  # scheduled, not ready
    add_jobs(conn, 1, queue="other")

    claimed = claims.send_claim(conn, table, "default", 10, lease=120).result()

    assert [j.id for j in claimed.jobs] == [older[0], later[0]]
    assert all(j.attempt == 1 and j.queue == "default" for j in claimed.jobs)
    row = job(conn, older[0])
    assert row["status"] == "running"
    assert timedelta(seconds=118) < row["lease_left"] <= timedelta(seconds=120)


def test_a_claim_skips_a_ready_row_another_transaction_holds_instead_of_waiting(
    dsn: str, conn: psycopg.Connection[Any], table: JobTable
) -> None:
    """The article's whole point: SKIP LOCKED. The oldest ready row is locked in an
    open transaction (another worker mid-claim); a claim under a 200 ms
    lock_timeout returns the next rows at once, where a claim that waited for the
    lock would be cancelled by the timeout."""
    held, *rest = add_jobs(conn, 4, run_in=-60)
    with psycopg.connect(dsn) as holder:
        holder.execute("SELECT id FROM jobs WHERE id = %s FOR UPDATE", (held,))
        conn.execute("SET lock_timeout = '200ms'")
        try:
            claimed = claims.send_claim(conn, table, "default", 10).result()
        finally:
            conn.execute("RESET lock_timeout")
        holder.rollback()
    assert [j.id for j in claimed.jobs] == rest
    assert job(conn, held)["status"] == "queued"


def test_slow_owner_is_fenced_out_after_a_reap(
    conn: psycopg.Connection[Any], table: JobTable
) -> None:
    (job_id,) = add_jobs(conn, 1)
    first = claims.send_claim(conn, table, "default", 1).result().jobs[0]
    expire(conn, job_id)
    assert upkeep.reap(conn, table) == upkeep.ReapOutcome(requeued=1, failed=0)
    second = claims.send_claim(conn, table, "default", 1).result().jobs[0]
    assert (second.id, second.attempt) == (job_id, 2)

    stale_complete = fencing.send_complete(conn, table, [first]).result()
    stale_fail = fencing.send_fail(conn, table, [fencing.Failure(first, "late failure")]).result()
    stale_extend = fencing.extend(conn, table, [first], 600)

    assert stale_complete.lost == (job_id,) and not stale_complete.owned
    assert stale_fail.lost == (job_id,)
    assert stale_extend.lost == (job_id,)
    row = job(conn, job_id)
    assert (row["status"], row["attempts"], row["last_error"]) == ("running", 2, "lease expired")
    assert fencing.send_complete(conn, table, [second]).result().owned == {job_id}
    assert job(conn, job_id)["status"] == "done"


def test_backoff_doubles_on_the_database_clock_until_failed(
    conn: psycopg.Connection[Any], table: JobTable
) -> None:
    (job_id,) = add_jobs(conn, 1, max_attempts=5)
    delays = []
    for _ in range(4):
        claimed = claims.send_claim(conn, table, "default", 1).result().jobs[0]
        outcome = fencing.send_fail(
            conn, table, [fencing.Failure(claimed, "SMTP 451: try again later")]
        ).result()
        assert outcome.retried == (job_id,)
        row = job(conn, job_id)
        assert row["status"] == "queued" and row["locked_until"] is None
        delays.append(row["run_in"].total_seconds())
        make_ready(conn, job_id)
    assert [round(d) for d in delays] == [20, 40, 80, 160]
    assert all(abs(d - e) <= 1 for d, e in zip(delays, [20, 40, 80, 160], strict=True))

    last = claims.send_claim(conn, table, "default", 1).result().jobs[0]
    assert last.attempt == 5
    assert fencing.send_fail(
        conn, table, [fencing.Failure(last, "still failing")]
    ).result().failed == (job_id,)
    row = job(conn, job_id)
    assert (row["status"], row["attempts"], row["last_error"]) == ("failed", 5, "still failing")
    assert not claims.send_claim(conn, table, "default", 1).result()


def test_backoff_is_capped(conn: psycopg.Connection[Any], table: JobTable) -> None:
    (job_id,) = add_jobs(conn, 1, attempts=11, max_attempts=20)
    claimed = claims.send_claim(conn, table, "default", 1).result().jobs[0]
    fencing.send_fail(conn, table, [fencing.Failure(claimed, "boom")], base=10, cap=3600).result()
    assert job(conn, job_id)["run_in"] <= timedelta(hours=1)
    assert job(conn, job_id)["run_in"] > timedelta(minutes=59)


def test_permanent_failure_skips_the_remaining_attempts(
    conn: psycopg.Connection[Any], table: JobTable
) -> None:
    (job_id,) = add_jobs(conn, 1, max_attempts=5)
    claimed = claims.send_claim(conn, table, "default", 1).result().jobs[0]
    assert fencing.send_fail(
        conn, table, [fencing.Failure(claimed, "bad address", True)]
    ).result().failed == (job_id,)
    assert job(conn, job_id)["status"] == "failed"


def test_reaper_respects_max_attempts(conn: psycopg.Connection[Any], table: JobTable) -> None:
    exhausted = add_jobs(conn, 1, status="running", attempts=3, max_attempts=3, lease_left=-5)
    retryable = add_jobs(conn, 1, status="running", attempts=1, max_attempts=3, lease_left=-5)
    healthy = add_jobs(conn, 1, status="running", attempts=1, max_attempts=3, lease_left=60)

    assert upkeep.reap(conn, table) == upkeep.ReapOutcome(requeued=1, failed=1)
    assert job(conn, exhausted[0])["status"] == "failed"
    assert job(conn, exhausted[0])["last_error"] == "lease expired"
    assert job(conn, retryable[0])["status"] == "queued"
    assert job(conn, healthy[0])["status"] == "running"


@pytest.mark.parametrize("max_attempts", [0, -3])
def test_max_attempts_below_one_behaves_as_one(
    conn: psycopg.Connection[Any], table: JobTable, max_attempts: int
) -> None:
    (job_id,) = add_jobs(conn, 1, max_attempts=max_attempts)
    claimed = claims.send_claim(conn, table, "default", 1).result().jobs[0]
    assert claimed.max_attempts == 1
    assert fencing.send_fail(conn, table, [fencing.Failure(claimed, "boom")]).result().failed == (
        job_id,
    )
    assert job(conn, job_id)["attempts"] == 1


def test_exhausted_rows_do_not_block_the_head_of_the_queue(
    conn: psycopg.Connection[Any], table: JobTable
) -> None:
    stuck = add_jobs(conn, 3, attempts=5, max_attempts=5, run_in=-600)
    fresh = add_jobs(conn, 2, run_in=-1)

    first = claims.send_claim(conn, table, "default", 3).result()
    second = claims.send_claim(conn, table, "default", 3).result()

    assert sorted(first.exhausted) == sorted(stuck) and not first.jobs
    assert sorted(j.id for j in second.jobs) == sorted(fresh)
    assert all(job(conn, i)["status"] == "failed" and job(conn, i)["attempts"] == 5 for i in stuck)


def test_release_gives_the_attempt_back_and_the_job_is_claimable_at_once(
    conn: psycopg.Connection[Any], table: JobTable
) -> None:
    (job_id,) = add_jobs(conn, 1, run_in=-30)
    claimed = claims.send_claim(conn, table, "default", 1).result().jobs
    assert fencing.release(conn, table, claimed).owned == {job_id}
    row = job(conn, job_id)
    assert (row["status"], row["locked_until"]) == ("queued", None)
    # All 5 tries left, as before the claim; the attempt number is kept, never lowered.
    assert (row["attempts"], row["max_attempts"] - row["attempts"]) == (1, 5)
    again = claims.send_claim(conn, table, "default", 1).result().jobs
    assert [(j.id, j.attempt) for j in again] == [(job_id, 2)]
    # Sent again (its first reply lost), the release finds the new attempt's row
    # and leaves it alone.
    assert fencing.release(conn, table, claimed).owned == set()
    assert (job(conn, job_id)["status"], job(conn, job_id)["attempts"]) == ("running", 2)


def test_release_of_a_job_with_max_attempts_below_one_keeps_its_one_try(
    conn: psycopg.Connection[Any], table: JobTable
) -> None:
    (job_id,) = add_jobs(conn, 1, max_attempts=0)
    claimed = claims.send_claim(conn, table, "default", 1).result().jobs
    fencing.release(conn, table, claimed)
    again = claims.send_claim(conn, table, "default", 1).result()
    assert not again.exhausted
    assert [(j.id, j.attempt) for j in again.jobs] == [(job_id, 2)]


def test_extend_pushes_the_lease_and_zero_cuts_it(
    conn: psycopg.Connection[Any], table: JobTable
) -> None:
    (job_id,) = add_jobs(conn, 1)
    claimed = claims.send_claim(conn, table, "default", 1, lease=10).result().jobs
    assert fencing.extend(conn, table, claimed, 900).owned == {job_id}
    assert job(conn, job_id)["lease_left"] > timedelta(seconds=890)
    fencing.extend(conn, table, claimed, 0)
    conn.execute("SELECT pg_sleep(0.01)")
    assert upkeep.reap(conn, table).requeued == 1


def test_snooze_keeps_the_retries_and_moves_the_attempt_on(
    conn: psycopg.Connection[Any], table: JobTable
) -> None:
    (job_id,) = add_jobs(conn, 1, max_attempts=2)
    claimed = claims.send_claim(conn, table, "default", 1).result().jobs[0]
    assert fencing.send_snooze(conn, table, [fencing.Snooze(claimed, delay=90)]).result().owned == {
        job_id
    }
    row = job(conn, job_id)
    assert (row["status"], row["attempts"], row["max_attempts"]) == ("queued", 1, 3)
    assert timedelta(seconds=88) < row["run_in"] <= timedelta(seconds=90)
    assert fencing.send_complete(conn, table, [claimed]).result().lost == (job_id,)


def test_a_snooze_of_a_job_with_max_attempts_below_one_keeps_its_one_try(
    conn: psycopg.Connection[Any], table: JobTable
) -> None:
    (job_id,) = add_jobs(conn, 1, max_attempts=0)
    claimed = claims.send_claim(conn, table, "default", 1).result().jobs[0]
    fencing.send_snooze(conn, table, [fencing.Snooze(claimed, delay=90)]).result()
    conn.execute("UPDATE jobs SET run_at = now() WHERE id = %s", (job_id,))
    again = claims.send_claim(conn, table, "default", 1).result()
    assert not again.exhausted
    assert [(j.id, j.attempt) for j in again.jobs] == [(job_id, 2)]


INT_MAX = 2**31 - 1


def test_counters_stop_at_the_int_limit_instead_of_failing_the_batch(
    conn: psycopg.Connection[Any], table: JobTable
) -> None:
    """A max_attempts of 2147483647 ("retry forever") beside an ordinary job."""
    forever, mate = add_jobs(conn, 2, max_attempts=INT_MAX)
    conn.execute("UPDATE jobs SET max_attempts = 5 WHERE id = %s", (mate,))
    claimed = claims.send_claim(conn, table, "default", 2).result().jobs
    snoozes = [fencing.Snooze(j, delay=60) for j in claimed]
    assert fencing.send_snooze(conn, table, snoozes).result().owned == {forever, mate}
    assert (job(conn, forever)["max_attempts"], job(conn, mate)["max_attempts"]) == (INT_MAX, 6)
    conn.execute("UPDATE jobs SET run_at = now()")
    claimed = claims.send_claim(conn, table, "default", 2).result().jobs
    assert fencing.release(conn, table, claimed).owned == {forever, mate}
    assert (job(conn, forever)["max_attempts"], job(conn, mate)["max_attempts"]) == (INT_MAX, 7)


def test_backoff_never_leaves_the_interval_range(
    conn: psycopg.Connection[Any], table: JobTable
) -> None:
    """A 1-day base at attempt 41 (2^41 days) and an attempts far below zero."""
    high, low = add_jobs(conn, 2, max_attempts=100)
    conn.execute("UPDATE jobs SET attempts = 40 WHERE id = %s", (high,))
    conn.execute("UPDATE jobs SET attempts = -2147483648 WHERE id = %s", (low,))
    claimed = claims.send_claim(conn, table, "default", 2).result().jobs
    failures = [fencing.Failure(j, "boom") for j in claimed]
    outcome = fencing.send_fail(conn, table, failures, base=86400, cap=3600).result()
    assert sorted(outcome.retried) == sorted([high, low])
    assert timedelta(minutes=59) < job(conn, high)["run_in"] <= timedelta(hours=1)
    assert timedelta(minutes=59) < job(conn, low)["run_in"] <= timedelta(hours=1)


def test_a_release_the_table_refuses_fails_that_job_alone(
    conn: psycopg.Connection[Any], table: JobTable
) -> None:
    """A CHECK of the table's own refuses one row's new max_attempts; the rest go back."""
    conn.execute("ALTER TABLE jobs ADD CONSTRAINT few_attempts CHECK (max_attempts <= 100)")
    first, bad, *rest = add_jobs(conn, 5, run_in=-30)
    conn.execute("UPDATE jobs SET max_attempts = 100 WHERE id = %s", (bad,))
    claimed = claims.send_claim(conn, table, "default", 5).result().jobs

    released = fencing.release(conn, table, claimed)

    assert released.owned == {first, *rest} and released.failed == {bad}
    assert released.lost == ()
    row = job(conn, bad)
    assert (row["status"], row["locked_until"]) == ("failed", None)
    assert "release" in row["last_error"] and "few_attempts" in row["last_error"]
    assert statuses(conn) == {"queued": 4, "failed": 1}


def test_a_lease_extension_the_table_refuses_fails_that_job_alone(
    conn: psycopg.Connection[Any], table: JobTable
) -> None:
    """The refused job is failed and lost (its result can no longer be recorded)."""
    first, bad, last = add_jobs(conn, 3)
    claimed = claims.send_claim(conn, table, "default", 3).result().jobs
    check = "ALTER TABLE jobs ADD CONSTRAINT no_lease CHECK (id <> {} OR locked_until IS NULL)"
    conn.execute(psycopg.sql.SQL(check + " NOT VALID").format(psycopg.sql.Literal(bad)))

    extended = fencing.extend(conn, table, claimed, 900)

    assert extended.owned == {first, last}
    assert extended.failed == {bad} and extended.lost == (bad,)
    assert job(conn, bad)["status"] == "failed"
    assert "lease extension" in job(conn, bad)["last_error"]


def test_a_reap_the_table_refuses_for_one_row_reaps_the_rest(
    conn: psycopg.Connection[Any], table: JobTable
) -> None:
    """A CHECK of the table's own refuses one row's requeue: it alone is failed."""
    first, bad, last = add_jobs(conn, 3, status="running", attempts=1, lease_left=-5)
    check = "ALTER TABLE jobs ADD CONSTRAINT stays CHECK (id <> {} OR status <> 'queued')"
    conn.execute(psycopg.sql.SQL(check + " NOT VALID").format(psycopg.sql.Literal(bad)))

    assert upkeep.reap(conn, table) == upkeep.ReapOutcome(requeued=2, failed=1)
    assert (job(conn, first)["status"], job(conn, last)["status"]) == ("queued", "queued")
    assert job(conn, bad)["status"] == "failed"
    assert "reap" in job(conn, bad)["last_error"]


def test_archive_moves_only_old_done_jobs_in_batches(
    conn: psycopg.Connection[Any], table: JobTable
) -> None:
    old_done = add_jobs(conn, 35, status="done", attempts=1, created_ago=8 * 86400)
    add_jobs(conn, 5, status="done", attempts=1, created_ago=3600)
    for status in ("queued", "running", "failed"):
        add_jobs(conn, 2, status=status, created_ago=30 * 86400, lease_left=60)
    oid = conn.execute("SELECT 'jobs'::regclass::oid").fetchone()[0]  # type: ignore[index]

    outcome = upkeep.archive(conn, table, oid, older_than=7 * 86400, batch=10, mode="move")

    assert (outcome.archived, outcome.batches, outcome.complete) == (35, 4, True)
    archived = conn.execute("SELECT id FROM jobs_archive ORDER BY id").fetchall()
    assert [row[0] for row in archived] == old_done
    assert statuses(conn) == {"done": 5, "queued": 2, "running": 2, "failed": 2}
    stamped = conn.execute("SELECT count(*) FROM jobs_archive WHERE archived_at IS NOT NULL")
    assert stamped.fetchone() == (35,)


def test_archive_delete_mode_keeps_no_copy(conn: psycopg.Connection[Any], table: JobTable) -> None:
    add_jobs(conn, 12, status="done", attempts=1, created_ago=8 * 86400)
    oid = conn.execute("SELECT 'jobs'::regclass::oid").fetchone()[0]  # type: ignore[index]
    outcome = upkeep.archive(conn, table, oid, older_than=7 * 86400, batch=5, mode="delete")
    assert outcome.archived == 12
    assert statuses(conn) == {}
    assert conn.execute("SELECT count(*) FROM jobs_archive").fetchone() == (0,)


def test_claim_plan_is_limit_lockrows_index_scan_on_the_ready_index(
    conn: psycopg.Connection[Any], table: JobTable
) -> None:
    add_jobs(conn, 4000, status="done", attempts=1)
    add_jobs(conn, 200)
    conn.execute("ANALYZE jobs")
    params = {
        "queue": "default",
        "limit": 10,
        "lease": timedelta(minutes=5),
        "max_payload": 1 << 20,
        "max_bytes": 1 << 24,
    }
    statement = b"EXPLAIN (FORMAT JSON) " + statement_for(table, "claim")
    (plan,) = conn.execute(statement, params).fetchone()  # type: ignore[misc]

    def find(node: dict[str, Any], kind: str) -> dict[str, Any] | None:
        if node["Node Type"] == kind:
            return node
        for child in node.get("Plans", []):
            found = find(child, kind)
            if found:
                return found
        return None

    limit = find(plan[0]["Plan"], "Limit")
    assert limit is not None
    # beside the claim's look at the queue's head (an InitPlan, LIMIT 1, no lock)
    [lock_rows] = [c for c in limit["Plans"] if c.get("Parent Relationship") != "InitPlan"]
    assert lock_rows["Node Type"] == "LockRows"
    scan = lock_rows["Plans"][0]
    assert scan["Node Type"] == "Index Scan"
    assert scan["Index Name"] == "jobs_ready_idx"


def test_enqueue_belongs_to_the_callers_transaction(dsn: str, table: JobTable) -> None:
    with psycopg.connect(dsn) as conn:
        with conn.transaction(force_rollback=True):
            rolled_back = producer.enqueue(conn, {"to": "a@example.com"}, queue="emails")
        with conn.transaction():
            kept = producer.enqueue(conn, {"to": "b@example.com"}, queue="emails", delay=60)
        rows = conn.execute("SELECT id, run_at - now() FROM jobs").fetchall()
    assert [row[0] for row in rows] == [kept]
    assert rolled_back != kept
    assert timedelta(seconds=58) < rows[0][1] <= timedelta(seconds=60)


def test_enqueue_without_a_key_answers_a_plain_new_id(dsn: str) -> None:
    """Callers written before dedupe keys store, compare and print an int; they still can."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        first = producer.enqueue(conn, {}, queue="q")
        second = producer.enqueue(conn, {}, queue="q")
        stored = conn.execute("SELECT %s::bigint", (first,)).fetchone()
    assert isinstance(first, int) and first.new and not first.duplicate
    assert second == first + 1 and f"{second}" == str(int(second)) == repr(int(second))
    assert stored == (int(first),)


def test_bulk_enqueue_of_100k_jobs_through_copy(dsn: str, table: JobTable) -> None:
    with psycopg.connect(dsn) as conn:
        count = producer.enqueue_many(conn, ({"n": n} for n in range(100_000)), queue="bulk")
        assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (100_000,)
        conn.rollback()
        assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)
        producer.enqueue_many(
            conn, ({"n": n} for n in range(100_000)), queue="bulk", max_attempts=2
        )
        conn.commit()
        row = conn.execute(
            "SELECT count(*), min(max_attempts), max((payload->>'n')::int) FROM jobs"
        ).fetchone()
    assert count == 100_000
    assert row == (100_000, 2, 99_999)


def test_ownership_checked_calls_report_every_job_no_longer_owned(
    conn: psycopg.Connection[Any], table: JobTable
) -> None:
    ids = add_jobs(conn, 3)
    claimed = claims.send_claim(conn, table, "default", 3).result().jobs
    conn.execute("UPDATE jobs SET status = 'done' WHERE id = %s", (ids[1],))
    outcome = fencing.send_complete(conn, table, [*claimed, Attempt(10**9, 1)]).result()
    assert outcome.owned == {ids[0], ids[2]}
    assert outcome.lost == (ids[1], 10**9)


def test_reaped_jobs_come_back_marked_as_suspects_until_they_finish(
    conn: psycopg.Connection[Any], table: JobTable
) -> None:
    ids = [add_jobs(conn, 1, run_in=-30 + n)[0] for n in range(3)]
    first = claims.send_claim(conn, table, "default", 3).result()
    assert not first.suspects
    for job_id in ids:
        expire(conn, job_id)
    upkeep.reap(conn, table)
    again = claims.send_claim(conn, table, "default", 3).result()
    assert [j.id for j in again.jobs] == ids[:1] and again.suspects == {ids[0]}

    fencing.release(conn, table, again.jobs, keep_marked={ids[0]})
    kept = claims.send_claim(conn, table, "default", 3).result()
    assert kept.suspects == {ids[0]}
    fencing.send_complete(conn, table, kept.jobs).result()
    assert job(conn, ids[0])["locked_until"] is None
    assert claims.send_claim(conn, table, "default", 3).result().suspects == {ids[1]}


@pytest.mark.parametrize("by_priority", [False, True], ids=["plain", "priority"])
def test_a_claim_leases_a_marked_row_alone_and_leaves_the_rows_behind_it_untouched(
    conn: psycopg.Connection[Any], table: JobTable, by_priority: bool
) -> None:
    """A run that died holding many jobs leaves them marked, each to run alone: a
    claim stops before the first marked row, and one at the head is leased alone
    with no batch-mates leased to be given back (2,000 marked rows cost the next
    run 111 s when each claim leased 1,000 rows to keep one)."""
    plain_first = add_jobs(conn, 2, run_in=-120)
    marked = add_jobs(conn, 3, run_in=-60, attempts=1, lease_left=-60)
    plain_last = add_jobs(conn, 4, run_in=-30)
    if by_priority:
        add_priority_column(conn)  # every row at priority 0: run_at decides

    def versions() -> dict[int, str]:
        return dict(conn.execute("SELECT id, xmin::text FROM jobs").fetchall())

    before_marked = claims.send_claim(conn, table, "default", 10, by_priority=by_priority).result()
    assert [j.id for j in before_marked.jobs] == plain_first and not before_marked.suspects
    untouched = versions()
    alone = claims.send_claim(conn, table, "default", 10, by_priority=by_priority).result()
    assert [j.id for j in alone.jobs] == marked[:1] and alone.suspects == {marked[0]}
    written = versions()
    assert {i for i, version in written.items() if untouched[i] != version} == {marked[0]}
    assert {job(conn, i)["status"] for i in marked[1:] + plain_last} == {"queued"}
