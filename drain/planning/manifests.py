"""Schedules in YAML: Kubernetes CronJobs, KEDA ScaledJobs and GitHub Actions workflows.

A KEDA ScaledJob has no schedule of its own, but its scaler polls the database
every ``pollingInterval`` seconds, and each poll is a query that wakes a compute
that suspends on no queries: the polling is the schedule that decides whether the
compute sleeps, so it is read as one (each poll planned as a run of the budget).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from drain.planning.cron import ScheduleError
from drain.planning.plan import Trigger
from drain.planning.run_commands import FoundSchedule, command_words, is_drain_command, run_options

KEDA_DEFAULT_POLLING_SECONDS = 30


def read_yaml(path: Path, text: str) -> list[FoundSchedule]:
    import yaml  # loaded for a YAML file only: drain plan --suggest reads none

    try:
        documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        reason = " ".join(str(exc).split())
        raise ScheduleError(f"{path}: not valid YAML: {reason}") from None
    workflows = [doc for doc in documents if isinstance(doc, dict) and _triggers(doc)]
    if workflows:
        return [entry for doc in workflows for entry in _workflow(path, doc)]
    return _kubernetes(path, documents)


def _kubernetes(path: Path, documents: list[Any]) -> list[FoundSchedule]:
    """Every CronJob and ScaledJob in a (possibly multi-document) manifest.

    Suspended CronJobs do not run, so they are left out.
    """
    found: list[FoundSchedule] = []
    for item in _manifest_items(documents):
        if item.get("kind") == "CronJob":
            entry = _cronjob(path, item)
        elif item.get("kind") == "ScaledJob" and str(item.get("apiVersion", "")).startswith(
            "keda.sh/"
        ):
            entry = _scaledjob(path, item)
        else:
            continue
        if entry is not None:
            found.append(entry)
    return found


def _manifest_items(documents: Iterable[Any]) -> Iterable[dict[str, Any]]:
    for document in documents:
        if not isinstance(document, dict):
            continue
        if document.get("kind") == "List" and isinstance(document.get("items"), list):
            yield from (item for item in document["items"] if isinstance(item, dict))
        else:
            yield document


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _cronjob(path: Path, item: dict[str, Any]) -> FoundSchedule | None:
    name = _mapping(item.get("metadata")).get("name", "(unnamed)")
    where = f"{path}: CronJob {name}"
    spec = _mapping(item.get("spec"))
    schedule = spec.get("schedule")
    if not isinstance(schedule, str) or not schedule.strip():
        raise ScheduleError(f"{where}: spec.schedule is missing")
    if spec.get("suspend") is True:
        return None
    job = _mapping(_mapping(spec.get("jobTemplate")).get("spec"))
    deadline = job.get("activeDeadlineSeconds")
    if deadline is not None and not isinstance(deadline, int | float):
        raise ScheduleError(f"{where}: activeDeadlineSeconds {deadline!r} is not a number")
    words, env = _containers(_mapping(_mapping(job.get("template")).get("spec")))
    timezone = spec.get("timeZone")
    return FoundSchedule(
        expression=schedule,
        source=where,
        trigger=Trigger.KUBERNETES,
        timezone=str(timezone) if timezone else None,
        deadline_seconds=float(deadline) if deadline is not None else None,
        runs_drain=is_drain_command(words),
        **run_options(words, env, where),
    )


def _scaledjob(path: Path, item: dict[str, Any]) -> FoundSchedule:
    """A KEDA ScaledJob: its scaler's polling as the schedule, its Job's run as the run."""
    name = _mapping(item.get("metadata")).get("name", "(unnamed)")
    spec = _mapping(item.get("spec"))
    given = spec.get("pollingInterval")
    seconds = KEDA_DEFAULT_POLLING_SECONDS if given is None else given
    where = f"{path}: ScaledJob {name}"
    expression = polling_cron(seconds, where, defaulted=given is None)
    job = _mapping(spec.get("jobTargetRef"))
    deadline = job.get("activeDeadlineSeconds")
    if deadline is not None and (isinstance(deadline, bool) or not isinstance(deadline, int)):
        raise ScheduleError(f"{where}: activeDeadlineSeconds {deadline!r} is not a number")
    words, env = _containers(_mapping(_mapping(job.get("template")).get("spec")))
    source = (
        f"{where}, its scaler's polling (pollingInterval {seconds} s): each poll is a query "
        "that wakes the compute, planned as a run of the budget"
    )
    return FoundSchedule(
        expression=expression,
        source=source,
        trigger=Trigger.KUBERNETES,
        timezone="UTC",
        deadline_seconds=float(deadline) if deadline is not None else None,
        runs_drain=is_drain_command(words),
        **run_options(words, env, where),
    )


def polling_cron(seconds: Any, where: str, *, defaulted: bool = False) -> str:
    """A polling interval as the five-field cron expression that fires as often.

    Exact only when the polls line up with the clock: a multiple of 60 s that
    divides an hour, or of an hour that divides a day; any other interval is
    refused rather than approximated, since the plan would judge another schedule.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds <= 0:
        raise ScheduleError(
            f"{where}: pollingInterval {seconds!r} is not a whole number of seconds above 0"
        )
    if seconds % 60 == 0 and 3600 % seconds == 0:
        minutes = seconds // 60
        return {1: "* * * * *", 60: "0 * * * *"}.get(minutes, f"*/{minutes} * * * *")
    if seconds % 3600 == 0 and 86400 % seconds == 0:
        hours = seconds // 3600
        return "0 0 * * *" if hours == 24 else f"0 */{hours} * * *"
    shown = f"{seconds} s (KEDA's default, as none is set)" if defaulted else f"{seconds} s"
    awake = " (and a poll that often keeps the compute awake)" if seconds < 60 else ""
    raise ScheduleError(
        f"{where}: pollingInterval {shown} has no cron equivalent to plan{awake}; set it "
        "to a multiple of 60 s that divides an hour, or of 3600 s that divides a day, e.g. 1200"
    )


def _containers(pod: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The command words and plain environment values of the pod's containers."""
    words: list[str] = []
    env: dict[str, str] = {}
    containers = pod.get("containers")
    for container in containers if isinstance(containers, list) else []:
        container = _mapping(container)
        for key in ("command", "args"):
            part = container.get(key)
            if isinstance(part, list):
                words.extend(command_words([str(word) for word in part]))
        variables = container.get("env")
        for variable in variables if isinstance(variables, list) else []:
            variable = _mapping(variable)
            if "name" in variable and "value" in variable:
                env[str(variable["name"])] = str(variable["value"])
    return words, env


def _triggers(document: dict[Any, Any]) -> dict[str, Any]:
    """A workflow's ``on:`` mapping; YAML 1.1 reads a bare ``on`` key as True."""
    if "jobs" not in document:
        return {}
    return _mapping(document.get("on", document.get(True)))


def _workflow(path: Path, document: dict[Any, Any]) -> list[FoundSchedule]:
    """Each ``on.schedule`` cron of a GitHub Actions workflow; GitHub reads cron in UTC."""
    schedules = _triggers(document).get("schedule")
    crons = [
        str(entry["cron"])
        for entry in (schedules if isinstance(schedules, list) else [])
        if isinstance(entry, dict) and "cron" in entry
    ]
    words, env, timeout = _workflow_job(_mapping(document.get("jobs")))
    env = {**_plain_env(document.get("env")), **env}
    return [
        FoundSchedule(
            expression=cron,
            source=f"{path}: schedule {cron}",
            trigger=Trigger.GITHUB_ACTIONS,
            timezone="UTC",
            deadline_seconds=timeout,
            runs_drain=is_drain_command(words),
            **run_options(words, env, f"{path}: schedule {cron}"),
        )
        for cron in crons
    ]


def _workflow_job(jobs: dict[str, Any]) -> tuple[list[str], dict[str, str], float | None]:
    """The words, environment and ``timeout-minutes`` of the job that runs drain."""
    candidates = []
    for job in (_mapping(job) for job in jobs.values()):
        words: list[str] = []
        env = _plain_env(job.get("env"))
        steps = job.get("steps")
        for step in (_mapping(step) for step in (steps if isinstance(steps, list) else [])):
            for line in str(step.get("run", "")).splitlines():
                words.extend(command_words(line))
            env.update(_plain_env(step.get("env")))
        minutes = job.get("timeout-minutes")
        timeout = float(minutes) * 60 if isinstance(minutes, int | float) else None
        candidates.append((words, env, timeout))
    running_drain = [candidate for candidate in candidates if is_drain_command(candidate[0])]
    chosen = running_drain or candidates
    return chosen[0] if chosen else ([], {}, None)


def _plain_env(value: Any) -> dict[str, str]:
    """Environment values written out in the file; ``${{ ... }}`` expressions are unknown."""
    return {
        str(name): str(setting)
        for name, setting in _mapping(value).items()
        if "${{" not in str(setting)
    }
