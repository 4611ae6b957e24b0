"""``drain report --html``: a week of runs and awake time in one self-contained HTML file.

A dashboard that polls the database keeps a scale-to-zero compute awake all
day, which is the very cost drain exists to avoid. A file does not: it is
written once, while the database is awake anyway (by ``drain report``, or by
``drain run --report`` at the end of a run), and looked at as often as anyone
likes. It has no script, no font file and no link, so it opens the same from a
mail attachment, a CI artifact or a bucket.

Three parts, one job each: :mod:`.read` takes the one snapshot, :mod:`.page`
turns it into the page, :mod:`.hook` writes it at the end of a run.
"""

from drain.observe.report.hook import ReportObserver, report_path, run_observer, write
from drain.observe.report.page import render, summary_line
from drain.observe.report.read import (
    APPLICATION_NAME,
    Report,
    assemble,
    check_days,
    read,
)

__all__ = [
    "APPLICATION_NAME",
    "Report",
    "ReportObserver",
    "assemble",
    "check_days",
    "read",
    "render",
    "report_path",
    "run_observer",
    "summary_line",
    "write",
]
