"""The fault suite's figures: run the scenarios that measure, then print what they found.

    python -m tests.faults.report            # scenarios 2-5, 7-9 and 16 at CI size
    python -m tests.faults.report --soak     # the same at full size (10,000 jobs, 60 kills)
    python -m tests.faults.report --all      # every scenario

The figures come from the very tests that assert the invariants (each test
writes what it measured to the file named by ``DRAIN_FAULT_FIGURES``), so a
figure is printed only for a scenario that passed its checks; the exit status is
pytest's. The server is the test suite's: ``DRAIN_TEST_DSN`` when set, else an
embedded PostgreSQL; scenarios 8, 9 (mid-run) and 16 also use the suite's own
embedded server.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
MEASURING = [
    "tests/faults/test_kills.py",
    "tests/faults/test_leases.py",
    "tests/faults/test_connection.py",
    "tests/faults/test_secrets.py",
    "tests/faults/test_handler_output.py",
    "tests/faults/test_bad_data.py",
    "tests/faults/test_exec_programs.py",
    "tests/faults/test_slow_claims.py",
    "tests/faults/test_frozen_run.py",
    "tests/faults/test_fencing.py",
    "tests/faults/test_program_deadlines.py",
]
# Scenarios named rather than numbered, each printed as one row per variant.
VARIANT_TABLES = {
    "handler output": "Handler output (a bad job beside 5 batch-mates, one run each)",
    "nullable columns": "Nullable columns (a row with a NULL beside 5 batch-mates)",
    "row at a limit": "Row at a limit (a row a statement refuses beside 50 batch-mates, "
    "4 runs; before: exits 1/1/1/1, 0 to 4 of 50 done, up to 50 never run)",
    "secrets on screen": "Secrets on screen (drain status, DSNs, payloads, observability tokens)",
    "exec programs": "Exec programs (--exec: process groups, output tail, environment)",
    "slow claim": "Slow claim (one claim sleeps 1.5 leases in a trigger)",
    "claim timeout": "Claim timeout (a role with statement_timeout 50 ms, every third claim 200 ms)",
    "abandoned job": "Abandoned job (a handler outlives the budget and the grace)",
    "large payloads": "Large payloads (4 MB each, compressed 1,000 to 1 on disk)",
    "frozen run": "Frozen run (SIGSTOP past its leases, thawed while another run works)",
    "fencing token": "Fencing token (a frozen run resumes after its job was reaped, "
    "retried and claimed again)",
    "program deadlines": "Program deadlines (an --exec program beside its next attempt; "
    "before: issue 23's figures)",
}


def _run_tests(figures: Path, *, soak: bool, everything: bool, extra: Sequence[str]) -> int:
    targets = ["tests/faults"] if everything else MEASURING
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *targets]
    if soak:
        command.append("--soak")
    env = dict(os.environ, DRAIN_FAULT_FIGURES=str(figures))
    return subprocess.run([*command, *extra], cwd=REPO, env=env, check=False).returncode


def _load(figures: Path) -> list[dict[str, Any]]:
    if not figures.exists():
        return []
    return [json.loads(line) for line in figures.read_text().splitlines() if line.strip()]


def _scenario_2(found: dict[str, Any]) -> list[str]:
    delays = found.get("kill_to_reexecution") or {}
    lines = [
        f"Scenario 2: {found['jobs']:,} jobs, {found['slots']} runs at a time "
        f"({found['runs_started']} started), {found['server']}, seed {found['seed']}",
        f"  kills                        {found['kills']} SIGKILL ({found['kills_by_test']} by "
        f"the test, {found['kills_by_handler']} by handlers in a job or after returning one)",
        f"  lost                         {found['lost']}",
        f"  executed more than once      {found['executed_more_than_once']} jobs: "
        f"{found['repeats_cut_in_handler']} attempts cut in a handler, "
        f"{found['repeats_after_return']} returned but not yet recorded when their run was "
        f"killed; repeats with no kill behind them: {found['unexplained_repeats']}",
        f"  attempts claimed, never run  {found['attempts_claimed_never_started']} "
        "(held by a killed run, reaped after their lease)",
        f"  stale completions rejected   {found['stale_completions_rejected']}",
    ]
    if delays:
        lines.append(
            f"  kill to re-execution         min {delays['min_s']}s, median {delays['median_s']}s, "
            f"max {delays['max_s']}s (lease {found['lease_s']}s + a run every "
            f"{found['run_period_s']}s + start-up; longest gap between run starts "
            f"{found['longest_gap_between_run_starts_s']}s)"
        )
    lines += [
        f"  finished by                  one more run one lease after the last kill "
        f"(it reaped {found['reaped_by_final_run']})",
        f"  exit codes                   {', '.join(map(str, found['exit_codes']))} (-9: killed)",
    ]
    return lines


def _stale(rows: list[dict[str, Any]]) -> list[str]:
    found = [row for row in rows if row["scenario"] == "3"]
    if not found:
        return []
    each = ", ".join(f"{row['stale_completions_rejected']} ({row['variant']})" for row in found)
    return [f"Scenario 3: stale completions rejected by the attempt fence: {each}"]


def _table(rows: list[dict[str, Any]], scenarios: set[str]) -> list[str]:
    lines = ["Scenarios 7-9: lost, exit code"]
    for found in rows:
        if found["scenario"] in scenarios:
            lines.append(
                f"  {found['scenario']}  {found['variant']:<37} lost {found.get('lost', 0)}  "
                f"exit {found['exit_code']}  ({found['server']})"
            )
    return lines


def _secrets(rows: list[dict[str, Any]]) -> list[str]:
    found = [row for row in rows if row["scenario"] == "16"]
    if not found:
        return []
    scanned = sum(row["outputs_scanned"] for row in found)
    servers = "; ".join(f"{row['server']}, {row['auth']} auth" for row in found)
    hits = sum(row["hits"] for row in found)
    return [f"Scenario 16: secret-scan hits {hits} ({scanned} outputs scanned on {servers})"]


def _variants(rows: list[dict[str, Any]], scenario: str) -> list[str]:
    found = [row for row in rows if row["scenario"] == scenario]
    if not found:
        return []
    lines = [VARIANT_TABLES[scenario]]
    for row in found:
        skip = ("scenario", "test", "server", "variant")
        values = ", ".join(f"{key} {value}" for key, value in row.items() if key not in skip)
        variant = row.get("variant") or row["test"].rpartition("::")[2].removeprefix("test_")
        lines.append(f"  {variant:<42} {values}  ({row['server']})")
    return lines


def render(rows: list[dict[str, Any]]) -> str:
    lines: list[str] = []
    for found in rows:
        if found["scenario"] == "2":
            lines += _scenario_2(found)
    lines += _stale(rows)
    lines += _table(rows, {"7", "8", "9"})
    lines += _secrets(rows)
    for scenario in VARIANT_TABLES:
        lines += _variants(rows, scenario)
    others = sorted(
        {row["scenario"] for row in rows} - {"2", "3", "7", "8", "9", "16", *VARIANT_TABLES},
        key=int,
    )
    for scenario in others:
        for found in (row for row in rows if row["scenario"] == scenario):
            values = {k: v for k, v in found.items() if k not in ("scenario", "test", "server")}
            lines.append(f"Scenario {scenario}: {json.dumps(values)}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--soak", action="store_true", help="full-size scenarios")
    parser.add_argument("--all", action="store_true", help="every scenario, not only 2, 7-9, 16")
    args, extra = parser.parse_known_args(argv)
    with tempfile.TemporaryDirectory() as directory:
        figures = Path(directory) / "figures.jsonl"
        code = _run_tests(figures, soak=args.soak, everything=args.all, extra=extra)
        print()
        print(render(_load(figures)))
    return code


if __name__ == "__main__":
    raise SystemExit(main())
