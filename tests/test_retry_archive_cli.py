"""``drain retry`` and ``drain archive`` through the command line, on a real database."""

from __future__ import annotations

import json
from typing import Any

import psycopg

from tests.support import add_jobs, drain_cli, job, statuses


def _snapshot(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT id, queue, status, attempts, run_at, locked_until, last_error FROM jobs ORDER BY id"
    ).fetchall()


def _failed(conn: psycopg.Connection[Any], count: int, queue: str, error: str) -> list[int]:
    return add_jobs(
        conn, count, queue=queue, status="failed", attempts=5, run_in=-3600, last_error=error
    )


def test_retry_by_queue_puts_only_that_queues_failed_jobs_back(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    emails = _failed(conn, 3, "emails", "SMTP 451: try again later")
    reports = _failed(conn, 2, "reports", "disk full")
    running = add_jobs(conn, 1, queue="emails", status="running", attempts=1, lease_left=60)

    result = drain_cli("retry", "--queue", "emails", "--json", dsn=dsn)

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["ids"] == emails
    for job_id in emails:
        retried = job(conn, job_id)
        assert retried["status"] == "queued"
        # As many tries as it had, and the attempt counter (the fence) kept.
        assert (retried["attempts"], retried["max_attempts"]) == (5, 10)
        assert retried["last_error"] is None
        assert retried["run_in"].total_seconds() <= 0  # ready now, by the database clock
        assert retried["run_in"].total_seconds() > -60
    for job_id in reports:
        assert job(conn, job_id)["status"] == "failed"
        assert job(conn, job_id)["last_error"] == "disk full"
    assert job(conn, running[0])["status"] == "running"


def test_retried_jobs_run_again_with_all_their_attempts(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    ids = _failed(conn, 2, "default", "boom")

    assert drain_cli("retry", "--all", dsn=dsn).returncode == 0
    run = drain_cli("run", "--handler", "demo_handlers:ok", "--json", dsn=dsn)

    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["done"] == 2
    # Each ran once more, under a new attempt number: 6, never 1 again.
    assert [job(conn, i)["attempts"] for i in ids] == [6, 6]
    assert statuses(conn) == {"done": 2}


def test_a_retry_gives_as_many_tries_as_the_job_had(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    """However many attempts a job used, and with a max_attempts below 1 counting as 1."""
    used_all = add_jobs(conn, 1, status="failed", attempts=3, max_attempts=3)
    failed_early = add_jobs(conn, 1, status="failed", attempts=1, max_attempts=4)
    below_one = add_jobs(conn, 1, status="failed", attempts=1, max_attempts=0)

    assert drain_cli("retry", "--all", dsn=dsn).returncode == 0

    tries = {
        job_id: (row["attempts"], row["max_attempts"] - row["attempts"])
        for job_id in (*used_all, *failed_early, *below_one)
        for row in [job(conn, job_id)]
    }
    assert tries == {used_all[0]: (3, 3), failed_early[0]: (1, 4), below_one[0]: (1, 1)}


def test_a_retry_at_the_int_limit_keeps_its_batch_mates_and_runs_them(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    """attempts + max_attempts past 2147483647 ("retry forever") stops at the limit.

    Before, the sum failed the batch's statement: nothing was retried, exit 1.
    """
    mates = _failed(conn, 50, "default", "boom")
    (forever,) = add_jobs(
        conn, 1, status="failed", attempts=3, max_attempts=2**31 - 1, last_error="boom"
    )

    result = drain_cli("retry", "--all", "--json", dsn=dsn)

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["ids"] == sorted([*mates, forever])
    assert (job(conn, forever)["attempts"], job(conn, forever)["max_attempts"]) == (3, 2**31 - 1)
    run = drain_cli("run", "--handler", "demo_handlers:ok", "--json", dsn=dsn)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["done"] == 51
    assert statuses(conn) == {"done": 51}


def test_retry_by_id(dsn: str, conn: psycopg.Connection[Any]) -> None:
    ids = _failed(conn, 4, "default", "boom")

    result = drain_cli("retry", "--id", str(ids[1]), "--id", str(ids[3]), dsn=dsn)

    assert result.returncode == 0, result.stderr
    assert f"retried 2 failed job(s) in public.jobs: ids {ids[1]}, {ids[3]}" in result.stderr
    assert [job(conn, i)["status"] for i in ids] == ["failed", "queued", "failed", "queued"]


def test_retry_by_error_text_ignores_case(dsn: str, conn: psycopg.Connection[Any]) -> None:
    smtp = _failed(conn, 2, "emails", "SMTP 451: try again later")
    other = _failed(conn, 1, "emails", "template missing")

    result = drain_cli("retry", "--error-contains", "smtp 451", "--json", dsn=dsn)

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["retried"] == 2
    assert [job(conn, i)["status"] for i in smtp] == ["queued", "queued"]
    assert job(conn, other[0])["status"] == "failed"


def test_retry_filters_combine(dsn: str, conn: psycopg.Connection[Any]) -> None:
    emails = _failed(conn, 2, "emails", "boom")
    reports = _failed(conn, 2, "reports", "boom")

    result = drain_cli("retry", "--queue", "emails", "--id", str(reports[0]), dsn=dsn)

    assert result.returncode == 0
    assert "no failed job in public.jobs matches" in result.stderr
    assert statuses(conn) == {"failed": len(emails) + len(reports)}


def test_retry_dry_run_changes_nothing(dsn: str, conn: psycopg.Connection[Any]) -> None:
    emails = _failed(conn, 12, "emails", "boom")
    _failed(conn, 1, "reports", "boom")
    before = _snapshot(conn)

    text = drain_cli("retry", "--queue", "emails", "--dry-run", dsn=dsn)
    data = drain_cli("retry", "--queue", "emails", "--dry-run", "--json", dsn=dsn)

    assert text.returncode == 0 and data.returncode == 0
    assert _snapshot(conn) == before
    assert "would retry 12 failed job(s) in public.jobs (emails 12)" in text.stderr
    assert "dry run, nothing changed" in text.stderr
    preview = json.loads(data.stdout)
    assert preview["would_retry"] == 12
    assert preview["sample_ids"] == emails[:10]
    assert preview["per_queue"] == {"emails": 12}


def test_retry_without_a_filter_refuses(dsn: str, conn: psycopg.Connection[Any]) -> None:
    _failed(conn, 2, "default", "boom")
    before = _snapshot(conn)

    bare = drain_cli("retry", dsn=dsn)
    both = drain_cli("retry", "--all", "--queue", "default", dsn=dsn)

    assert bare.returncode == 2
    assert "--all" in bare.stderr and len(bare.stderr.strip().splitlines()) == 1
    assert both.returncode == 2
    assert _snapshot(conn) == before


def test_archive_moves_old_done_jobs(dsn: str, conn: psycopg.Connection[Any]) -> None:
    old = add_jobs(conn, 3, status="done", attempts=1, created_ago=8 * 86400)
    recent = add_jobs(conn, 2, status="done", attempts=1, created_ago=86400)
    old_failed = add_jobs(conn, 1, status="failed", attempts=5, created_ago=30 * 86400)

    result = drain_cli("archive", "--archive-batch", "2", "--json", dsn=dsn)

    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["archived"], data["batches"], data["complete"]) == (3, 2, True)
    archived = conn.execute("SELECT id FROM jobs_archive ORDER BY id").fetchall()
    assert [row[0] for row in archived] == old
    left = conn.execute("SELECT id FROM jobs ORDER BY id").fetchall()
    assert [row[0] for row in left] == recent + old_failed


def test_a_done_row_the_archive_refuses_stays_and_the_rest_move(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    """A hand-made table allowed a NULL max_attempts; the archive table does not.

    Before, that one row failed every batch it was in: nothing was archived, by
    any run, ever.
    """
    conn.execute("ALTER TABLE jobs ALTER COLUMN max_attempts DROP NOT NULL")
    old = add_jobs(conn, 9, status="done", attempts=1, created_ago=8 * 86400)
    conn.execute("UPDATE jobs SET max_attempts = NULL WHERE id = %s", (old[4],))

    result = drain_cli("archive", "--archive-batch", "4", "--json", dsn=dsn)

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["archived"] == 8
    archived = [row[0] for row in conn.execute("SELECT id FROM jobs_archive ORDER BY id")]
    assert archived == [job_id for job_id in old if job_id != old[4]]
    assert [row[0] for row in conn.execute("SELECT id FROM jobs")] == [old[4]]


def test_archive_delete_mode_and_retention(dsn: str, conn: psycopg.Connection[Any]) -> None:
    add_jobs(conn, 2, status="done", attempts=1, created_ago=7200)
    kept = add_jobs(conn, 1, status="done", attempts=1, created_ago=60)

    result = drain_cli("archive", "--archive-after", "1h", "--archive-mode", "delete", dsn=dsn)

    assert result.returncode == 0, result.stderr
    assert "archived 2 done job(s) older than 1h from public.jobs (deleted)" in result.stderr
    assert conn.execute("SELECT count(*) FROM jobs_archive").fetchone() == (0,)
    assert [row[0] for row in conn.execute("SELECT id FROM jobs").fetchall()] == kept


def test_archive_without_an_archive_table(dsn: str, conn: psycopg.Connection[Any]) -> None:
    add_jobs(conn, 1, status="done", attempts=1, created_ago=8 * 86400)
    conn.execute("DROP TABLE jobs_archive")

    result = drain_cli("archive", dsn=dsn)
    bad_mode = drain_cli("archive", "--archive-mode", "off", dsn=dsn)

    assert result.returncode == 1
    assert "no archive table public.jobs_archive" in result.stderr
    assert "--archive-mode delete" in result.stderr
    assert statuses(conn) == {"done": 1}
    assert bad_mode.returncode == 2
