"""The suite's command line: pick a server and scenarios, run them, print tables, write JSON.

    python -m bench                          # everything, on an embedded server
    python -m bench --dsn postgresql://root@127.0.0.1:5432/test
    python -m bench --quick                  # small counts, one run: checks the suite works
    python -m bench --only throughput,latency --runs 5

Also runnable as ``python bench/run.py``. Results go to ``bench/results/latest.json``
(``--out`` to choose); BENCHMARKS.md explains the method and shows the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg

from bench.measure import REPO, BenchError, compile_sources
from bench.scenarios import Context, Outcome
from bench.server import bench_server

DEFAULT_OUT = REPO / "bench" / "results" / "latest.json"


def scenario_modules() -> dict[str, ModuleType]:
    """Every scenario, in the order the suite runs them."""
    from bench.scenarios import (
        concurrency,
        empty,
        enqueue,
        exec_output,
        floor,
        history,
        io_bound,
        latency,
        snapshot,
        steady,
        throughput,
        volume,
    )

    modules = (
        throughput,
        floor,
        steady,
        concurrency,
        latency,
        snapshot,
        empty,
        history,
        volume,
        enqueue,
        io_bound,
        exec_output,
    )
    return {module.NAME: module for module in modules}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    names = ", ".join(scenario_modules())
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmarks of drain against the direct protocol and the known Postgres "
        "queues, measured side by side.",
        epilog=f"Scenarios: {names}.",
    )
    parser.add_argument(
        "--dsn",
        help="an administrative DSN: the suite creates and drops its own databases there "
        "(default: an embedded PostgreSQL, fsync on)",
    )
    parser.add_argument("--quick", action="store_true", help="small counts, one run each")
    parser.add_argument("--runs", type=int, help="runs per system (default 3; 1 with --quick)")
    parser.add_argument("--only", help="comma-separated scenarios to run (default: all)")
    parser.add_argument("--no-peers", action="store_true", help="leave out the peer queues")
    parser.add_argument(
        "--graphile-worker",
        help="path of the graphile-worker command (default: $BENCH_GRAPHILE_WORKER or PATH)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write JSON")
    args = parser.parse_args(argv)
    known = scenario_modules()
    args.scenarios = [name.strip() for name in (args.only or ",".join(known)).split(",")]
    unknown = [name for name in args.scenarios if name not in known]
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)}; choose from {names}")
    if args.runs is None:
        args.runs = 1 if args.quick else 3
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def revision() -> str:
    """The commit measured, marked ``+dirty`` when the working tree differs from it.

    ``$BENCH_REVISION`` names it instead, for a commit exported out of git
    (``git archive``) to be measured with the suite of today.
    """
    if os.environ.get("BENCH_REVISION"):
        return os.environ["BENCH_REVISION"]
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", "drain", "sql"],
            capture_output=True,
            text=True,
            cwd=REPO,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return (commit or "unknown") + ("+dirty" if dirty else "")


def machine() -> dict[str, Any]:
    memory = 0
    with contextlib.suppress(ValueError, OSError):
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    return {
        "cpus": os.cpu_count(),
        "memory_mb": memory,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average": os.getloadavg(),
    }


def render(outcome: Outcome) -> str:
    """A scenario as a text table: medians first, then min and max, then the checks."""
    lines = [f"\n== {outcome.title}"]
    extras = sorted({name for row in outcome.rows for name in row.extra})
    header = f"{'system':<72} {'jobs':>8} {'jobs/s':>9} {'min':>9} {'max':>9} {'seconds':>8}"
    header += "".join(f" {name:>14}" for name in extras)
    lines.append(header)
    for row in outcome.rows:
        rate = row.rate
        line = f"{row.label[:72]:<72} {row.jobs:>8,}"
        if row.jobs:
            line += f" {rate.median:>9,.0f} {rate.minimum:>9,.0f} {rate.maximum:>9,.0f}"
        else:
            line += f" {'':>9} {'':>9} {'':>9}"
        line += f" {row.seconds.median:>8.3f}"
        for name in extras:
            series = row.extra.get(name)
            line += f" {series.median:>14,.2f}" if series else f" {'':>14}"
        lines.append(line)
    lines += [f"  note: {note}" for note in outcome.notes]
    lines += [f"  {key}: {value}" for key, value in outcome.facts.items()]
    lines += [f"  {check.line()}" for check in outcome.checks]
    return "\n".join(lines)


def main(argv: list[str] | None = None, *, log: Callable[[str], None] | None = None) -> int:
    args = parse_args(argv)
    say = log or (lambda text: print(text, file=sys.stderr, flush=True))
    modules = scenario_modules()
    started = time.monotonic()
    results: dict[str, Any] = {
        "started_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": ["python", "-m", "bench", *(argv if argv is not None else sys.argv[1:])],
        "revision": revision(),
        "quick": args.quick,
        "runs": args.runs,
        "machine": machine(),
        "scenarios": [],
    }
    failed = False
    compile_sources()
    with bench_server(args.dsn) as server:
        info = server.info
        results["server"] = info.as_dict()
        say(
            f"PostgreSQL {info.version} ({'embedded' if info.embedded else 'from --dsn'}), "
            f"fsync={info.settings['fsync']}, synchronous_commit="
            f"{info.settings['synchronous_commit']}, {os.cpu_count()} CPUs, "
            f"{args.runs} run(s) per system, drain at {results['revision']}"
        )
        ctx = Context(
            server=server,
            runs=args.runs,
            quick=args.quick,
            peers=not args.no_peers,
            graphile=args.graphile_worker,
            log=say,
        )
        for name in args.scenarios:
            say(f"-- {name}")
            began = time.monotonic()
            try:
                outcome = modules[name].run(ctx)
            except (BenchError, psycopg.Error) as exc:
                failed = True
                say(f"scenario {name} failed: {exc}")
                results["scenarios"].append({"name": name, "error": str(exc)})
                continue
            print(render(outcome), flush=True)
            results["scenarios"].append(
                {**outcome.as_dict(), "elapsed": round(time.monotonic() - began, 1)}
            )
    results["seconds"] = round(time.monotonic() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    say(f"results written to {args.out} ({results['seconds']} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
