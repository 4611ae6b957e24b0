"""The CLI documents itself, the README and the docs site document the CLI.

The site's option reference is generated (docs/hooks/options.py), so these tests
check that it holds every option ``--help`` shows; every console example of the
site runs against a real database, one shell and one database per page.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import click
import psycopg
import pytest
import typer.main
from psycopg import sql

from drain.cli import app
from tests.support import console, programs, with_dbname

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
COMMAND = typer.main.get_command(app)


def _leaves(command: click.Command, path: str = "") -> dict[str, click.Command]:
    """Every command and subcommand by its full name (``schedule add``), groups too."""
    found = {path: command} if path else {}
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            found |= _leaves(sub, f"{path} {name}".strip())
    return found


COMMANDS = _leaves(COMMAND)
NAMES = sorted(COMMANDS)


def test_every_command_is_there() -> None:
    expected = [
        "archive",
        "cancel",
        "demo",
        "enqueue",
        "init",
        "jobs",
        "migrate",
        "plan",
        "purge",
        "report",
        "retry",
        "run",
        "schedule",
        "status",
    ]
    assert sorted(COMMAND.commands) == expected  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", NAMES)
def test_every_command_has_help_with_an_example(name: str) -> None:
    command = COMMANDS[name]
    assert command.help and len(command.help.split()) >= 5
    assert command.epilog and "Example" in command.epilog
    assert f"drain {name}" in command.epilog


@pytest.mark.parametrize("name", NAMES)
def test_every_option_also_reads_an_environment_variable(name: str) -> None:
    command = COMMANDS[name]
    options = [p for p in command.params if p.param_type_name == "option" and p.name != "help"]
    missing = [param.name for param in options if not param.envvar]
    assert missing == []
    for param in options:
        if param.name == "dsn":
            continue
        flag = max(param.opts, key=len).lstrip("-").upper().replace("-", "_")
        names = param.envvar if isinstance(param.envvar, list) else [param.envvar]
        assert names[0].startswith("DRAIN_") and names[0].endswith(flag), (flag, names)


@pytest.mark.parametrize("name", NAMES)
def test_every_command_is_in_the_readme(name: str) -> None:
    assert re.search(rf"`drain {name}\b", README), f"drain {name} is not described in README.md"


def test_the_readme_opens_with_the_demo_and_test_commands() -> None:
    opening = README.split("\n## ", 1)[0]
    assert "drain demo" in opening
    assert "pytest -q" in opening


def test_ci_runs_the_readmes_test_command() -> None:
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
    assert "pytest -q" in README
    assert ci.count("pytest -q") >= 2


# -- the docs site ----------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
PAGES = sorted(path for path in DOCS.rglob("*.md"))


def _hook() -> Any:
    """docs/hooks/options.py, the MkDocs hook, loaded as a module."""
    spec = importlib.util.spec_from_file_location("drain_docs_hook", DOCS / "hooks" / "options.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_site_has_enough_pages_and_none_too_long() -> None:
    assert len(PAGES) >= 8
    for page in PAGES:
        lines = page.read_text().count("\n")
        assert lines <= 700, f"{page.relative_to(REPO)} has {lines} lines"


def test_the_readme_stays_short() -> None:
    assert README.count("\n") <= 300
    headings = re.findall(r"^#+ .*$", README, re.M)
    assert len(headings) == len(set(headings)), "a heading appears twice"
    assert "-->" not in README and "<!--" not in README


def test_every_results_file_the_benchmarks_name_is_in_the_repository() -> None:
    """A figure's source stays reproducible: the file it names came with the clone.

    The suite's scratch output (``--out``'s default) is named only as where
    results go, and git ignores it.
    """
    from bench.run import DEFAULT_OUT

    texts = [REPO / "BENCHMARKS.md", *PAGES]
    named = {n for t in texts for n in re.findall(r"bench/results/[\w.-]+\.json", t.read_text())}
    scratch = DEFAULT_OUT.relative_to(REPO).as_posix()
    missing = sorted(n for n in named - {scratch} if not (REPO / n).is_file())
    assert len(named) > 3
    assert not missing, f"named but not in the repository: {missing}"


def test_the_reference_has_a_section_for_every_command_and_every_table() -> None:
    """Every command takes its options from the settings table, so the table names
    each one the reference documents, and the reference documents each table."""
    from drain.core import settings

    hook = _hook()
    assert set(hook.documented()) | set(hook.OTHER_COMMANDS) == set(settings.COMMANDS)
    reference = hook.reference()
    for name in settings.COMMANDS:
        title = name if name in hook.OTHER_COMMANDS else f"drain {name}"
        assert f"## `{title}`\n" in reference, name
        rows = [row for row in hook.settings_of(name) if not row.argument]
        assert [row.flags[0] for row in rows] == [s.option for s in settings.settings_of(name)]


@pytest.mark.parametrize("name", _hook().documented())
def test_every_option_in_help_is_in_the_generated_reference(name: str) -> None:
    from typer.testing import CliRunner

    hook = _hook()
    reference = hook.reference()
    section = reference.split(f"## `drain {name}`\n", 1)[1].split("\n## ", 1)[0]
    shown = CliRunner().invoke(app, [*name.split(), "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    # the option rows of the help's panels, not options named in its prose
    rows = re.findall(r"^[│|]\s+\*?\s*(--[a-z][a-z0-9-]*)", shown.output, re.M)
    options = set(rows) - {"--help"}
    assert options, shown.output
    missing = sorted(option for option in options if f"`{option}`" not in section)
    assert missing == [], f"drain {name}: {missing} are in --help, not in the reference"


def test_the_mistakes_page_lists_the_catalogue() -> None:
    table = _hook().mistakes()
    assert table.count("\n") > 80
    assert "| no-such-command | `drain bogus` | 2 |" in table


# The programs a page's examples (or the steps the tests take before them) run,
# each with its Debian package: the page's test skips without them, like any test
# that needs a program (tests/support/programs.py).
PROGRAMS = {
    "how-to/observe.md": [
        ("prometheus-pushgateway", "prometheus-pushgateway"),
        ("curl", "curl"),
    ],
}


def _examples() -> dict[str, list[console.Block]]:
    found: dict[str, list[console.Block]] = {}
    for page in PAGES:
        blocks = [block for block in console.blocks(page, DOCS) if block.runs_drain]
        if blocks:
            found[page.relative_to(DOCS).as_posix()] = blocks
    return found


EXAMPLES = _examples()


# Pages whose examples start on a database without drain's schema (their first
# example is `drain init`); the others start with the schema in place.
WITHOUT_SCHEMA = {"tutorial.md"}


def _run_page(page: str, server_dsn: str, work: Path) -> tuple[list[Any], list[Any]]:
    """Every example of one page, in order, in one shell, on a database of its own."""
    commands = [c for block in EXAMPLES[page] for c in block.to_run]
    work.mkdir(parents=True)
    (work / "deploy").symlink_to(REPO / "deploy")
    for name, body in console.files(DOCS / page).items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)  # alembic/versions/...
        (work / name).write_text(body)
    fixtures = REPO / "tests" / "data" / "docs"
    for fixture in fixtures.iterdir() if fixtures.is_dir() else ():
        (work / fixture.name).write_bytes(fixture.read_bytes())
    name = f"drain_docs_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DRAIN_", "PG", "OTEL_", "SENTRY_")) and key != "DATABASE_URL"
    }
    environment |= {
        "DATABASE_URL": with_dbname(server_dsn, name),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{environment.get('PATH', '')}",
        "PYTHONPATH": str(work),
        "TZ": "UTC",
        "COLUMNS": "200",
        "NO_COLOR": "1",
    }
    try:
        if page not in WITHOUT_SCHEMA:
            subprocess.run(
                ["drain", "init"], env=environment, check=True, capture_output=True, cwd=work
            )
        shell = subprocess.run(
            ["bash", "-c", console.script(commands)],
            env=environment,
            cwd=work,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        _stop_what_the_page_left_running(work)
        with psycopg.connect(server_dsn, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
    return commands, console.split_output(shell.stdout, len(commands))


def _stop_what_the_page_left_running(work: Path) -> None:
    """Stop the programs a page's steps started (each writes ``NAME.pid``) and did
    not stop, as when an example failed before the step that stops them."""
    import signal

    for pid_file in work.glob("*.pid"):
        with contextlib.suppress(ValueError, ProcessLookupError):
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)


@pytest.fixture(scope="module")
def page_runs(
    server_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[list[Any], list[Any]]]:
    """Every page's examples, the pages at once (most of a page's time is process
    start-up and the waits its examples ask for, so they overlap well)."""
    from concurrent.futures import ThreadPoolExecutor

    root = tmp_path_factory.mktemp("docs-examples")
    with ThreadPoolExecutor(max_workers=len(EXAMPLES)) as pool:
        futures = {
            page: pool.submit(_run_page, page, server_dsn, root / page.replace("/", "-"))
            for page in EXAMPLES
        }
        return {page: future.result() for page, future in futures.items()}


@pytest.mark.timeout(900)
@pytest.mark.parametrize("page", sorted(EXAMPLES))
def test_the_console_examples_of_a_page_print_what_it_says(
    page: str, page_runs: dict[str, tuple[list[Any], list[Any]]]
) -> None:
    for program, package in PROGRAMS.get(page, ()):
        programs.need(program, package=package)
    commands, results = page_runs[page]
    wrong: list[str] = []
    for command, (lines, code) in zip(commands, results, strict=True):
        if os.environ.get("DRAIN_DOCS_SHOW"):
            print(f"$ {command.text}\n" + "\n".join(lines) + f"\n(exit {code})")
        if command.hidden:
            if code != 0:
                wrong.append(
                    f"{page}:{command.line}: the tests' own step failed (exit {code}): "
                    f"{command.text}\n" + "\n".join(lines)
                )
            continue
        want = command.exit_code
        if not console.matches(command.output, lines) or (want is not None and want != code):
            wrong.append(
                f"{page}:{command.line}: $ {command.text}\n--- the page says:\n"
                + "\n".join(command.expected)
                + f"\n--- it printed (exit {code}):\n"
                + "\n".join(lines)
            )
    if wrong and os.environ.get("DRAIN_DOCS_BLESS"):
        _bless(DOCS / page, commands, results)
    assert not wrong, "\n\n".join(wrong)


def _bless(path: Path, commands: list[console.Command], results: list[Any]) -> None:
    """Write what the commands printed into the page (a writer's aid, never run in CI:
    set DRAIN_DOCS_BLESS=1, then read the diff and put ``...`` where a run varies)."""
    lines = path.read_text().split("\n")
    for command, (printed, code) in sorted(
        zip(commands, results, strict=True), key=lambda pair: -pair[0].line
    ):
        if command.hidden or console.matches(command.output, printed):
            continue
        start = command.line - 1 + command.text.count("\n") + 1
        kept = [f"(exit {code})"] if command.exit_code is not None else []
        while printed and not printed[-1].strip():
            printed = printed[:-1]
        lines[start : start + len(command.expected)] = printed + kept
    path.write_text("\n".join(lines))


def _distinct_bytes(png: bytes) -> int:
    """How many different bytes the image's rows hold: 1 or 2 for a blank page."""
    import struct
    import zlib

    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    data, offset = b"", 8
    while offset < len(png):
        (length,) = struct.unpack(">I", png[offset : offset + 4])
        if png[offset + 4 : offset + 8] == b"IDAT":
            data += png[offset + 8 : offset + 8 + length]
        offset += 12 + length
    return len(set(zlib.decompress(data)))


def test_the_site_builds_strictly_and_a_page_renders_in_chromium(tmp_path: Path) -> None:
    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    page = site / "how-to" / "plan" / "index.html"
    assert "drain plan" in page.read_text()
    options = (site / "reference" / "options" / "index.html").read_text()
    assert "--max-seconds" in options and "DRAIN_MAX_SECONDS" in options
    chromium = programs.need("chromium", "chromium-browser", "google-chrome", package="chromium")
    picture = tmp_path / "page.png"
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    shot = subprocess.run(
        [*common, "--window-size=1200,1400", f"--screenshot={picture}", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert picture.exists(), shot.stderr
    assert _distinct_bytes(picture.read_bytes()) > 16, "the rendered page is blank"
    dom = subprocess.run(
        [*common, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    )
    text = re.sub(
        r"<[^>]+>", " ", re.sub(r"<(script|style)\b.*?</\1>", " ", dom.stdout, flags=re.S)
    )
    assert len(" ".join(text.split())) > 2000, "the rendered page holds almost no text"
    assert "suspends between runs" in text
