"""The words of a run's summary: how each exit reason and each note reads as a sentence.

The runner returns data (:class:`~drain.core.summary.Summary` with an exit reason
and :class:`~drain.core.summary.Note` codes with their figures); ``--json``
carries that data as it is. Every sentence a person reads about a run, on stderr,
in a GitHub step summary or in a report, is built here from the same codes, so
the wording cannot drift between them and a script never parses prose.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from drain.core.summary import Note, Summary

# How the summary line says each reason, so it reads as a sentence about the table.
REASON_WORDS = {
    "drained": "drained",
    "runners-busy": "left alone (enough runs are working on it)",
    "no-handlers": "left alone (no handler for its queues)",
    "budget": "stopped at its time budget",
    "work-left": "stopped with work left",
    "signal": "stopped by a signal",
    "capped": "left at its queue cap (other runs hold every place; jobs still ready)",
    "rate": "paced by its queue rate (jobs still ready for a later run)",
    "lost": "lost jobs (their outcomes were not recorded)",
    "error": "stopped by an error",
    "usage": "stopped (its --exec command cannot run)",
}


def _archive_needs(f: Mapping[str, Any]) -> str:
    """The grants archiving needs, as ``drain init --print-grants`` prints them."""
    needs = f"DELETE on {f['table']}"
    if f.get("archive_table"):
        needs += f" and INSERT on {f['archive_table']}"
    return (
        f"archiving needs {needs} (see drain init --print-grants ROLE), "
        "or turn it off with --archive-mode off"
    )


def _ids(f: Mapping[str, Any]) -> str:
    shown = ", ".join(map(str, f["job_ids"]))
    return shown + (", ..." if f["count"] > len(f["job_ids"]) else "")


def _skipped(f: Mapping[str, Any]) -> str:
    more = "more than " if f["more"] else ""
    return (
        f"schedule {f['schedule']!r}: {more}{f['skipped']:,} missed fire(s) skipped "
        f"(catch-up {f['catch_up']})"
    )


# One sentence per note code, from the note's figures alone.
NOTE_WORDS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "runners_busy": lambda f: f"{f['runs']} run(s) already working on {f['table']}; exiting",
    "no_handlers": lambda f: "no queue has a handler; nothing to do",
    "recurring_not_fired": lambda f: f"recurring jobs not fired: {f['error']}",
    "schedule_not_fired": lambda f: f"schedule {f['schedule']!r} not fired: {f['error']}",
    "fires_skipped": _skipped,
    "schedule_queue_unhandled": lambda f: (
        f"schedule {f['schedule']!r} enqueued {f['enqueued']} job(s) on queue "
        f"{f['queue']!r}, which this run has no handler for"
    ),
    "paced": lambda f: f"paced by --queue-rate {f['rates']}: ready jobs are left for a later run",
    "queue_capped": lambda f: (
        f"queue {f['queue']!r} is at its cap ({f['cap']} running across runs); "
        "left to the runs holding its places"
    ),
    "jobs_lost": lambda f: (
        f"{f['count']} job(s) were lost: their outcome was not recorded "
        "(the lease ran out under this run, or another run took the job)"
    ),
    "jobs_released": lambda f: f"{f['count']} job(s) claimed but not started were given back",
    "programs_survived": lambda f: (
        f"{f['count']} job(s) whose programs survived SIGKILL keep their leases until they run out"
    ),
    "leases_cut": lambda f: (
        f"{f['count']} job(s) still working at the end; their leases were cut short "
        "so the next run reaps them"
    ),
    "maintenance_skipped": lambda f: f"maintenance skipped: {f['error']}",
    "archive_table_missing": lambda f: (
        f"archive skipped: no table {f['archive_table']} (run `drain init`)"
    ),
    "archive_refused": lambda f: f"archiving skipped ({f['error']}): {_archive_needs(f)}",
    "archive_rows_refused": lambda f: (
        f"{f['count']} done job(s) left unarchived, refused by the archive table: {_ids(f)}"
    ),
    "vacuum_not_owner": lambda f: (
        f"vacuum skipped: {f['error']}; vacuum needs the table's owner (or, on "
        f"PostgreSQL 17 and later, GRANT MAINTAIN ON {f['table']}), "
        "or turn it off with --vacuum off"
    ),
    "vacuum_skipped": lambda f: f"vacuum skipped: {f['error']}",
    "run_not_recorded": lambda f: f"run not recorded: {f['error']}",
}


def note_text(note: Note) -> str:
    """The sentence a person reads for ``note``; an unknown code reads as its data."""
    words = NOTE_WORDS.get(note.code)
    if words is None:
        return f"{note.code}: {dict(note.figures)}"
    return words(note.figures)


def reason_text(reason: str) -> str:
    """How the summary says the exit reason ``reason``."""
    return REASON_WORDS.get(reason, reason)


def summary_line(summary: Summary) -> str:
    """The one-line summary printed on stderr at the end of a run.

    Every count has thousands separators, as the rate has: ``claimed 50000``
    beside ``3,187 jobs/s`` made a reader count digits.
    """
    counts = [
        ("claimed", summary.claimed),
        ("done", summary.done),
        ("retried", summary.retried),
        ("failed", summary.failed),
        ("lost", summary.lost),
        ("reaped", summary.reaped),
        ("released", summary.released),
        ("archived", summary.archived),
    ]
    extra = [
        ("fired", summary.fired),
        ("snoozed", summary.snoozed),
        ("cancelled", summary.cancelled),
        ("abandoned", summary.abandoned),
    ]
    parts = [f"{name} {value:,}" for name, value in counts]
    parts += [f"{name} {value:,}" for name, value in extra if value]
    rate = f"{summary.jobs_per_second:,.0f} jobs/s" if summary.processed else "0 jobs/s"
    reason = reason_text(summary.exit_reason)
    return f"drain: {summary.table} {reason}: {', '.join(parts)} in {summary.seconds:.2f}s ({rate})"
