"""The run's summary as a Markdown table on a GitHub Actions job page.

GitHub Actions sets ``GITHUB_STEP_SUMMARY`` to a file whose Markdown it shows
on the job's page; a step appends to it. A run there appends one short section:
the table, how it ended and its exit code, the counters, the time and the rate,
and its notes. It is built from the :class:`~drain.core.summary.Summary` alone, so
no payload can reach it, and every text in it passes through the run's
redactor, so no password can. A file that cannot be written costs one warning
line; the run's outcome does not change.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from drain.core.redact import Redactor
from drain.observe.observers import Observer, RunEnd
from drain.observe.words import note_text, reason_text

if TYPE_CHECKING:
    from drain.core.config import RunConfig
    from drain.core.summary import Summary

log = logging.getLogger("drain")

# The counters the table shows, in the summary line's order.
COLUMNS = ("claimed", "done", "retried", "failed", "lost", "released", "archived")
# Shown only when not zero, as the summary line does.
EXTRA = ("reaped", "fired", "snoozed", "cancelled", "abandoned")


def observer(value: object, config: RunConfig, environ: Mapping[str, str]) -> Observer:
    """The CI summary observer, appending to the file ``GITHUB_STEP_SUMMARY`` names."""
    return StepSummary(str(value), Redactor(config.connect.dsn))


class StepSummary(Observer):
    """Appends the run's Markdown table to the step summary file at the end of the run."""

    def __init__(self, path: str, redactor: Redactor) -> None:
        self.path = path
        self.redactor = redactor

    def run_finished(self, summary: Summary, end: RunEnd) -> None:
        text = markdown(summary, self.redactor)
        try:
            with open(self.path, "a", encoding="utf-8") as out:
                out.write(text)
        except OSError as exc:
            log.warning(
                "could not append the run's summary to GITHUB_STEP_SUMMARY (%s): %s",
                self.redactor(self.path),
                self.redactor(exc.strerror or str(exc)),
            )


def markdown(summary: Summary, redactor: Redactor | None = None) -> str:
    """The section one run appends: a heading, a one-row table, then notes and error.

    It starts with a blank line so it never joins a paragraph a previous step
    left without a newline, and ends with one so the next step's text starts apart.
    """
    clean = redactor or Redactor()
    reason = reason_text(summary.exit_reason)
    extra = [name for name in EXTRA if getattr(summary, name)]
    names = [*COLUMNS, *extra, "seconds", "jobs/s"]
    values = [f"{getattr(summary, name):,}" for name in (*COLUMNS, *extra)]
    values += [f"{summary.seconds:,.2f}", f"{summary.jobs_per_second:,.0f}"]
    lines = [
        "",
        f"### drain run: `{_cell(clean(summary.table))}` {reason}",
        "",
        f"Exit **{summary.exit_code}** ({summary.exit_reason}).",
        "",
        "| " + " | ".join(names) + " |",
        "|" + "|".join("---:" for _ in names) + "|",
        "| " + " | ".join(values) + " |",
    ]
    if summary.error:
        lines += ["", f"**Error:** {_cell(clean(summary.error))}"]
    if summary.notes:
        lines += ["", "Notes:", ""]
        lines += [f"- {_cell(clean(note_text(note)))}" for note in summary.notes]
    return "\n".join(lines) + "\n\n"


def _cell(text: str) -> str:
    """One line of Markdown that cannot break the table or the list around it."""
    return " ".join(text.split()).replace("|", "\\|").replace("`", "'")
