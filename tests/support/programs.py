"""The system programs some tests drive for real, and what happens when one is missing.

A handful of tests run a program that a user of that feature has but a Python
environment does not: PgBouncer for the pooler tests, a Prometheus Pushgateway
for pushed metrics, a headless Chromium for the rendered report, systemd-analyze
for the units in ``deploy/systemd``. On a fresh machine (the README's test
command, nothing installed by hand) those tests skip, each naming the program
and the Debian package that has it. CI installs them all and sets
``DRAIN_TEST_REQUIRE_PROGRAMS=1``, under which a missing program fails the test
instead, so a skip can never hide a broken install there.
"""

from __future__ import annotations

import os
import shutil

import pytest

REQUIRE = "DRAIN_TEST_REQUIRE_PROGRAMS"


def find(*names: str) -> str | None:
    """The first of ``names`` found on PATH, or None (Debian puts pgbouncer in
    /usr/sbin, which a root shell has on its PATH; .ci/run makes sure of it)."""
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


def need(*names: str, package: str) -> str:
    """The path of the program, else skip (or fail under ``DRAIN_TEST_REQUIRE_PROGRAMS``).

    ``names`` are the program's names in order of preference; ``package`` is the
    Debian package that installs it, named in the message.
    """
    found = find(*names)
    if found is not None:
        return found
    message = f"needs {names[0]} (Debian package {package}: apt-get install {package})"
    if os.environ.get(REQUIRE, "") not in ("", "0"):
        pytest.fail(f"{message}; {REQUIRE} is set, so a missing program is a failure")
    pytest.skip(message)
