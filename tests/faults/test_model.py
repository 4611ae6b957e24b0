"""Scenario 17: a Hypothesis state machine over the queue statements, on the real table.

Three simulated workers claim, complete, fail, snooze, extend and release jobs
through the functions of ``drain.store``'s statement modules, each on a connection of its own; a
reaper reaps; an operator retries failed jobs (``drain retry``); time passes
(retries become due) and leases get lost (a lease moved into the past, as a
worker that stalls would see). A worker may freeze holding an attempt (a
SIGSTOP, a paused VM), or lose the reply of a statement that committed (the
session sends it again): either way an owner keeps an old (id, attempt) and may
act on it late, in any order with everything else. The model knows what each
worker believes it owns and what every row must look like; after every step the
database must match the model exactly, and:

* no (id, attempt) pair is ever handed out twice: the attempt counter is the
  fencing token, and nothing (retry, release, reap) lowers it;
* a job is running only under an attempt exactly one owner holds, live or
  frozen (at most one owner at a time, and never an orphan the model did not
  expect);
* a fenced statement changes a row only for the attempt that holds it now; sent
  late under any other attempt it reports the job lost and leaves the row as it
  was, whoever holds it now;
* a release and a snooze never burn an attempt (the job has as many tries left
  as before its claim), and a retry gives a job as many tries as it had;
* a finished job never changes again until retried, and no job is completed twice;
* attempts never pass max_attempts (a max_attempts below 1 counting as 1);
* a row the reaper put back carries its mark (its expired lease) until a claim
  takes it, and that claim reports it as a suspect; a row it failed keeps the mark;
* ``confirm_outcomes``, asked about an attempt whose fenced statement found the
  job gone, confirms it only when that attempt's own statement finished the job
  (a completion, above all, is never confirmed to another attempt); the one
  inexact answer is a row ``drain retry`` put back, confirmed as queued to the
  attempt it was failed under (see ``sql/retry.sql``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import psycopg
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from drain.core.jobs import Attempt
from drain.core.table import JobTable
from drain.ops import maintenance
from drain.store import claims, fencing, upkeep

pytestmark = pytest.mark.faults

TABLE = JobTable()
WORKERS = ("a", "b", "c")
LEASE = 60.0
BACKOFF = 3600.0  # a retried job is never due again until time passes on purpose
LATE_ACTIONS = ("complete", "fail", "fail for good", "snooze", "release", "extend")
ROW = "SELECT status, attempts, max_attempts, run_at, locked_until, last_error FROM jobs WHERE id = %s"


@dataclass
class ModelJob:
    status: str
    attempts: int
    max_attempts: int
    ready: bool = True
    lease_lost: bool = False
    marked: bool = False  # put back (or failed) by the reaper: its expired lease stays
    suspect: bool = False  # claimed while marked: given back, it keeps the mark
    completions: int = 0
    # the attempt whose own fenced statement left the row as it is now (not running)
    finished_by: int | None = None
    retried: bool = False  # put back by drain retry since its last claim
    tries_at_claim: int = 0  # tries left just before the claim that holds it now

    @property
    def limit(self) -> int:
        return max(self.max_attempts, 1)

    @property
    def tries_left(self) -> int:
        return self.limit - self.attempts


@dataclass
class Model:
    jobs: dict[int, ModelJob] = field(default_factory=dict)
    held: dict[str, dict[int, int]] = field(default_factory=lambda: {w: {} for w in WORKERS})
    # attempts whose fenced statement found the job no longer theirs
    lost: list[Attempt] = field(default_factory=list)
    # every (id, attempt) a claim ever returned
    handed_out: set[Attempt] = field(default_factory=set)
    # owners that still hold an attempt and may act on it late: frozen, or about
    # to send again a statement whose reply they never saw
    frozen: list[tuple[str, Attempt]] = field(default_factory=list)

    def current(self, job_id: int, attempt: int) -> bool:
        """Whether this attempt still owns the job (the fence's question)."""
        job = self.jobs[job_id]
        return job.status == "running" and job.attempts == attempt


class QueueMachine(RuleBasedStateMachine):
    """The queue as the workers and the reaper see it; ``connections`` is set by the test."""

    connections: ClassVar[dict[str, psycopg.Connection[Any]]] = {}

    def __init__(self) -> None:
        super().__init__()
        self.model = Model()

    # -- setup --------------------------------------------------------------------------

    @initialize(
        jobs=st.lists(st.tuples(st.integers(-1, 3), st.integers(0, 3)), min_size=1, max_size=6)
    )
    def fill(self, jobs: list[tuple[int, int]]) -> None:
        """Queued jobs with any max_attempts (even below 1) and some attempts already used."""
        conn = self.connections["admin"]
        conn.execute("TRUNCATE jobs RESTART IDENTITY")
        for position, (max_attempts, used) in enumerate(jobs):
            attempts = min(used, max(max_attempts, 1))
            row = conn.execute(
                "INSERT INTO jobs (payload, attempts, max_attempts, run_at) "
                "VALUES ('{}', %s, %s, now() - make_interval(secs => 100 - %s)) RETURNING id",
                (attempts, max_attempts, position),
            ).fetchone()
            assert row is not None
            self.model.jobs[row[0]] = ModelJob("queued", attempts, max_attempts)

    # -- workers ------------------------------------------------------------------------

    def _holders(self) -> list[str]:
        return [w for w in WORKERS if self.model.held[w]]

    def _take(self, data: st.DataObject) -> tuple[str, Attempt]:
        worker = data.draw(st.sampled_from(self._holders()), label="worker")
        job_id = data.draw(st.sampled_from(sorted(self.model.held[worker])), label="job")
        return worker, Attempt(job_id, self.model.held[worker].pop(job_id))

    def _row(self, job_id: int) -> tuple[Any, ...]:
        row = self.connections["admin"].execute(ROW, (job_id,)).fetchone()
        assert row is not None
        return tuple(row)

    def _check_taken(self, taken: list[int], ready: dict[int, Any], limit: int) -> None:
        """The claim took the oldest ready jobs, and a marked one only alone: it stops
        before the first marked row, and takes one at the head by itself (rows of
        the same run_at come in either order)."""
        marked = {i for i in ready if self.model.jobs[i].marked}
        if not marked:
            assert len(taken) == min(limit, len(ready)), "a claim skipped ready jobs"
            return
        assert taken, "a claim took nothing with jobs ready"
        if marked.intersection(taken):
            assert len(taken) == 1, "a marked job was claimed with batch-mates"
            assert ready[taken[0]] == min(ready.values()), "a marked job was claimed out of turn"
            return
        first_marked = min(ready[i] for i in marked)
        before = [i for i in ready if ready[i] < first_marked]
        up_to = [i for i in ready if ready[i] <= first_marked and i not in marked]
        assert min(limit, len(before)) <= len(taken) <= min(limit, len(up_to)), (
            "a claim skipped ready jobs before the first marked one"
        )

    @rule(worker=st.sampled_from(WORKERS), limit=st.integers(1, 3))
    def claim(self, worker: str, limit: int) -> None:
        conn = self.connections[worker]
        ready_before = {
            row[0]: row[1]
            for row in conn.execute(
                "SELECT id, run_at FROM jobs WHERE status = 'queued' AND run_at <= now()"
            )
        }
        expected_ready = {
            i for i, job in self.model.jobs.items() if job.status == "queued" and job.ready
        }
        assert set(ready_before) == expected_ready
        claimed = claims.send_claim(conn, TABLE, "default", limit, lease=LEASE).result()
        taken = [job.id for job in claimed.jobs] + claimed.exhausted
        self._check_taken(taken, ready_before, limit)
        assert not claimed.poisoned
        left = set(expected_ready) - set(taken)
        if left and taken:
            assert max(ready_before[i] for i in taken) <= min(ready_before[i] for i in left)
        for job_id in claimed.exhausted:
            model = self.model.jobs[job_id]
            assert model.attempts >= model.limit, f"job {job_id} was not exhausted"
            model.status, model.marked = "failed", False
            model.finished_by, model.retried = None, False
        marked = {job.id for job in claimed.jobs if self.model.jobs[job.id].marked}
        assert claimed.suspects == marked, "the claim did not report the reaper's marks"
        for job in claimed.jobs:
            model = self.model.jobs[job.id]
            assert model.attempts < model.limit, f"job {job.id} was run past max_attempts"
            pair = Attempt(job.id, job.attempt)
            assert pair not in self.model.handed_out, (
                f"attempt {job.attempt} of job {job.id} was handed out a second time"
            )
            self.model.handed_out.add(pair)
            model.tries_at_claim = model.tries_left
            model.status, model.attempts, model.lease_lost = "running", model.attempts + 1, False
            model.suspect, model.marked = model.marked, False
            model.finished_by, model.retried = None, False
            assert job.attempt == model.attempts
            self.model.held[worker][job.id] = job.attempt

    def _send(self, worker: str, attempt: Attempt, action: str, current: bool) -> frozenset[int]:
        """Send one fenced statement for ``attempt``; return the jobs it found ours."""
        conn = self.connections[worker]
        job = self.model.jobs[attempt.id]
        if action == "complete":
            return fencing.send_complete(conn, TABLE, [attempt]).result().owned
        if action in ("fail", "fail for good"):
            permanent = action == "fail for good"
            outcome = fencing.send_fail(
                conn, TABLE, [fencing.Failure(attempt, "boom", permanent)], base=BACKOFF
            ).result()
            assert outcome.lost == (() if current else (attempt.id,))
            if current:
                ends = permanent or job.attempts >= job.limit
                assert (outcome.failed if ends else outcome.retried) == (attempt.id,)
            return frozenset(outcome.retried + outcome.failed)
        if action == "snooze":
            return (
                fencing.send_snooze(conn, TABLE, [fencing.Snooze(attempt, delay=BACKOFF)])
                .result()
                .owned
            )
        if action == "release":
            # as the runner does: a suspect given back keeps the reaper's mark
            keep = {attempt.id} if current and job.suspect else set()
            return fencing.release(conn, TABLE, [attempt], keep_marked=keep).owned
        return fencing.extend(conn, TABLE, [attempt], LEASE).owned

    def _act(self, worker: str, attempt: Attempt, action: str) -> bool:
        """Send one fenced statement for ``attempt`` from ``worker``; True if it took effect.

        Sent under an attempt that no longer holds the job (late, or for a job
        taken since), it must report the job lost and leave the row exactly as
        it was, whoever holds it now.
        """
        job = self.model.jobs[attempt.id]
        current = self.model.current(attempt.id, attempt.attempt)
        before = self._row(attempt.id)
        owned = self._send(worker, attempt, action, current)
        assert owned == ({attempt.id} if current else set()), (
            f"{action} under attempt {attempt.attempt} of job {attempt.id}: the fence said "
            f"{set(owned)}, the row is {job.status} with attempts {job.attempts}"
        )
        if not current:
            assert self._row(attempt.id) == before, (
                f"a late {action} under attempt {attempt.attempt} changed job {attempt.id}"
            )
            self.model.lost.append(attempt)
            return False
        if action == "extend":
            job.lease_lost = False
            return True
        job.finished_by = attempt.attempt
        if action == "complete":
            job.status = "done"
            job.completions += 1
        elif action == "fail for good" or (action == "fail" and job.attempts >= job.limit):
            job.status = "failed"
        elif action == "fail":
            job.status, job.ready = "queued", False
        elif action == "snooze":
            job.status, job.ready, job.max_attempts = "queued", False, job.limit + 1
            assert job.tries_left == job.tries_at_claim, "a snooze used up a try"
        else:
            job.status, job.max_attempts, job.ready = "queued", job.limit + 1, True
            job.marked = job.suspect
            assert job.tries_left == job.tries_at_claim, "a release burned an attempt"
        return True

    def _finish(self, data: st.DataObject, action: str, reply_lost: bool) -> None:
        """A live owner sends an outcome; with ``reply_lost`` it will send it again."""
        worker, attempt = self._take(data)
        if self._act(worker, attempt, action) and reply_lost:
            self.model.frozen.append((worker, attempt))

    @precondition(lambda self: self._holders())
    @rule(data=st.data(), reply_lost=st.booleans())
    def complete(self, data: st.DataObject, reply_lost: bool) -> None:
        self._finish(data, "complete", reply_lost)

    @precondition(lambda self: self._holders())
    @rule(data=st.data(), permanent=st.booleans(), reply_lost=st.booleans())
    def fail(self, data: st.DataObject, permanent: bool, reply_lost: bool) -> None:
        self._finish(data, "fail for good" if permanent else "fail", reply_lost)

    @precondition(lambda self: self._holders())
    @rule(data=st.data(), reply_lost=st.booleans())
    def snooze(self, data: st.DataObject, reply_lost: bool) -> None:
        self._finish(data, "snooze", reply_lost)

    @precondition(lambda self: self._holders())
    @rule(data=st.data(), reply_lost=st.booleans())
    def release(self, data: st.DataObject, reply_lost: bool) -> None:
        self._finish(data, "release", reply_lost)

    @precondition(lambda self: self._holders())
    @rule(data=st.data())
    def extend(self, data: st.DataObject) -> None:
        worker = data.draw(st.sampled_from(self._holders()), label="worker")
        attempts = [Attempt(i, a) for i, a in sorted(self.model.held[worker].items())]
        fenced = fencing.extend(self.connections[worker], TABLE, attempts, LEASE)
        expected = {a.id for a in attempts if self.model.current(a.id, a.attempt)}
        assert fenced.owned == expected
        for job_id in expected:
            self.model.jobs[job_id].lease_lost = False

    @precondition(lambda self: self._holders())
    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        """A worker dies: it forgets what it held; the rows stay running under their lease."""
        worker = data.draw(st.sampled_from(self._holders()), label="worker")
        self.model.held[worker].clear()

    @precondition(lambda self: self._holders())
    @rule(data=st.data())
    def freeze(self, data: st.DataObject) -> None:
        """A worker stops (SIGSTOP, a paused VM) holding an attempt it will act on later."""
        self.model.frozen.append(self._take(data))

    @precondition(lambda self: self.model.frozen)
    @rule(data=st.data(), action=st.sampled_from(LATE_ACTIONS), reply_lost=st.booleans())
    def act_late(self, data: st.DataObject, action: str, reply_lost: bool) -> None:
        """A frozen owner resumes, or a statement is sent again: any outcome, any time later."""
        index = data.draw(st.integers(0, len(self.model.frozen) - 1), label="frozen owner")
        worker, attempt = self.model.frozen.pop(index)
        if self._act(worker, attempt, action) and (action == "extend" or reply_lost):
            self.model.frozen.append((worker, attempt))

    @precondition(lambda self: self.model.lost)
    @rule(data=st.data())
    def confirm(self, data: st.DataObject) -> None:
        """Asked after a reconnect: did these attempts finish before their reply was lost?"""
        attempt = data.draw(st.sampled_from(self.model.lost), label="attempt")
        confirmed = fencing.confirm_outcomes(self.connections["reaper"], TABLE, [attempt])
        job = self.model.jobs[attempt.id]
        same = job.attempts == attempt.attempt and job.status != "running" and not job.marked
        assert confirmed == ({attempt.id: job.status} if same else {}), (
            f"attempt {attempt.attempt} of job {attempt.id} confirmed as {confirmed} "
            f"(the row is {job.status}, attempts {job.attempts})"
        )
        if confirmed:
            assert job.finished_by == attempt.attempt or job.retried, (
                f"attempt {attempt.attempt} of job {attempt.id} never finished it, yet is "
                f"confirmed as {confirmed}"
            )
        if confirmed.get(attempt.id) == "done":
            assert job.finished_by == attempt.attempt, "a completion confirmed to another attempt"

    # -- the world around the workers -------------------------------------------------

    @precondition(lambda self: any(j.status == "failed" for j in self.model.jobs.values()))
    @rule()
    def retry(self) -> None:
        """An operator runs ``drain retry --all``."""
        retried = maintenance.retry(self.connections["admin"], TABLE, maintenance.Filters())
        failed = sorted(i for i, j in self.model.jobs.items() if j.status == "failed")
        assert retried == failed
        for job_id in failed:
            job = self.model.jobs[job_id]
            tries = job.limit
            job.status, job.max_attempts, job.ready = "queued", job.attempts + tries, True
            job.marked, job.finished_by, job.retried = False, None, True
            assert job.tries_left == tries, "a retry did not give the job as many tries as it had"

    @precondition(
        lambda self: any(
            j.status == "running" and not j.lease_lost for j in self.model.jobs.values()
        )
    )
    @rule(data=st.data())
    def lose_lease(self, data: st.DataObject) -> None:
        running = sorted(
            i for i, j in self.model.jobs.items() if j.status == "running" and not j.lease_lost
        )
        job_id = data.draw(st.sampled_from(running), label="job")
        self.connections["admin"].execute(
            "UPDATE jobs SET locked_until = now() - interval '1 second' WHERE id = %s", (job_id,)
        )
        self.model.jobs[job_id].lease_lost = True

    @rule()
    def reap(self) -> None:
        reaped = upkeep.reap(self.connections["reaper"], TABLE)
        requeued = failed = 0
        for job in self.model.jobs.values():
            if job.status != "running" or not job.lease_lost:
                continue
            job.marked = True  # the expired lease stays, requeued or failed
            job.finished_by, job.retried = None, False
            if job.attempts >= job.limit:
                job.status, failed = "failed", failed + 1
            else:
                job.status, job.ready, requeued = "queued", True, requeued + 1
        assert (reaped.requeued, reaped.failed) == (requeued, failed)

    @rule()
    def time_passes(self) -> None:
        """Every retry and snooze comes due."""
        self.connections["admin"].execute(
            "UPDATE jobs SET run_at = now() - interval '1 second' WHERE status = 'queued'"
        )
        for job in self.model.jobs.values():
            if job.status == "queued":
                job.ready = True

    # -- invariants -------------------------------------------------------------------

    @invariant()
    def database_matches_the_model(self) -> None:
        rows = (
            self.connections["admin"]
            .execute(
                "SELECT id, status, attempts, max_attempts, locked_until IS NOT NULL, "
                "locked_until < now() FROM jobs"
            )
            .fetchall()
        )
        actual = {row[0]: row[1:4] for row in rows}
        expected = {i: (j.status, j.attempts, j.max_attempts) for i, j in self.model.jobs.items()}
        assert actual == expected
        for job_id, _status, _attempts, _max, leased, expired in rows:
            job = self.model.jobs[job_id]
            expected_lease = job.status == "running" or job.marked
            assert leased == expected_lease, (
                f"job {job_id}: lease is {leased} on a {job.status} row"
            )
            if job.status == "running":
                assert expired == job.lease_lost

    @invariant()
    def at_most_one_owner(self) -> None:
        for job_id, job in self.model.jobs.items():
            holding = Attempt(job_id, job.attempts)
            live = [w for w in WORKERS if self.model.held[w].get(job_id) == job.attempts]
            frozen = [w for w, held in self.model.frozen if held == holding]
            owners = live + frozen if job.status == "running" else []
            assert len(owners) <= 1, f"job {job_id} is owned by {owners}"
            assert job.completions <= 1, f"job {job_id} completed {job.completions} times"
            assert job.attempts <= job.limit, f"job {job_id} passed max_attempts"


@pytest.fixture
def connections(dsn: str) -> Iterator[dict[str, psycopg.Connection[Any]]]:
    opened = {name: psycopg.connect(dsn, autocommit=True) for name in (*WORKERS, "reaper", "admin")}
    try:
        yield opened
    finally:
        for conn in opened.values():
            conn.close()


def test_queue_statements_keep_their_invariants_under_any_interleaving(
    connections: dict[str, psycopg.Connection[Any]], soak: bool
) -> None:
    QueueMachine.connections = connections
    run_state_machine_as_test(
        QueueMachine,
        settings=settings(
            max_examples=1000 if soak else 100,
            stateful_step_count=80 if soak else 40,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
