"""Which schedules to plan, and which source wins for each setting.

The schedules of the arguments and of the files (a directory is searched for
schedule files, each read by :mod:`drain.planning.deploy_files`), then for each setting
the command line over the file over ``drain run``'s defaults, and for ``d``
``--run-seconds`` over the recorded runs (``--dsn``) over the budget.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

from drain.core import settings as run_settings
from drain.core.errors import UsageError
from drain.planning.cron import ScheduleError, normalize
from drain.planning.deploy_files import file_text, read_schedules, service_note
from drain.planning.plan import Provider, RunSchedule, Trigger
from drain.planning.run_commands import FoundSchedule

# -- what to plan, and which source wins ---------------------------------------------


@dataclass(frozen=True)
class RunSettings:
    """What the command line says about the runs; ``None`` leaves it to the file."""

    run_seconds: float | None
    max_seconds: float | None
    grace_seconds: float | None
    lease_seconds: float | None
    trigger: Trigger | None


@dataclass(frozen=True)
class RunSecondsSource:
    """Where ``d`` came from, said in the report so nobody mistakes a guess for a measure."""

    text: str
    runs: int | None = None
    history_days: float | None = None


class History(NamedTuple):
    """What a queue's run table says about ``d`` (``drain plan --dsn``), read by the caller."""

    table: str
    days: float
    runs: int
    run_seconds: float | None


def requested(
    suggesting: bool, wait: float | None, expressions: Sequence[str], files: Sequence[Path]
) -> list[FoundSchedule]:
    """The schedules to plan, or none for ``--suggest``, which proposes its own."""
    if not suggesting:
        return given(expressions, files)
    if expressions or files:
        raise UsageError("--suggest proposes schedules; give it no schedules of your own")
    if wait is None:
        raise UsageError("--suggest needs --max-wait, e.g. --max-wait 1h")
    return []


class Group(NamedTuple):
    """Schedules planned together; ``source`` names the directory's file they came from."""

    source: str | None
    schedules: list[FoundSchedule]


def requested_groups(
    expressions: Sequence[str], files: Sequence[Path]
) -> tuple[list[Group], list[tuple[str, str]]]:
    """What to plan, as timelines of their own, and the files skipped with their reasons.

    Arguments and named files run together, so they share one timeline; each
    schedule file found in a directory is planned on its own.
    """
    together = given(expressions, [path for path in files if not path.is_dir()], check=False)
    groups = [Group(None, together)] if together else []
    skipped: list[tuple[str, str]] = []
    for path in files:
        if path.is_dir():
            found = survey(path)
            groups.extend(Group(source, these) for source, these in found.files)
            skipped.extend(found.skipped)
    if not groups:
        raise UsageError('give a schedule, e.g. drain plan "*/20 * * * *", or --from FILE')
    for group in groups:
        for entry in group.schedules:
            _check_from_file(entry)
    return groups, skipped


def given(
    expressions: Sequence[str], files: Sequence[Path], *, check: bool = True
) -> list[FoundSchedule]:
    """The arguments' schedules, then the files', each checked before anything connects."""
    if check and not expressions and not files:
        raise UsageError('give a schedule, e.g. drain plan "*/20 * * * *", or --from FILE')
    found = [FoundSchedule(_checked(text), "argument", Trigger.CRON) for text in expressions]
    for path in files:
        found.extend(discover(path))
    for entry in found:
        _check_from_file(entry)
    return found


def _check_from_file(entry: FoundSchedule) -> None:
    """A bad expression read from a file is reported with the file and line it came from."""
    if entry.source == "argument":
        return
    try:
        normalize(entry.expression)
    except ScheduleError as exc:
        raise ScheduleError(f"{entry.source}: {exc}") from None


def _checked(expression: str) -> str:
    """The expression, checked early so an unquoted one gets a hint about quoting."""
    try:
        normalize(expression)
    except ScheduleError as exc:
        if " " not in expression.strip() and not expression.startswith("@"):
            raise ScheduleError(f'{exc}; quote the whole expression: "*/20 * * * *"') from None
        raise
    return expression


def discover(path: Path) -> list[FoundSchedule]:
    """A file's schedules; a directory's, from the schedule files anywhere below it."""
    if not path.is_dir():
        return read_schedules(path)
    found = [entry for _, these in survey(path).files for entry in these]
    return found


@dataclass(frozen=True)
class Survey:
    """A directory's schedule files, each with its schedules, and what was skipped and why.

    The files of a directory such as ``deploy/`` are alternatives (one per
    platform), not schedules that run together: each is planned on its own.
    """

    files: list[tuple[str, list[FoundSchedule]]]
    skipped: list[tuple[str, str]]


def survey(path: Path) -> Survey:
    """Read every schedule file below ``path``; name each file left out, with its reason."""
    files: list[tuple[str, list[FoundSchedule]]] = []
    skipped: list[tuple[str, str]] = []
    others: list[str] = []
    for entry in sorted(path.rglob("*")):
        if not entry.is_file() or any(
            part.startswith(".") or part == "__pycache__" for part in entry.relative_to(path).parts
        ):
            continue
        if _looks_like_schedule_file(entry):
            files.append((str(entry), read_schedules(entry)))
        elif (reason := _why_skipped(entry)) is not None:
            skipped.append((str(entry), reason))
        else:
            others.append(entry.name)
    if not files:
        raise UsageError(f"no crontab, CronJob manifest or systemd timer found in {path}")
    if others:
        skipped.append(
            (
                f"{len(others)} other file(s) ({', '.join(others)})",
                "not a crontab, a CronJob manifest, a workflow or a systemd timer",
            )
        )
    return Survey(files, skipped)


def _why_skipped(path: Path) -> str | None:
    """Why a file that looks deploy-related holds no schedule drain can plan, or None."""
    if path.suffix == ".service":
        return service_note(path)
    if path.suffix in {".yaml", ".yml", ".json"} and _CLOUD_RUN_JOB.search(file_text(path)):
        return (
            "a Cloud Run job holds no schedule; Cloud Scheduler starts its executions: plan "
            'that cron with the job\'s budget, e.g. drain plan "7 * * * *" --max-seconds 300'
        )
    if path.suffix in {".yaml", ".yml", ".json"}:
        found = re.search(r"ScheduleExpression\s*:\s*['\"]?([^'\"\n]+)", file_text(path))
        if found:
            expression = found.group(1).strip()
            fields = re.fullmatch(r"cron\((.*)\)", expression)
            parts = fields.group(1).split() if fields else []
            hint = (
                f'drain plan "{" ".join(p.replace("?", "*") for p in parts[:5])}" --trigger lambda'
                if len(parts) == 6
                else "drain plan with the cron expression it stands for and --trigger lambda"
            )
            return f"an AWS EventBridge schedule ({expression}) is not read from a file; plan it as: {hint}"
    return None


# A Cloud Run job (gcloud run jobs replace): started by Cloud Scheduler, not by a schedule in it.
_CLOUD_RUN_JOB = re.compile(r"^apiVersion:\s*['\"]?run\.googleapis\.com/", re.MULTILINE)
# A KEDA ScaledJob: its scaler's polling is read as the schedule that wakes the compute.
_SCALED_JOB = re.compile(r"^kind:\s*['\"]?ScaledJob\b", re.MULTILINE)


def _looks_like_schedule_file(path: Path) -> bool:
    if path.suffix in {".timer", ".cron"} or "crontab" in path.name:
        return True
    if path.suffix in {".yaml", ".yml"}:
        text = path.read_text(encoding="utf-8", errors="replace")
        return (
            "CronJob" in text
            or _SCALED_JOB.search(text) is not None
            or re.search(r"^\s*-?\s*cron\s*:", text, re.MULTILINE) is not None
        )
    return False


def resolve(entry: FoundSchedule, settings: RunSettings) -> RunSchedule:
    """The command line wins over the file, and the file over drain run's defaults."""
    budget = _first(settings.max_seconds, entry.max_seconds, run_settings.DEFAULT_MAX_SECONDS)
    return RunSchedule(
        expression=entry.expression,
        run_seconds=_first(settings.run_seconds, budget),
        timezone=entry.timezone,
        max_seconds=budget,
        grace_seconds=_first(
            settings.grace_seconds, entry.grace_seconds, run_settings.DEFAULT_GRACE_SECONDS
        ),
        lease_seconds=_first(
            settings.lease_seconds, entry.lease_seconds, run_settings.DEFAULT_LEASE
        ),
        deadline_seconds=entry.deadline_seconds,
        trigger=settings.trigger or entry.trigger,
        source=entry.source,
    )


def template(settings: RunSettings) -> RunSchedule:
    """The schedule ``--suggest`` varies: the command line's settings over drain run's defaults."""
    return resolve(FoundSchedule("* * * * *", "suggestion", Trigger.CRON), settings)


def _first(*values: float | None) -> float:
    return next(value for value in values if value is not None)


def wants_history(settings: RunSettings, dsn: str | None, days: float) -> bool:
    """Whether ``d`` is to be read from the recorded runs: ``--run-seconds`` wins over ``--dsn``."""
    if settings.run_seconds is not None or dsn is None:
        return False
    if days <= 0:
        raise UsageError("--history-days must be above 0")
    return True


def settle_run_seconds(
    settings: RunSettings, history: History | None
) -> tuple[RunSettings, RunSecondsSource]:
    """Settle ``d``: --run-seconds, else the recorded runs (with --dsn), else the budget."""
    if settings.run_seconds is not None:
        return settings, RunSecondsSource("--run-seconds")
    if history is None:
        return settings, RunSecondsSource("the --max-seconds budget")
    over = f"the last {history.days:g} days"
    if history.run_seconds is None:
        return settings, RunSecondsSource(
            f"no runs of {history.table} recorded over {over}; the --max-seconds budget",
            runs=0,
            history_days=history.days,
        )
    text = f"the 95th percentile of {history.runs} runs over {over}"
    return (
        replace(settings, run_seconds=history.run_seconds),
        RunSecondsSource(text, runs=history.runs, history_days=history.days),
    )


def idle_timeout(option: float | None, provider: Provider | None) -> tuple[float, str]:
    """``T`` and where it came from: --idle-timeout, else the provider's, else the article's."""
    if option is not None:
        return option, "--idle-timeout"
    if provider is not None:
        return provider.idle_timeout, f"{provider.name.value}'s default"
    return run_settings.DEFAULT_IDLE_TIMEOUT, "the default (the article's platform)"
