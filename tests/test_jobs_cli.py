"""``drain jobs``, ``drain jobs show``, ``drain archive --failed-after`` and ``drain purge``
through the command line, on a real database."""

from __future__ import annotations

import json
from typing import Any

import psycopg

from tests.support import add_jobs, drain_cli, statuses

SECRET = "S3cr3t-Pw"


def _listed(*args: str, dsn: str) -> list[dict[str, Any]]:
    result = drain_cli("jobs", *args, "--json", dsn=dsn)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert isinstance(data, list)
    return data


def _ids(*args: str, dsn: str) -> list[int]:
    return [row["id"] for row in _listed(*args, dsn=dsn)]


def _archived(conn: psycopg.Connection[Any], count: int, days_ago: float) -> list[int]:
    """Put ``count`` rows straight into the archive, archived ``days_ago`` days ago."""
    rows = conn.execute(
        """
        INSERT INTO jobs_archive (id, queue, payload, status, run_at, attempts, max_attempts,
                                  created_at, archived_at)
        SELECT coalesce((SELECT max(id) FROM jobs_archive), 0) + g, 'default', '{}', 'done',
               now(), 1, 5, now(), now() - make_interval(days => %s)
        FROM generate_series(1, %s) AS g
        RETURNING id
        """,
        (days_ago, count),
    ).fetchall()
    return [row[0] for row in rows]


def _archive_ids(conn: psycopg.Connection[Any]) -> list[int]:
    return [row[0] for row in conn.execute("SELECT id FROM jobs_archive ORDER BY id")]


def test_jobs_lists_newest_first_and_filters_by_queue_and_status(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    queued = add_jobs(conn, 3, queue="emails")
    failed = add_jobs(conn, 2, queue="emails", status="failed", attempts=5, last_error="boom")
    done = add_jobs(conn, 2, queue="reports", status="done", attempts=1)
    running = add_jobs(conn, 1, queue="reports", status="running", attempts=1, lease_left=60)
    everything = sorted(queued + failed + done + running, reverse=True)

    assert _ids(dsn=dsn) == everything
    assert _ids("--status", "failed", dsn=dsn) == sorted(failed, reverse=True)
    assert _ids("--status", "queued", dsn=dsn) == sorted(queued, reverse=True)
    assert _ids("--status", "running", dsn=dsn) == running
    assert _ids("--status", "done", "--queue", "reports", dsn=dsn) == sorted(done, reverse=True)
    assert _ids("--queue", "emails", dsn=dsn) == sorted(queued + failed, reverse=True)
    assert _ids("--queue", "reports", "--status", "queued", dsn=dsn) == []
    assert _ids("--limit", "3", dsn=dsn) == everything[:3]
    assert _ids("--status", "queued", "--limit", "1", dsn=dsn) == [max(queued)]


def test_jobs_json_carries_each_jobs_counters_times_and_error(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    [failed] = add_jobs(
        conn, 1, queue="emails", status="failed", attempts=4, max_attempts=4, last_error="boom"
    )
    [running] = add_jobs(conn, 1, status="running", attempts=1, lease_left=60)
    [hand_made] = add_jobs(conn, 1, run_at="-infinity")
    [far_off] = add_jobs(conn, 1, run_at="20000-01-01")

    rows = {row["id"]: row for row in _listed(dsn=dsn)}

    assert rows[failed]["status"] == "failed"
    assert (rows[failed]["attempts"], rows[failed]["max_attempts"]) == (4, 4)
    assert rows[failed]["last_error"] == "boom"
    assert rows[failed]["locked_until"] is None
    assert rows[running]["locked_until"] is not None
    assert rows[running]["last_error"] is None
    # A row made by hand with an infinite time is listed, not refused by the driver.
    assert rows[hand_made]["run_at"] == "-infinity"
    # PostgreSQL holds years past Python's 9999; the listing says so instead of a traceback.
    assert rows[far_off]["run_at"] == "after the year 9999"
    table = drain_cli("jobs", dsn=dsn)
    assert table.returncode == 0, table.stderr
    assert "after the year 9999" in table.stdout


def test_jobs_table_shows_a_short_redacted_error(dsn: str, conn: psycopg.Connection[Any]) -> None:
    error = f"OperationalError: connection to postgresql://app:{SECRET}@db/prod failed " + (
        "x" * 300
    )
    [failed] = add_jobs(conn, 1, queue="emails", status="failed", attempts=5, last_error=error)

    result = drain_cli("jobs", "--status", "failed", dsn=dsn)

    assert result.returncode == 0, result.stderr
    header, line = result.stdout.strip().splitlines()
    assert header.split()[:4] == ["ID", "QUEUE", "STATUS", "ATTEMPTS"]
    assert line.split()[:4] == [str(failed), "emails", "failed", "5/5"]
    assert SECRET not in result.stdout
    assert "postgresql://app:********" in line
    assert "x" * 100 not in line  # cut short: one line per job
    [listed] = _listed("--status", "failed", dsn=dsn)
    assert listed["last_error"].startswith(
        "OperationalError: connection to postgresql://app:********@db/prod failed xxx"
    )
    assert len(listed["last_error"]) == 200  # longer than the table's, still short


def test_jobs_that_match_nothing_say_so(dsn: str, conn: psycopg.Connection[Any]) -> None:
    add_jobs(conn, 2)

    result = drain_cli("jobs", "--status", "failed", dsn=dsn)

    assert result.returncode == 0
    assert result.stdout == ""
    assert "no jobs in public.jobs match" in result.stderr


def test_jobs_show_prints_the_whole_job_with_its_secrets_masked(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    payload = {
        "to": "ada@example.com",
        "source": f"postgresql://app:{SECRET}@db.internal/prod",
        "options": {"note": f"connect with host=db password={SECRET}"},
    }
    [job_id] = add_jobs(
        conn,
        1,
        queue="emails",
        status="failed",
        attempts=3,
        max_attempts=3,
        payload=payload,
        last_error=f"psycopg.OperationalError: password={SECRET} refused\nsecond line",
    )

    text = drain_cli("jobs", "show", str(job_id), dsn=dsn)
    data = drain_cli("jobs", "show", str(job_id), "--json", dsn=dsn)

    assert text.returncode == 0, text.stderr
    assert data.returncode == 0, data.stderr
    for output in (text.stdout, data.stdout):
        assert SECRET not in output
    lines = text.stdout.splitlines()
    assert f"id:           {job_id}" in lines
    assert "status:       failed" in lines
    assert "attempts:     3 of 3" in lines
    assert "last_error:   psycopg.OperationalError: password=******** refused" in lines
    assert "              second line" in lines  # the whole error, every line of it
    assert '    "to": "ada@example.com",' in lines  # the payload pretty-printed
    assert '    "source": "postgresql://app:********@db.internal/prod",' in lines
    shown = json.loads(data.stdout)
    assert shown["id"] == job_id
    assert shown["payload"] == {
        "to": "ada@example.com",
        "source": "postgresql://app:********@db.internal/prod",
        "options": {"note": "connect with host=db password=********"},
    }
    assert shown["last_error"] == "psycopg.OperationalError: password=******** refused\nsecond line"


def test_jobs_show_of_a_missing_id_is_one_line_and_exit_1(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    [job_id] = add_jobs(conn, 1)

    result = drain_cli("jobs", "show", str(job_id + 1000), dsn=dsn)

    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        f"drain: error: no job with id {job_id + 1000} in public.jobs"
    ]


def test_jobs_usage_errors_are_one_line_and_exit_2(dsn: str) -> None:
    for args, says in (
        (("--status", "finished"), "--status must be queued, running, done or failed"),
        (("--limit", "0"), "--limit must be between 1"),
        (("--queue", " "), "--queue is empty"),
        (("show", "0"), "ID must be a job id"),
        (("show", "seven"), "'seven' is not a valid integer"),
    ):
        result = drain_cli("jobs", *args, dsn=dsn)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stdout == ""
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("drain: error:"), (args, lines)
        assert says in lines[0], (args, lines)


def test_jobs_without_a_queue_table_points_at_init(empty_dsn: str) -> None:
    listing = drain_cli("jobs", dsn=empty_dsn)
    show = drain_cli("jobs", "show", "1", dsn=empty_dsn)

    for result in (listing, show):
        assert result.returncode == 1
        assert "does not exist; create it with `drain init`" in result.stderr


def test_archive_failed_after_moves_old_failed_jobs_but_not_queued_ones(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    old_failed = add_jobs(
        conn, 3, status="failed", attempts=5, run_in=-40 * 86400, created_ago=41 * 86400
    )
    recent_failed = add_jobs(
        conn, 1, status="failed", attempts=5, run_in=-86400, created_ago=60 * 86400
    )
    old_queued = add_jobs(conn, 2, run_in=-40 * 86400, created_ago=40 * 86400)
    old_done = add_jobs(conn, 1, status="done", attempts=1, created_ago=8 * 86400)

    result = drain_cli(
        "archive", "--failed-after", "30d", "--archive-batch", "2", "--json", dsn=dsn
    )

    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["archived"], data["failed_archived"]) == (1, 3)
    assert (data["failed_batches"], data["failed_complete"]) == (2, True)
    assert data["failed_after_seconds"] == 30 * 86400
    assert _archive_ids(conn) == sorted(old_done + old_failed)
    archived = conn.execute(
        "SELECT DISTINCT status FROM jobs_archive WHERE id = ANY(%s)", (old_failed,)
    )
    assert archived.fetchall() == [("failed",)]
    left = [row[0] for row in conn.execute("SELECT id FROM jobs ORDER BY id")]
    # Counted from run_at: created 60 days ago, last due yesterday, it stays.
    assert left == sorted(recent_failed + old_queued)


def test_archive_failed_after_in_delete_mode_and_its_summary_line(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    add_jobs(conn, 2, status="failed", attempts=5, run_in=-7200)
    kept = add_jobs(conn, 1, status="failed", attempts=5, run_in=-60)

    result = drain_cli("archive", "--failed-after", "1h", "--archive-mode", "delete", dsn=dsn)

    assert result.returncode == 0, result.stderr
    assert (
        "archived 0 done job(s) older than 7d and 2 failed job(s) last due more than 1h ago "
        "from public.jobs (deleted)"
    ) in result.stderr
    assert _archive_ids(conn) == []
    assert [row[0] for row in conn.execute("SELECT id FROM jobs")] == kept


def test_archive_without_failed_after_leaves_failed_jobs(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    add_jobs(conn, 2, status="failed", attempts=5, run_in=-400 * 86400, created_ago=400 * 86400)

    result = drain_cli("archive", "--json", dsn=dsn)

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["failed_archived"] is None
    assert statuses(conn) == {"failed": 2}


def test_purge_deletes_old_archive_rows_in_batches_and_leaves_newer_ones(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    old = _archived(conn, 5, days_ago=100)
    newer = _archived(conn, 3, days_ago=1)
    add_jobs(conn, 2, status="done", attempts=1, created_ago=200 * 86400)  # not archived yet

    preview = drain_cli("purge", "--archive-older-than", "30d", "--dry-run", "--json", dsn=dsn)
    assert preview.returncode == 0, preview.stderr
    assert json.loads(preview.stdout)["would_purge"] == len(old)
    assert _archive_ids(conn) == old + newer

    result = drain_cli(
        "purge", "--archive-older-than", "30d", "--archive-batch", "2", "--json", dsn=dsn
    )

    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["purged"], data["batches"], data["complete"]) == (5, 3, True)
    assert _archive_ids(conn) == newer
    assert statuses(conn) == {"done": 2}  # the queue table is not touched


def test_purge_says_what_it_did_and_what_it_would_do(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    _archived(conn, 4, days_ago=10)

    dry = drain_cli("purge", "--archive-older-than", "7d", "--dry-run", dsn=dsn)
    done = drain_cli("purge", "--archive-older-than", "7d", dsn=dsn)
    again = drain_cli("purge", "--archive-older-than", "7d", dsn=dsn)

    assert dry.stderr.strip() == (
        "drain: would purge 4 row(s) archived more than 7d ago from public.jobs_archive; "
        "dry run, nothing changed"
    )
    assert done.stderr.strip() == (
        "drain: purged 4 row(s) archived more than 7d ago from public.jobs_archive in 1 batch(es)"
    )
    assert "purged 0 row(s)" in again.stderr
    assert [r.returncode for r in (dry, done, again)] == [0, 0, 0]


def test_purge_refuses_without_a_retention_or_an_archive(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    kept = _archived(conn, 2, days_ago=400)

    bare = drain_cli("purge", dsn=dsn)
    bad = drain_cli("purge", "--archive-older-than", "soon", dsn=dsn)
    assert _archive_ids(conn) == kept
    conn.execute("DROP TABLE jobs_archive")
    missing = drain_cli("purge", "--archive-older-than", "1d", dsn=dsn)

    assert bare.returncode == 2 and "--archive-older-than" in bare.stderr
    assert bad.returncode == 2 and "--archive-older-than" in bad.stderr
    assert missing.returncode == 1
    assert "no archive table public.jobs_archive" in missing.stderr
    for result in (bare, bad, missing):
        assert len(result.stderr.strip().splitlines()) == 1
