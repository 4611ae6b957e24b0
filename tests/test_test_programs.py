"""The suite on a fresh machine: a test that needs a system program skips and names it.

The README's test command must pass where none of PgBouncer, the Pushgateway,
Chromium or systemd-analyze is installed, and CI must still run every such test.
Both are checked here by running real tests of the suite in a pytest of their
own, under a PATH that holds only this Python's directory (so none of the
programs can be found), with and without ``DRAIN_TEST_REQUIRE_PROGRAMS``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO
from tests.support.programs import REQUIRE

# One test per program, none of which needs the database.
NEEDS_A_PROGRAM = [
    "tests/test_deploy.py::test_systemd_analyze_verifies_the_units",
]


def _pytest_without_programs(*, require: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != REQUIRE}
    env["PATH"] = str(Path(sys.executable).parent)
    if require:
        env[REQUIRE] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *NEEDS_A_PROGRAM],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )


def test_a_missing_program_skips_and_names_its_debian_package() -> None:
    result = _pytest_without_programs(require=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 skipped" in result.stdout, result.stdout
    assert "needs systemd-analyze (Debian package systemd" in result.stdout, result.stdout


def test_ci_turns_a_missing_program_into_a_failure() -> None:
    result = _pytest_without_programs(require=True)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed" in result.stdout, result.stdout
    assert f"{REQUIRE} is set" in result.stdout, result.stdout


@pytest.mark.parametrize(
    ("test_file", "program"),
    [
        ("tests/test_pooler.py", "pgbouncer"),
        ("tests/test_metrics.py", "prometheus-pushgateway"),
        ("tests/test_report.py", "chromium"),
        ("tests/test_deploy.py", "systemd-analyze"),
    ],
)
def test_every_test_that_needs_a_program_asks_for_it_by_name(test_file: str, program: str) -> None:
    """The rule holds only if these files find their program through programs.need."""
    text = (REPO / test_file).read_text()
    assert f'programs.need("{program}"' in text
