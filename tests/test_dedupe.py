"""Dedupe keys: ``drain init --with dedupe``, ``enqueue --key``, ``enqueue_many(keys=)``.

A key is held by the job that has it while that job is queued or running (a
partial unique index); enqueueing it again meanwhile is a duplicate, and once the
job is done or failed the key is free. The race below is real processes, held at
a gate (a lock on the queue table) until every one of them is waiting, then let
go at once.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

import drain
from drain.core.errors import DedupeNotEnabled, DrainError
from drain.core.table import JobTable
from drain.store import claims, fencing, producer, schema
from tests.support import REPO, add_jobs, drain_cli, start_cli, statuses, summary_of
from tests.test_schema import ARTICLE_DDL

KEYS = [f"user-{n}" for n in range(1000)]


def dedupe_column(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM pg_attribute WHERE attrelid = 'jobs'::regclass "
        "AND attname = 'dedupe_key' AND NOT attisdropped"
    ).fetchone()
    return row == (1,)


def with_dedupe(dsn: str) -> None:
    result = drain_cli("init", "--with", "dedupe", dsn=dsn)
    assert result.returncode == 0, result.stderr
    assert "added dedupe keys: column dedupe_key, index jobs_dedupe_idx" in result.stderr


def key_counts(conn: psycopg.Connection[Any]) -> dict[str, int]:
    rows = conn.execute(
        "SELECT status, count(DISTINCT dedupe_key) FROM jobs WHERE queue = 'race' GROUP BY status"
    ).fetchall()
    return {status: count for status, count in rows}


# -- init --------------------------------------------------------------------------------


def test_init_with_dedupe_adds_the_column_and_index_once_and_plain_init_does_not(
    empty_dsn: str,
) -> None:
    plain = drain_cli("init", dsn=empty_dsn)
    assert plain.returncode == 0, plain.stderr
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert not dedupe_column(conn)
    with_dedupe(empty_dsn)
    again = drain_cli("init", "--with", "dedupe", "--json", dsn=empty_dsn)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["notes"] == ["dedupe keys already in place"]
    plain_again = drain_cli("init", dsn=empty_dsn)
    assert plain_again.returncode == 0 and "dedupe" not in plain_again.stderr
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert dedupe_column(conn)
        inspection = schema.inspect(conn, JobTable())
        assert inspection.version == 1  # an extra, not a new schema version
        (definition,) = conn.execute(
            "SELECT pg_get_indexdef('jobs_dedupe_idx'::regclass)"
        ).fetchone() or (None,)
    assert definition is not None and definition.startswith("CREATE UNIQUE INDEX")
    assert "(queue, dedupe_key)" in definition and "'running'" in definition


def test_print_sql_shows_the_dedupe_ddl_only_when_asked(empty_dsn: str) -> None:
    plain = drain_cli("init", "--print-sql")
    extra = drain_cli("init", "--print-sql", "--with", "dedupe")
    assert plain.returncode == 0 and extra.returncode == 0, plain.stderr + extra.stderr
    assert "dedupe_key" not in plain.stdout
    assert extra.stdout.startswith(plain.stdout)
    assert 'ALTER TABLE "public"."jobs" ADD COLUMN IF NOT EXISTS dedupe_key text;' in extra.stdout
    # What it prints is what init applies: run it by hand, twice, then enqueue a key.
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(extra.stdout)
        conn.execute(extra.stdout)
        first = drain.enqueue(conn, {}, queue="q", key="k")
        second = drain.enqueue(conn, {}, queue="q", key="k")
    assert first.new and second.duplicate and second == first


def test_init_with_dedupe_on_a_table_made_by_hand_keeps_its_jobs(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(ARTICLE_DDL)
    with_dedupe(empty_dsn)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert statuses(conn) == {"queued": 10}
        # The article's own INSERT, not naming the column, keeps working, twice over.
        conn.execute("INSERT INTO jobs (payload) VALUES ('{}'), ('{}')")
        assert statuses(conn) == {"queued": 12}
        assert drain.enqueue(conn, {}, key="k").new


def test_init_refuses_a_dedupe_key_column_of_another_type(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(ARTICLE_DDL)
        conn.execute("ALTER TABLE jobs ADD COLUMN dedupe_key int")
    result = drain_cli("init", "--with", "dedupe", dsn=empty_dsn)
    assert result.returncode == 1
    assert "dedupe_key column of type integer, expected text" in result.stderr
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('jobs_dedupe_idx')").fetchone() == (None,)


# -- one job -----------------------------------------------------------------------------


def test_a_key_is_a_duplicate_while_queued_or_running_and_free_once_done_or_failed(
    dsn: str,
) -> None:
    with_dedupe(dsn)
    table = JobTable()
    with psycopg.connect(dsn, autocommit=True) as conn:
        first = drain.enqueue(conn, {"n": 1}, queue="q", key="user-42")
        assert isinstance(first, int) and first.new and not first.duplicate
        again = drain.enqueue(conn, {"n": 2}, queue="q", key="user-42")
        assert again.duplicate and again == first and again.id == first.id
        assert drain.enqueue(conn, {"n": 3}, queue="other", key="user-42").new
        assert drain.enqueue(conn, {"n": 4}, queue="q").new  # no key: always new
        # Running still holds the key.
        (claimed,) = claims.send_claim(conn, table, "q", 1).result().jobs
        assert claimed.id == first and claimed.payload == {"n": 1}  # the first one wins
        assert drain.enqueue(conn, {}, queue="q", key="user-42") == first
        # Done frees it.
        fencing.send_complete(conn, table, [claimed]).result()
        second = drain.enqueue(conn, {}, queue="q", key="user-42")
        assert second.new and second != first
        # Failed frees it too.
        (claimed,) = [
            j for j in claims.send_claim(conn, table, "q", 10).result().jobs if j.id == second
        ]
        fencing.send_fail(conn, table, [fencing.Failure(claimed, "boom", True)]).result()
        assert drain.enqueue(conn, {}, queue="q", key="user-42").new
        assert json.loads(json.dumps({"id": second})) == {"id": int(second)}


def test_the_cli_says_new_or_duplicate_and_exits_0(dsn: str) -> None:
    with_dedupe(dsn)
    first = drain_cli("enqueue", "q", '{"user": 42}', "--key", "user-42", dsn=dsn)
    assert first.returncode == 0, first.stderr
    assert first.stderr.startswith("drain: enqueued job ")
    job_id = int(first.stderr.split()[3])
    second = drain_cli("enqueue", "q", '{"user": 42}', "--key", "user-42", dsn=dsn)
    assert second.returncode == 0, second.stderr
    assert second.stderr.strip() == (
        f"drain: duplicate of job {job_id} on q (key 'user-42' is queued or running); "
        "nothing enqueued"
    )
    shown = drain_cli("enqueue", "q", "{}", "--key", "user-42", "--json", dsn=dsn)
    assert json.loads(shown.stdout) == {
        "queue": "q",
        "enqueued": 0,
        "id": job_id,
        "key": "user-42",
        "duplicate": True,
    }
    fresh = drain_cli("enqueue", "q", "{}", "--key", "user-43", "--json", dsn=dsn)
    assert json.loads(fresh.stdout)["duplicate"] is False
    with psycopg.connect(dsn) as conn:
        assert statuses(conn) == {"queued": 2}


def test_a_file_takes_each_key_from_a_field(dsn: str, tmp_path: Path) -> None:
    with_dedupe(dsn)
    lines = ['{"user": 1}', '{"user": "1"}', '{"user": 2}', '{"user": 3, "x": 1}']
    path = tmp_path / "edits.jsonl"
    path.write_text("\n".join(lines) + "\n")
    first = drain_cli("enqueue", "q", "--file", str(path), "--key-field", "user", "--json", dsn=dsn)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == {"queue": "q", "enqueued": 3, "duplicates": 1}
    second = drain_cli("enqueue", "q", "--file", str(path), "--key-field", "user", dsn=dsn)
    assert second.stderr.strip() == "drain: enqueued 0 job(s) on q, 4 duplicate(s) skipped"
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT dedupe_key, payload FROM jobs ORDER BY dedupe_key").fetchall()
    assert rows == [("1", {"user": 1}), ("2", {"user": 2}), ("3", {"user": 3, "x": 1})]
    missing = tmp_path / "missing.jsonl"
    missing.write_text('{"user": 9}\n\n{"who": 9}\n')
    refused = drain_cli("enqueue", "q", "-f", str(missing), "--key-field", "user", dsn=dsn)
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        f"drain: error: {missing}:3 has no --key-field 'user' holding a string or integer key"
    )
    with_key = drain_cli("enqueue", "q", "-f", str(path), "--key", "k", dsn=dsn)
    assert with_key.returncode == 2 and len(with_key.stderr.splitlines()) == 1
    assert "--key-field NAME" in with_key.stderr


# -- transactions ---------------------------------------------------------------------------


def test_a_rolled_back_enqueue_leaves_no_job_and_frees_the_key(dsn: str) -> None:
    with_dedupe(dsn)
    with psycopg.connect(dsn) as conn:
        with pytest.raises(RuntimeError), conn.transaction():
            assert drain.enqueue(conn, {}, queue="q", key="k").new
            assert drain.enqueue_many(conn, [{}, {}], queue="q", keys=["k", "j"]) == 1
            raise RuntimeError("the caller's work failed")
        assert statuses(conn) == {}
        with conn.transaction():
            assert drain.enqueue(conn, {}, queue="q", key="k").new
        assert statuses(conn) == {"queued": 1}


def waiting_on_locks(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
    ).fetchone()
    return 0 if row is None else int(row[0])


def wait_for_waiters(conn: psycopg.Connection[Any], count: int, limit: float = 60) -> None:
    """Poll until ``count`` sessions wait on a lock (a deadline, not an assertion of speed)."""
    deadline = time.monotonic() + limit
    while waiting_on_locks(conn) < count:
        assert time.monotonic() < deadline, f"fewer than {count} sessions ever waited"
        time.sleep(0.05)


@pytest.mark.parametrize("ending", ["commit", "rollback"])
def test_a_second_enqueue_waits_for_the_first_transaction_and_follows_its_end(
    dsn: str, ending: str
) -> None:
    """Committed: a duplicate of the first job (which its snapshot did not see). Rolled back: new."""
    with_dedupe(dsn)
    answers: list[producer.Enqueued] = []
    with psycopg.connect(dsn) as first, psycopg.connect(dsn, autocommit=True) as watch:
        held = drain.enqueue(first, {"by": "first"}, queue="q", key="k")

        def second() -> None:
            with psycopg.connect(dsn, autocommit=True) as conn:
                answers.append(drain.enqueue(conn, {"by": "second"}, queue="q", key="k"))

        thread = threading.Thread(target=second)
        thread.start()
        wait_for_waiters(watch, 1)
        first.commit() if ending == "commit" else first.rollback()
        thread.join(60)
    (answer,) = answers
    if ending == "commit":
        assert answer.duplicate and answer == held
    else:
        assert answer.new and answer != held
    with psycopg.connect(dsn) as conn:
        assert statuses(conn) == {"queued": 1}


# -- many ---------------------------------------------------------------------------------


def test_enqueue_many_counts_the_new_jobs(dsn: str) -> None:
    with_dedupe(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert drain.enqueue(conn, {}, queue="q", key="b").new
        payloads = [{"n": n} for n in range(6)]
        keys = ["a", "b", None, "a", None, "c"]
        assert drain.enqueue_many(conn, payloads, queue="q", keys=keys) == 4
        rows = conn.execute("SELECT dedupe_key, payload->'n' FROM jobs WHERE payload ? 'n'")
        assert sorted(rows.fetchall(), key=str) == sorted(
            [("a", 0), (None, 2), (None, 4), ("c", 5)], key=str
        )
        with pytest.raises(ValueError, match="6 payloads but 2 keys"):
            drain.enqueue_many(conn, payloads, queue="q", keys=["x", "y"])
        with pytest.raises(ValueError, match="payloads and keys differ in length"):
            drain.enqueue_many(conn, iter(payloads), queue="q", keys=iter(["x"]))
        with pytest.raises(TypeError):
            drain.enqueue_many(conn, payloads[:1], queue="q", keys="x")
        # Keys over more than one batch: all counted once.
        bulk = [{"n": n} for n in range(producer.KEYED_BATCH + 5)]
        bulk_keys = [f"k{n % (producer.KEYED_BATCH + 2)}" for n in range(len(bulk))]
        assert (
            drain.enqueue_many(conn, bulk, queue="bulk", keys=bulk_keys) == producer.KEYED_BATCH + 2
        )


# -- the race -----------------------------------------------------------------------------

# Three ways of enqueueing the same keys, each a process of its own.
BULK = """
import json, sys, psycopg, drain
keys = json.loads(open(sys.argv[2]).read())
with psycopg.connect(sys.argv[1]) as conn:
    new = drain.enqueue_many(conn, [{"key": k} for k in keys], queue="race", keys=keys)
print(json.dumps({"new": new}))
"""

ONE_BY_ONE = """
import json, sys, psycopg, drain
keys = json.loads(open(sys.argv[2]).read())
answers = {}
with psycopg.connect(sys.argv[1], autocommit=True) as conn:
    for key in keys:
        answer = drain.enqueue(conn, {"key": key}, queue="race", key=key)
        answers[key] = [answer.id, answer.duplicate]
print(json.dumps({"new": sum(not d for _, d in answers.values()), "answers": answers}))
"""


def race(dsn: str, tmp_path: Path, round: int) -> list[dict[str, Any]]:
    """Eight processes enqueue the same 1,000 keys, each in its own order, let go at once."""
    order = random.Random(round)
    processes: list[tuple[str, subprocess.Popen[str]]] = []
    with psycopg.connect(dsn) as gate, psycopg.connect(dsn, autocommit=True) as watch:
        # SHARE conflicts with the ROW EXCLUSIVE every INSERT takes: no process
        # gets past its first insert until the gate commits.
        gate.execute("LOCK TABLE jobs IN SHARE MODE")
        for n in range(8):
            keys = KEYS[:]
            order.shuffle(keys)
            if n < 3:
                path = tmp_path / f"race-{round}-{n}.jsonl"
                path.write_text("".join(json.dumps({"key": k}) + "\n" for k in keys))
                args = ("enqueue", "race", "--file", str(path), "--key-field", "key", "--json")
                processes.append(("cli", start_cli(*args, dsn=dsn)))
                continue
            code = BULK if n < 6 else ONE_BY_ONE
            path = tmp_path / f"race-{round}-{n}.json"
            path.write_text(json.dumps(keys))
            process = subprocess.Popen(
                [sys.executable, "-c", code, dsn, str(path)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=REPO,
            )
            processes.append(("bulk" if n < 6 else "one", process))
        wait_for_waiters(watch, 8)
        gate.commit()
    results = []
    for kind, process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, f"{kind}: {err}"
        answer = json.loads(out)
        answer["kind"] = kind
        answer["new"] = answer.get("new", answer.get("enqueued"))
        results.append(answer)
    return results


def test_eight_processes_racing_on_1000_keys_make_1000_jobs_and_again_once_drained(
    dsn: str, tmp_path: Path
) -> None:
    with_dedupe(dsn)
    first = race(dsn, tmp_path, round=1)
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert statuses(conn) == {"queued": 1000}
        assert key_counts(conn) == {"queued": 1000}
        ids = dict(conn.execute("SELECT dedupe_key, id FROM jobs").fetchall())
    assert sum(r["new"] for r in first) == 1000, [(r["kind"], r["new"]) for r in first]
    for result in first:
        if result["kind"] == "cli":
            assert result["new"] + result["duplicates"] == 1000
        if result["kind"] == "one":
            # Every answer names the job that holds the key, new or duplicate.
            assert {k: job_id for k, (job_id, _) in result["answers"].items()} == ids

    drained = drain_cli("run", "--queue", "race", "--exec", "cat > /dev/null", "--json", dsn=dsn)
    assert drained.returncode == 0, drained.stderr
    assert summary_of(drained)["done"] == 1000

    second = race(dsn, tmp_path, round=2)
    assert sum(r["new"] for r in second) == 1000, [(r["kind"], r["new"]) for r in second]
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert statuses(conn) == {"done": 1000, "queued": 1000}
        assert key_counts(conn) == {"done": 1000, "queued": 1000}
    print("race:", [(r["kind"], r["new"]) for r in first], [(r["kind"], r["new"]) for r in second])


# -- a table without the column -------------------------------------------------------------


def test_a_hand_made_table_without_the_column_works_and_a_key_is_one_line(
    empty_dsn: str, tmp_path: Path
) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(ARTICLE_DDL)
    init = drain_cli("init", dsn=empty_dsn)
    assert init.returncode == 0, init.stderr
    assert "table made by hand: compatible with drain" in init.stderr

    plain = drain_cli("enqueue", "q", '{"n": 1}', dsn=empty_dsn)
    assert plain.returncode == 0 and plain.stderr.startswith("drain: enqueued job 11 on q")
    expected = (
        "drain: error: queue table public.jobs has no dedupe keys (the dedupe_key column "
        "and its unique index); add them with `drain init --with dedupe`"
    )
    keyed = drain_cli("enqueue", "q", '{"n": 2}', "--key", "k", dsn=empty_dsn)
    assert (keyed.returncode, keyed.stderr.strip(), keyed.stdout) == (2, expected, "")
    path = tmp_path / "keyed.jsonl"
    path.write_text('{"k": "a"}\n{"k": "b"}\n')
    from_file = drain_cli("enqueue", "q", "-f", str(path), "--key-field", "k", dsn=empty_dsn)
    assert (from_file.returncode, from_file.stderr.strip()) == (2, expected)

    with psycopg.connect(empty_dsn) as conn:
        with pytest.raises(DedupeNotEnabled) as raised:
            drain.enqueue(conn, {}, queue="q", key="k")
        assert isinstance(raised.value, DrainError) and "drain init --with dedupe" in str(
            raised.value
        )
        conn.rollback()
        with pytest.raises(DedupeNotEnabled):
            drain.enqueue_many(conn, [{}], queue="q", keys=["k"])
        conn.rollback()
        assert not dedupe_column(conn)  # nothing was altered
        add_jobs(conn, 2, queue="q", status="failed", attempts=5, last_error="boom")
        conn.commit()
        assert statuses(conn) == {"queued": 11, "failed": 2}

    run = drain_cli(
        "run",
        "--queue",
        "default",
        "--queue",
        "q",
        "--exec",
        "cat > /dev/null",
        "--json",
        dsn=empty_dsn,
    )
    assert run.returncode == 0, run.stderr
    assert summary_of(run)["done"] == 11
    status = drain_cli("status", "--json", dsn=empty_dsn)
    assert status.returncode == 1, status.stderr  # 1: failed jobs to look at
    totals = json.loads(status.stdout)["totals"]
    assert (totals["ready"], totals["done"], totals["failed"]) == (0, 11, 2)
    retry = drain_cli("retry", "--all", dsn=empty_dsn)
    assert retry.returncode == 0, retry.stderr
    with psycopg.connect(empty_dsn) as conn:
        assert statuses(conn) == {"done": 11, "queued": 2}


def test_a_table_with_the_column_but_no_index_gets_the_same_line(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(ARTICLE_DDL)
        conn.execute("ALTER TABLE jobs ADD COLUMN dedupe_key text")
    keyed = drain_cli("enqueue", "q", "{}", "--key", "k", dsn=empty_dsn)
    assert keyed.returncode == 2 and "`drain init --with dedupe`" in keyed.stderr
    assert len(keyed.stderr.splitlines()) == 1
    with_dedupe(empty_dsn)
    assert drain_cli("enqueue", "q", "{}", "--key", "k", dsn=empty_dsn).returncode == 0


def test_retry_leaves_a_failed_job_whose_key_is_taken_again_and_retries_one_per_key(
    dsn: str,
) -> None:
    """A failed job whose key a newer job holds stays failed (the key keeps its promise
    and the unique index would refuse it); of two failed jobs with one key, the newest
    goes back. Jobs without a key are retried as ever."""
    with_dedupe(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO jobs (queue, payload, status, attempts, dedupe_key, last_error) VALUES "
            "('q', '{}', 'failed', 5, 'taken', 'boom'), "
            "('q', '{}', 'failed', 5, 'twice', 'boom'), "
            "('q', '{}', 'failed', 5, 'twice', 'boom'), "
            "('q', '{}', 'failed', 5, NULL, 'boom')"
        )
        holder = drain.enqueue(conn, {}, queue="q", key="taken")
        result = drain_cli("retry", "--all", "--json", dsn=dsn)
        assert result.returncode == 0, result.stderr
        rows = dict(conn.execute("SELECT id, status FROM jobs ORDER BY id").fetchall())
    assert json.loads(result.stdout)["ids"] == [3, 4]
    assert rows == {1: "failed", 2: "failed", 3: "queued", 4: "queued", holder: "queued"}


# -- the docs' reindex handler: a key held while running, and the edit that comes then -----

JOB_CONTROLS = (REPO / "docs" / "how-to" / "job-controls.md").read_text()
REINDEX_PREAMBLE = '''
import os
import time
from pathlib import Path

import psycopg

import drain

DSN = os.environ["REINDEX_DSN"]
GATE = Path(os.environ["REINDEX_GATE"])


def reindex_user(user):
    """Index the user's current version; the first time, wait while the test edits it."""
    with psycopg.connect(DSN, autocommit=True) as conn:
        (version,) = conn.execute("SELECT version FROM users WHERE id = %s", (user,)).fetchone()
        (GATE / "read").touch()
        deadline = time.monotonic() + 30
        while not (GATE / "edited").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        conn.execute(
            "INSERT INTO search_index VALUES (%s, %s) "
            "ON CONFLICT (user_id) DO UPDATE SET version = excluded.version",
            (user, version),
        )
    return version


def current_version(user):
    with psycopg.connect(DSN, autocommit=True) as conn:
        return conn.execute("SELECT version FROM users WHERE id = %s", (user,)).fetchone()[0]
'''


def docs_reindex_handler() -> str:
    """The reindex handler of docs/how-to/job-controls.md, as written there."""
    found = re.search(r"```python\n(@drain\.handler\(\"reindex\"\).*?)```", JOB_CONTROLS, re.S)
    assert found, "the reindex handler of docs/how-to/job-controls.md is gone"
    return found.group(1)


@pytest.mark.parametrize("handler", ["as in the docs", "without the check at its end"])
def test_an_edit_while_the_job_runs_is_not_lost_with_the_docs_handler(
    dsn: str, tmp_path: Path, handler: str
) -> None:
    """The edit comes while the job runs, so its enqueue is a duplicate. The docs
    handler notices and runs once more; one without the check loses the edit."""
    code = docs_reindex_handler()
    if handler != "as in the docs":
        code = code.split("    if current_version", 1)[0]
    (tmp_path / "reindex_app.py").write_text(REINDEX_PREAMBLE + "\n\n" + code)
    with_dedupe(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE users (id int PRIMARY KEY, version int NOT NULL)")
        conn.execute("CREATE TABLE search_index (user_id int PRIMARY KEY, version int NOT NULL)")
        conn.execute("INSERT INTO users VALUES (42, 1)")
    env = {
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}",
        "REINDEX_DSN": dsn,
        "REINDEX_GATE": str(tmp_path),
    }
    enqueue = ("enqueue", "reindex", '{"user": 42}', "--key", "42")
    assert "enqueued job" in drain_cli(*enqueue, dsn=dsn).stderr
    run = start_cli("run", "--app", "reindex_app", "--json", dsn=dsn, env=env)
    deadline = time.monotonic() + 60
    while not (tmp_path / "read").exists():
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()
        time.sleep(0.02)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE users SET version = 2 WHERE id = 42")
    again = drain_cli(*enqueue, dsn=dsn)
    assert "duplicate of job" in again.stderr, again.stderr  # the running job holds the key
    (tmp_path / "edited").touch()
    out, err = run.communicate(timeout=60)
    assert run.returncode == 0, err
    time.sleep(1.2)  # a snooze comes back after RetryLater's floor of one second
    later = drain_cli("run", "--app", "reindex_app", "--json", dsn=dsn, env=env)
    assert later.returncode == 0, later.stderr

    with psycopg.connect(dsn, autocommit=True) as conn:
        (indexed,) = conn.execute("SELECT version FROM search_index").fetchone() or (None,)
        left = statuses(conn)
    first, second = json.loads(out), summary_of(later)
    if handler == "as in the docs":
        assert (first["snoozed"], second["done"], indexed, left) == (1, 1, 2, {"done": 1})
    else:  # why the docs say so: the edit is lost, and no job is left to do it
        assert (first["done"], second["claimed"], indexed, left) == (1, 0, 1, {"done": 1})
