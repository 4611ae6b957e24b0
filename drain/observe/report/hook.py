"""``drain run --report FILE``: the page written again at the end of every run.

The run's database is awake anyway at that moment, so the page costs no wake-up
of its own; a failure to write it is one warning line and never changes how
the run exits.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drain.core.redact import Redactor, describe
from drain.core.settings import Setting
from drain.core.settings.commands import REPORT_DAYS, REPORT_IDLE_TIMEOUT
from drain.observe.observers import Observer, RunEnd
from drain.observe.report.page import render
from drain.observe.report.read import (
    APPLICATION_NAME,
    Report,
    check_days,
    read,
)
from drain.planning import drawing

if TYPE_CHECKING:
    from drain.core.config import RunConfig
    from drain.core.summary import Summary

log = logging.getLogger("drain")


def report_path(value: str, option: str = "--html") -> Path:
    """The HTML file to write, refused up front if it can never be written there."""
    return drawing.output_path(value, option, ".html")


def write(path: Path, text: str) -> None:
    """Write the page atomically: a reader sees the old page or the new, never half."""
    drawing.write_file(path, text)


def run_observer(value: object, config: RunConfig, environ: Mapping[str, str]) -> Observer:
    """``drain run --report FILE``: write the report once the run is over.

    The window and idle timeout are ``drain report``'s own variables
    (``DRAIN_REPORT_DAYS``, ``DRAIN_IDLE_TIMEOUT``) when set, else a week and
    the default timeout; a bad value is refused before the run starts.
    """
    path = report_path(str(value), "--report")
    days = _from_environment(REPORT_DAYS, environ)
    check_days(days, REPORT_DAYS.envvar)
    return ReportObserver(path, config, days, _from_environment(REPORT_IDLE_TIMEOUT, environ))


def _from_environment(setting: Setting, environ: Mapping[str, str]) -> Any:
    """``drain report``'s own setting, from its variable when set (errors name it)."""
    text = environ.get(setting.envvar, "").strip()
    return setting.parse(text, setting.envvar) if text else setting.default


class ReportObserver(Observer):
    """Writes the HTML report at the end of the run, on a short connection of its own.

    The run's own session is still open but belongs to the run; this one is
    opened, used for the one snapshot and closed. A failure costs one warning
    line and never changes how the run exits.
    """

    def __init__(self, path: Path, config: RunConfig, days: float, idle_timeout: float) -> None:
        self.path = path
        self.config = config
        self.days = days
        self.idle_timeout = idle_timeout
        self.redactor = Redactor(config.connect.dsn)

    def run_finished(self, summary: Summary, end: RunEnd) -> None:
        try:
            report = self._read()
            write(self.path, render(report, self.redactor))
        except Exception as exc:  # a report is a courtesy: nothing it does may fail the run
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else describe(exc)
            log.warning(
                "could not write the report to %s: %s",
                self.redactor(str(self.path)),
                self.redactor(str(reason)),
            )

    def _read(self) -> Report:
        from drain.store.db import Session

        connect = self.config.connect._replace(
            application_name=APPLICATION_NAME, retry_for=min(self.config.connect.retry_for, 5.0)
        )
        session = Session(connect)
        try:
            return session.call(
                lambda conn: read(
                    conn, self.config.table, days=self.days, idle_timeout=self.idle_timeout
                )
            )
        finally:
            session.close()
