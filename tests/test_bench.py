"""The benchmark suite runs end to end: ``python -m bench --quick`` against the test's server.

This proves the suite works (every scenario runs every system, checks every job
was done, and writes its JSON), not the figures: timing on a shared CI machine
says nothing, so no figure is asserted here beyond its being measured at all.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support import REPO

# What --quick runs in the steady scenario: bursts of these sizes, this many runs in a row.
QUICK_BURSTS = (2_000, 4_000)
QUICK_RUNS_IN_A_ROW = 3

SCENARIOS = {
    "throughput",
    "floor",
    "steady",
    "concurrency",
    "latency",
    "snapshot",
    "empty",
    "history",
    "volume",
    "enqueue",
    "io",
    "exec-output",
}


@pytest.fixture(scope="module")
def quick_results(server_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("bench") / "quick.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--quick",
            "--no-peers",
            "--dsn",
            server_dsn,
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads(out.read_text())
    assert isinstance(data, dict)
    data["stdout"] = result.stdout
    return data


def scenario(results: dict[str, Any], name: str) -> dict[str, Any]:
    found = [s for s in results["scenarios"] if s["name"] == name]
    assert len(found) == 1, (
        f"scenario {name} missing from {[s['name'] for s in results['scenarios']]}"
    )
    data: dict[str, Any] = found[0]
    assert "error" not in data, data.get("error")
    return data


def test_every_scenario_measures_every_row_and_judges_its_targets(
    quick_results: dict[str, Any],
) -> None:
    assert {s["name"] for s in quick_results["scenarios"]} == SCENARIOS
    for name in SCENARIOS:
        data = scenario(quick_results, name)
        assert data["rows"], name
        for row in data["rows"]:
            assert row["seconds"]["median"] > 0, (name, row["label"])
            if row["jobs"]:
                assert row["jobs_per_second"]["median"] > 0, (name, row["label"])
        for check in data["checks"]:
            assert isinstance(check["met"], bool)
        assert data["title"] in quick_results["stdout"]


def test_io_measures_async_and_sync_drain_with_their_memory(
    quick_results: dict[str, Any],
) -> None:
    data = scenario(quick_results, "io")
    keys = [row["key"] for row in data["rows"]]
    assert keys == ["drain-async-500", "drain-sync-500", "drain-async-2000"]
    for row in data["rows"]:
        assert row["peak_rss_mb"]["median"] > 0, row["label"]
    targets = [check["target"] for check in data["checks"]]
    assert targets == [
        "C=500: drain async / ceiling",
        "C=500: drain async / drain-sync",
        "C=2000: drain async peak RSS (largest of the runs)",
    ]


def test_exec_output_gives_the_rate_and_the_memory_of_forwarding(
    quick_results: dict[str, Any],
) -> None:
    data = scenario(quick_results, "exec-output")
    drain_rows = [row for row in data["rows"] if row["key"].startswith("drain-exec-")]
    assert len(drain_rows) == 2
    for row in data["rows"]:
        assert row["mb_per_s"]["median"] > 0, row["label"]
    assert len(data["checks"]) == 2


def test_throughput_puts_drain_beside_the_protocol_loop_in_one_ratio(
    quick_results: dict[str, Any],
) -> None:
    data = scenario(quick_results, "throughput")
    keys = [row["key"] for row in data["rows"]]
    assert keys[:5] == [
        "drain",
        "protocol-100",
        "protocol-100-unprepared",
        "protocol-10",
        "protocol-1",
    ]
    drain, protocol = data["rows"][0], data["rows"][1]
    (check,) = [c for c in data["checks"] if "protocol loop, claim 100" in c["target"]]
    expected = drain["jobs_per_second"]["median"] / protocol["jobs_per_second"]["median"]
    assert check["value"] == pytest.approx(expected, rel=0.01)


def test_throughput_measures_drain_on_a_priority_table_against_the_plain_one(
    quick_results: dict[str, Any],
) -> None:
    data = scenario(quick_results, "throughput")
    rows = {row["key"]: row for row in data["rows"]}
    (check,) = [c for c in data["checks"] if "priority table" in c["target"]]
    expected = (
        rows["drain-priority"]["jobs_per_second"]["median"]
        / rows["drain"]["jobs_per_second"]["median"]
    )
    assert check["value"] == pytest.approx(expected, rel=0.01)
    assert check["bound"] == 0.95


def test_empty_run_counts_drains_statements_on_the_wire(quick_results: dict[str, Any]) -> None:
    facts = scenario(quick_results, "empty")["facts"]
    assert facts["statements"]["connect-only"] == 0
    assert 1 <= facts["statements"]["drain"] <= 10
    assert facts["sessions"]["drain"] == 1


def test_latency_calibrates_the_proxy_to_about_three_milliseconds(
    quick_results: dict[str, Any],
) -> None:
    facts = scenario(quick_results, "latency")["facts"]
    assert facts["measured_rtt_ms"] > facts["direct_rtt_ms"]
    assert 2.0 < facts["measured_rtt_ms"] < 5.0


def test_held_snapshot_is_named_by_drain_status(quick_results: dict[str, Any]) -> None:
    data = scenario(quick_results, "snapshot")
    assert "bench-snapshot-holder" in data["facts"]["drain_status"]
    (check,) = [c for c in data["checks"] if "drain status" in c["target"]]
    assert check["met"]


def test_volume_measures_peak_memory_of_the_drain_process(quick_results: dict[str, Any]) -> None:
    data = scenario(quick_results, "volume")
    for row in data["rows"]:
        # A Python process with psycopg loaded holds tens of megabytes, never a few.
        assert 15 < row["peak_rss_mb"]["median"] < 1000, row
    # Large payloads: 30 jobs of 4 MB each, compressed to kilobytes on disk, and
    # drain's peak judged against the claim cap plus the no-op run's peak.
    rows = {row["key"]: row for row in data["rows"]}
    blobs = rows["drain-4mb@30"]
    assert blobs["jobs"] == 30
    assert blobs["peak_rss_mb"]["median"] > 0
    assert 0 < data["facts"]["largest_payload_stored_kb"] < 4 * 1024 / 50
    (check,) = [c for c in data["checks"] if "4 MB payloads" in c["target"]]
    assert check["value"] == pytest.approx(blobs["peak_rss_mb"]["median"], abs=0.01)
    assert not check["at_least"]
    assert check["bound"] > rows["drain@300"]["peak_rss_mb"]["median"]


def test_steady_times_each_run_of_one_long_lived_table_with_nothing_reset(
    quick_results: dict[str, Any],
) -> None:
    data = scenario(quick_results, "steady")
    rows = {row["key"]: row for row in data["rows"]}
    for burst in QUICK_BURSTS:
        rates = []
        for number in range(1, QUICK_RUNS_IN_A_ROW + 1):
            row = rows[f"steady@{burst}#{number}"]
            assert row["jobs"] == burst
            assert len(row["seconds"]["values"]) == 1, row
            assert row["jobs_per_second"]["median"] > 0, row
            # Every earlier burst is still there, done: one table, never refilled or archived.
            assert row["done_under_burst"]["median"] == (number - 1) * burst, row
            rates.append(row["jobs_per_second"]["median"])
        steady, fresh = rows[f"steady@{burst}"], rows[f"fresh@{burst}"]
        later = QUICK_RUNS_IN_A_ROW - 1
        assert len(steady["seconds"]["values"]) == later
        assert len(fresh["seconds"]["values"]) == later
        assert fresh["jobs_per_second"]["median"] > 0
        bursts = f"{burst:,}-job bursts"
        first = data["facts"]["steady_over_first"][bursts]
        steady_rate = steady["jobs_per_second"]["median"]
        assert first == pytest.approx(steady_rate / rates[0], rel=0.01)
        assert data["facts"]["runs_that_vacuumed"][bursts].endswith(f" of {QUICK_RUNS_IN_A_ROW}")
        (check,) = [c for c in data["checks"] if f"{burst:,}-job bursts" in c["target"]]
        expected = steady_rate / fresh["jobs_per_second"]["median"]
        assert check["value"] == pytest.approx(expected, rel=0.01)
        slowest = data["facts"]["slowest_steady_run_over_fresh"][bursts]
        assert 0 < slowest <= check["value"] + 0.001


def test_the_floor_stands_beside_drain_the_protocol_loop_and_the_steady_state(
    quick_results: dict[str, Any],
) -> None:
    for name, keys in (
        ("throughput", {"drain", "protocol-100"}),
        ("floor", {"drain", "drain-steady", "protocol-100", "protocol-1000-unprepared"}),
    ):
        data = scenario(quick_results, name)
        rows = {row["key"]: row for row in data["rows"]}
        floor = rows["floor"]["jobs_per_second"]["median"]
        assert floor > 0
        over = data["facts"]["over_the_floor"]
        assert keys <= set(over), (name, over)
        for key in keys:
            assert over[key] > 0
            assert over[key] == pytest.approx(
                rows[key]["jobs_per_second"]["median"] / floor, abs=0.001
            )
    (check,) = scenario(quick_results, "floor")["checks"]
    assert check["target"] == "drain in the steady state / server floor"
    assert check["value"] == pytest.approx(over["drain-steady"], abs=0.001)


def test_the_floor_procedure_completes_only_ready_jobs_of_its_queue(
    conn: psycopg.Connection[Any],
) -> None:
    from bench.systems import call_floor, install_floor

    conn.execute(
        "INSERT INTO jobs (payload) SELECT jsonb_build_object('n', g) "
        "FROM generate_series(1, 250) AS g"
    )
    conn.execute(
        "INSERT INTO jobs (queue, payload, status, attempts, run_at, locked_until) VALUES "
        "('other', '{}', 'queued', 0, now(), NULL), "
        "('default', '{}', 'queued', 0, now() + interval '1 hour', NULL), "
        "('default', '{}', 'running', 2, now(), now() + interval '1 minute'), "
        "('default', '{}', 'done', 1, now(), NULL)"
    )
    before = conn.execute(
        "SELECT id, status, attempts, locked_until FROM jobs WHERE payload = '{}' ORDER BY id"
    ).fetchall()
    install_floor(conn)
    assert call_floor(conn, batch=100) == 250
    counts = conn.execute(
        "SELECT count(*), min(attempts), max(attempts), count(locked_until) "
        "FROM jobs WHERE payload <> '{}' AND status = 'done'"
    ).fetchone()
    assert counts == (250, 1, 1, 0)
    after = conn.execute(
        "SELECT id, status, attempts, locked_until FROM jobs WHERE payload = '{}' ORDER BY id"
    ).fetchall()
    assert after == before
    assert call_floor(conn, batch=100) == 0


def test_the_report_renders_every_scenario_and_verdict_as_markdown(
    quick_results: dict[str, Any],
) -> None:
    from bench.report import render

    text = render(quick_results)
    for data in quick_results["scenarios"]:
        assert f"### {data['title']}" in text
        for check in data["checks"]:
            assert check["target"] in text
    assert text.count("**met**") + text.count("**not met**") == sum(
        len(data["checks"]) for data in quick_results["scenarios"]
    )


def test_the_suite_also_runs_as_a_script() -> None:
    result = subprocess.run(
        [sys.executable, str(Path(REPO) / "bench" / "run.py"), "--help"],
        capture_output=True,
        text=True,
        cwd="/",
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "--quick" in result.stdout and "throughput" in result.stdout


def test_an_unknown_scenario_is_a_usage_error() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bench", "--only", "throughput,nonsense"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert result.returncode == 2
    assert "nonsense" in result.stderr
