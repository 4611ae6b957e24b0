"""--exec output: one program writing a lot of 45-byte lines to stdout, forwarded by drain.

drain forwards a program's stdout to its own stderr (here a file, as a log on disk
is), masked, each line cut at 8 KiB. The program is ``yes`` cut by ``head -c``;
the row beside it runs that pipeline alone into a file, the disk's own pace.
Figures: MB/s start to exit (process start included) and peak RSS at two sizes,
so flat memory shows as equal peaks.

Targets (issue 25): at least 200 MB/s through drain; peak RSS at the large size
within 10 MB of that at the small one.
"""

from __future__ import annotations

import tempfile

from bench.measure import PYTHON, ProcessRun, run_process
from bench.scenarios import Check, Context, Outcome, Row, alternate, setup_all
from bench.server import BenchServer
from bench.systems import DrainTableSystem, System

NAME = "exec-output"
LINE = "x" * 44  # with its newline, 45 bytes
MIB = 1 << 20
MB = 1_000_000
SPEED_TARGET = 200.0  # MB/s
FLAT_MB = 10.0


def program(size: int) -> str:
    return f"yes '{LINE}' | head -c {size}"


class ExecDrain(DrainTableSystem):
    """``drain run --exec`` over one job whose program writes ``size`` bytes of lines."""

    def __init__(self, server: BenchServer, size: int) -> None:
        super().__init__(server)
        self.size = size
        self.key = f"drain-exec-{size // MIB}mib"
        self.label = f'drain run --exec "yes | head -c {size // MIB} MiB" (stderr to a file)'

    def argv(self, dsn: str) -> list[str]:
        return [PYTHON, "-m", "drain", "run", "--exec", program(self.size), "--dsn", dsn, "--json"]


class Pipeline(System):
    """The program alone, its output into a file: what the disk and ``yes`` allow."""

    def __init__(self, server: BenchServer, size: int) -> None:
        super().__init__(server)
        self.size = size
        self.key = f"alone-{size // MIB}mib"
        self.label = f"yes | head -c {size // MIB} MiB > file, alone"

    def setup(self) -> None:
        """Nothing: no database."""

    def fill(self, count: int) -> None:
        """Nothing to enqueue."""

    def left(self) -> int:
        return 0

    def argv(self, dsn: str) -> list[str]:
        raise NotImplementedError("run() writes to a temporary file of its own")

    def run(self, count: int, dsn: str | None = None) -> ProcessRun:
        with tempfile.NamedTemporaryFile() as out:
            command = f"{program(self.size)} > {out.name}"
            return run_process(["/bin/sh", "-c", command]).check(self.label)


def measure(system: System, count: int, row: Row) -> ProcessRun:
    system.fill(1)
    result = system.run(1)
    row.seconds.add(result.seconds)
    size = system.size if isinstance(system, ExecDrain | Pipeline) else 0
    row.add("mb_per_s", size / MB / result.seconds)
    row.add("peak_rss_mb", result.max_rss_mb)
    return result


def run(ctx: Context) -> Outcome:
    large = ctx.size(1024 * MIB, 128 * MIB)
    small = large // 8
    outcome = Outcome(NAME, f"--exec output: {large // MIB:,} MiB of 45-byte lines on stdout")
    systems: list[System] = [
        ExecDrain(ctx.server, large),
        ExecDrain(ctx.server, small),
        Pipeline(ctx.server, large),
    ]
    setup_all(systems)
    plan = []
    for system in systems:
        row = Row(system.label, system.key, 0)
        outcome.rows.append(row)
        plan.append((system, row))
    alternate(ctx, plan, measure)
    big, little = outcome.rows[0], outcome.rows[1]
    outcome.checks.append(
        Check(
            "MB/s through drain, start to exit", big.extra["mb_per_s"].median, SPEED_TARGET, unit=""
        )
    )
    growth = big.extra["peak_rss_mb"].median - little.extra["peak_rss_mb"].median
    outcome.checks.append(
        Check(
            f"peak RSS growth from {small // MIB} MiB to {large // MIB} MiB",
            growth,
            FLAT_MB,
            at_least=False,
            unit=" MB",
        )
    )
    return outcome
