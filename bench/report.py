"""Render a results file as the Markdown tables BENCHMARKS.md shows.

    python -m bench.report bench/results/latest.json

The figures in BENCHMARKS.md are pasted from this output, never typed by hand:
one table per scenario (median jobs/s, then the range over the runs, seconds,
and the scenario's own columns), its facts, and every target with its verdict.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

EXTRA_COLUMNS = {
    "own_seconds": ("own s", "{:.2f}"),
    "peak_rss_mb": ("peak RSS MB", "{:.1f}"),
    "mb_per_s": ("MB/s", "{:,.0f}"),
    "claim_p50_ms": ("claim p50 ms", "{:.2f}"),
    "claim_p99_ms": ("claim p99 ms", "{:.2f}"),
    "statements": ("statements", "{:.0f}"),
    "sessions": ("sessions", "{:.0f}"),
    "done_under_burst": ("done jobs under the burst", "{:,.0f}"),
}


def table(scenario: dict[str, Any]) -> list[str]:
    rows = scenario["rows"]
    extras = [name for name in EXTRA_COLUMNS if any(name in row for row in rows)]
    with_jobs = any(row["jobs"] for row in rows)
    header = ["system", "jobs"] if with_jobs else ["system"]
    header += ["jobs/s (median)", "min to max"] if with_jobs else []
    header += ["seconds (median)"] + [EXTRA_COLUMNS[name][0] for name in extras]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [row["label"].replace("|", "\\|")]  # a shell pipe in a label
        if with_jobs:
            rate = row.get("jobs_per_second", {})
            cells += [
                f"{row['jobs']:,}",
                f"{rate.get('median', 0):,.0f}",
                f"{rate.get('min', 0):,.0f} to {rate.get('max', 0):,.0f}",
            ]
        cells.append(f"{row['seconds']['median']:.3f}")
        for name in extras:
            fmt = EXTRA_COLUMNS[name][1]
            cells.append(fmt.format(row[name]["median"]) if name in row else "")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def checks(scenario: dict[str, Any]) -> list[str]:
    lines = []
    for check in scenario["checks"]:
        sign = ">=" if check["at_least"] else "<="
        unit = check["unit"]
        verdict = "**met**" if check["met"] else "**not met**"
        lines.append(
            f"- {check['target']}: {check['value']:,.2f}{unit} "
            f"(target {sign} {check['bound']:,.2f}{unit}): {verdict}"
        )
    return lines


def facts(scenario: dict[str, Any]) -> list[str]:
    lines = []
    for name, value in scenario.get("facts", {}).items():
        if isinstance(value, dict):
            value = ", ".join(f"{key} {item}" for key, item in value.items())
        lines.append(f"- {name.replace('_', ' ')}: {value}")
    return lines


def render(results: dict[str, Any]) -> str:
    server = results["server"]
    settings = ", ".join(f"{name}={value}" for name, value in server["settings"].items())
    machine = results["machine"]
    where = "an embedded server" if server["embedded"] else "the machine's server"
    out = [
        f"Measured {results['started_at']} at drain {results.get('revision', '?')}, "
        f"{results['runs']} run(s) per system, on PostgreSQL {server['version']} "
        f"({where}: {settings}); "
        f"{machine['cpus']} CPUs, {machine['memory_mb']:,} MB, Python {machine['python']}; "
        f"load average at the start {', '.join(f'{x:.2f}' for x in machine['load_average'])}.",
    ]
    for scenario in results["scenarios"]:
        out += ["", f"### {scenario.get('title', scenario['name'])}", ""]
        if "error" in scenario:
            out.append(f"Failed: {scenario['error']}")
            continue
        out += table(scenario)
        extra = facts(scenario) + [f"- note: {note}" for note in scenario.get("notes", [])]
        if extra:
            out += ["", *extra]
        if scenario["checks"]:
            out += ["", *checks(scenario)]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__)
    parser.add_argument("results", type=Path, help="a JSON file written by python -m bench")
    args = parser.parse_args(argv)
    sys.stdout.write(render(json.loads(args.results.read_text())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
