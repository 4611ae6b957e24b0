"""``drain run``: drain the queue once and exit with a code a scheduler can act on."""

# No postponed annotations in this module: typer would evaluate each option's
# annotation string twice on every start of a run (about 3 ms; BENCHMARKS.md).
import os
import sys
import time
from typing import Annotated

import typer

from drain import runner
from drain.cli import common
from drain.config import (
    DEFAULT_ARCHIVE_BATCH,
    DEFAULT_BATCH_SIZE,
    RunConfig,
)
from drain.db import ConnectOptions, resolve_dsn
from drain.errors import UsageError
from drain.queue import DEFAULT_MAX_PAYLOAD

EXAMPLES = """\
Examples:

  drain run --app myapp.jobs --max-seconds 300

  drain run --handler myapp.jobs:send_email --queue emails --concurrency 8

  drain run --exec "python scripts/render.py" --queue reports --lease 15m

Exit codes: 0 drained (or nothing to do), 3 stopped with work left (budget or
signal: a scheduler may start another run), 1 the run failed, 2 usage error.
"""


def process_age() -> float:
    """Seconds since this process started (Linux), so start-up counts against the budget.

    A scheduler's timeout covers the whole process; interpreter and import time
    are part of what the budget must fit in.
    """
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime", encoding="ascii") as uptime:
            now = float(uptime.read().split()[0])
        return max(0.0, now - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


ArchiveModeChoice = Annotated[
    str,
    typer.Option(
        "--archive-mode",
        envvar="DRAIN_ARCHIVE_MODE",
        help="move: into <table>_archive; delete: drop them; off: keep them.",
    ),
]


def run_command(
    app_module: Annotated[
        str | None,
        typer.Option(
            "--app",
            envvar="DRAIN_APP",
            help="Import this module; its @drain.handler functions handle their queues.",
        ),
    ] = None,
    handler: Annotated[
        str | None,
        typer.Option(
            "--handler",
            envvar="DRAIN_HANDLER",
            help="module:function handling --queue (or the 'default' queue).",
        ),
    ] = None,
    exec_command: Annotated[
        str | None,
        typer.Option(
            "--exec",
            envvar="DRAIN_EXEC",
            help="Run this shell command per job, payload as JSON on stdin; exit 0 = done.",
        ),
    ] = None,
    exec_keep_env: Annotated[
        list[str] | None,
        typer.Option(
            "--exec-keep-env",
            envvar="DRAIN_EXEC_KEEP_ENV",
            help="A credential variable the --exec program keeps (repeatable, or comma "
            "separated): programs get no DRAIN_DSN, DATABASE_URL, PGPASSWORD or PGPASSFILE, "
            "nor any variable holding the run's password, unless named here.",
        ),
    ] = None,
    queues: Annotated[
        list[str] | None,
        typer.Option(
            "--queue",
            "-q",
            envvar="DRAIN_QUEUE",
            help="A queue to drain (repeatable). Default: every queue with a handler.",
        ),
    ] = None,
    batch_size: Annotated[
        int,
        typer.Option(
            "--batch-size",
            envvar="DRAIN_BATCH_SIZE",
            help="Jobs per claim, at most (claims start at 100 and grow only while jobs are fast).",
        ),
    ] = DEFAULT_BATCH_SIZE,
    concurrency: Annotated[
        int,
        typer.Option(
            "--concurrency", "-c", envvar="DRAIN_CONCURRENCY", help="Jobs running at once."
        ),
    ] = 1,
    lease: Annotated[
        str,
        typer.Option(
            "--lease", envvar="DRAIN_LEASE", help="Lease per claim; renewed while a job works."
        ),
    ] = "5m",
    max_seconds: Annotated[
        str,
        typer.Option(
            "--max-seconds",
            envvar="DRAIN_MAX_SECONDS",
            help="The run's budget: no claim starts after it.",
        ),
    ] = "300",
    grace_seconds: Annotated[
        str,
        typer.Option(
            "--grace-seconds",
            envvar="DRAIN_GRACE_SECONDS",
            help="How long in-flight jobs may finish after the budget or a signal.",
        ),
    ] = "10",
    max_runners: Annotated[
        int,
        typer.Option(
            "--max-runners",
            envvar="DRAIN_MAX_RUNNERS",
            help="At most this many runs work at once on this table (0: no limit).",
        ),
    ] = 0,
    archive_after: common.ArchiveAfterOption = "7d",
    archive_mode: ArchiveModeChoice = "move",
    archive_batch: common.ArchiveBatchOption = DEFAULT_ARCHIVE_BATCH,
    vacuum: Annotated[
        str,
        typer.Option(
            "--vacuum",
            envvar="DRAIN_VACUUM",
            help="auto: when dead rows pile up; always; off.",
        ),
    ] = "auto",
    backoff_base: Annotated[
        str,
        typer.Option("--backoff-base", envvar="DRAIN_BACKOFF_BASE", help="First retry delay / 2."),
    ] = "10s",
    backoff_cap: Annotated[
        str,
        typer.Option("--backoff-cap", envvar="DRAIN_BACKOFF_CAP", help="Longest retry delay."),
    ] = "1h",
    max_payload: Annotated[
        int,
        typer.Option(
            "--max-payload",
            envvar="DRAIN_MAX_PAYLOAD",
            help="Bytes; a larger stored payload fails its job instead of being loaded.",
        ),
    ] = DEFAULT_MAX_PAYLOAD,
    connect_retry: common.ConnectRetryOption = "30s",
    no_record: Annotated[
        bool,
        typer.Option("--no-record", envvar="DRAIN_NO_RECORD", help="Do not write to drain_runs."),
    ] = False,
    dsn: common.DsnOption = None,
    schema_name: common.SchemaOption = "public",
    table: common.TableOption = "jobs",
    connect_timeout: common.ConnectTimeoutOption = "10s",
    pooler: common.PoolerOption = False,
    json_output: common.JsonOption = False,
    verbose: common.VerboseOption = False,
) -> None:
    """Drain the queue once: reap, claim and run until empty or out of budget, then exit.

    Connects (retrying while a suspended compute resumes), reaps expired leases,
    claims batches and runs them, releases what it did not start, archives old
    done jobs, vacuums when needed, records the run and closes its connection.
    """
    common.configure_logging(verbose)
    with common.errors_as_exit_codes(verbose):
        if archive_mode not in ("move", "delete", "off"):
            raise UsageError("--archive-mode must be move, delete or off")
        if vacuum not in ("auto", "always", "off"):
            raise UsageError("--vacuum must be auto, always or off")
        config = RunConfig(
            connect=ConnectOptions(
                dsn=resolve_dsn(dsn),
                connect_timeout=common.duration(connect_timeout, "--connect-timeout"),
                retry_for=common.duration(connect_retry, "--connect-retry"),
                pooler=pooler,
            ),
            table=common.table_of(schema_name, table),
            queues=tuple(queues or ()),
            batch_size=batch_size,
            concurrency=concurrency,
            lease=common.duration(lease, "--lease"),
            max_seconds=common.duration(max_seconds, "--max-seconds"),
            grace_seconds=common.duration(grace_seconds, "--grace-seconds"),
            max_runners=max_runners,
            archive_after=common.duration(archive_after, "--archive-after"),
            archive_mode=archive_mode,  # type: ignore[arg-type]
            archive_batch=archive_batch,
            vacuum=vacuum,  # type: ignore[arg-type]
            backoff_base=common.duration(backoff_base, "--backoff-base"),
            backoff_cap=common.duration(backoff_cap, "--backoff-cap"),
            max_payload=max_payload,
            record=not no_record,
            progress=sys.stderr.isatty() and not json_output,
            exec_keep_env=tuple(
                name.strip()
                for given in exec_keep_env or ()
                for name in given.split(",")
                if name.strip()
            ),
        )
        config.validate()
        handlers = runner.resolve_handlers(
            app=app_module,
            handler=handler,
            exec_command=exec_command,
            queues=config.queues,
            config=config,
        )
        started = time.monotonic() - process_age()
        summary = runner.Runner(config, handlers, started=started).run()
    for note in summary.notes:
        typer.echo(f"drain: {note}", err=True)
    if summary.error:
        typer.echo(f"drain: error: {summary.error}", err=True)
    typer.echo(summary.line(), err=True)
    if json_output:
        common.print_json(summary.as_dict())
    raise typer.Exit(summary.exit_code)
