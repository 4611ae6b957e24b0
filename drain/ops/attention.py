"""What in ``drain status`` needs attention, and which findings make it exit 1.

The findings are the user's to choose (:class:`FailOn`, ``--fail-on``): failed
jobs are never archived, so "any failed job" would keep a monitor alarming long
after the one failure it already reported; the default counts failures of the
last hour instead. Decided here, once, from the :class:`~drain.ops.status.Status`
read, so ``--json``, the text report and the exit code can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from drain.core.durations import format_duration, parse_duration
from drain.core.table import SCHEMA_VERSION

if TYPE_CHECKING:
    from drain.ops.status import Status


@dataclass(frozen=True)
class FailOn:
    """Which findings make ``drain status`` exit 1; a finding left out is still shown.

    Written as a comma-separated list (:func:`parse_fail_on`), ``none`` for an
    empty one. ``failed_since`` counts jobs failed for good within that many
    seconds; ``any_failed`` counts every failed job still in the table;
    ``ready_older_than`` a ready job waiting longer; ``expired_leases`` a running
    job whose lease ran out; ``old_transaction`` a transaction holding vacuum back
    longer than ``--max-transaction-age``; ``schema`` a schema version or drift
    runs would refuse.
    """

    failed_since: float | None = None
    any_failed: bool = False
    ready_older_than: float | None = None
    expired_leases: bool = False
    old_transaction: bool = False
    schema: bool = False

    def __str__(self) -> str:
        items = []
        if self.failed_since is not None:
            items.append(f"failed-since={format_duration(self.failed_since)}")
        if self.any_failed:
            items.append("failed")
        if self.ready_older_than is not None:
            items.append(f"ready-older-than={format_duration(self.ready_older_than)}")
        flags = [
            (self.expired_leases, "expired-leases"),
            (self.old_transaction, "old-transaction"),
            (self.schema, "schema"),
        ]
        items += [name for on, name in flags if on]
        return ",".join(items) or "none"


_FAIL_ON_DURATIONS = {"failed-since": "failed_since", "ready-older-than": "ready_older_than"}
_FAIL_ON_FLAGS = {
    "failed": "any_failed",
    "expired-leases": "expired_leases",
    "old-transaction": "old_transaction",
    "schema": "schema",
}


def parse_fail_on(text: str) -> FailOn:
    """Read a ``--fail-on`` list such as ``failed-since=1h,expired-leases``.

    Raises ``ValueError`` with a message fit to show a user: a misspelt condition
    must never be dropped silently, or the health check would pass on it.
    """
    items = [item.strip() for item in text.split(",") if item.strip()]
    if items == ["none"]:
        return FailOn()
    known = ", ".join([f"{name}=DURATION" for name in _FAIL_ON_DURATIONS] + list(_FAIL_ON_FLAGS))
    if not items:
        raise ValueError(f"--fail-on is empty; give none or some of: {known}")
    values: dict[str, Any] = {}
    for item in items:
        name, equals, value = (part.strip() for part in item.partition("="))
        if name in _FAIL_ON_DURATIONS:
            if not equals or not value:
                raise ValueError(f"--fail-on {name} needs a duration, e.g. {name}=1h")
            try:
                values[_FAIL_ON_DURATIONS[name]] = parse_duration(value)
            except ValueError as exc:
                raise ValueError(f"--fail-on {name}: {exc}") from None
        elif name in _FAIL_ON_FLAGS:
            if equals:
                raise ValueError(f"--fail-on {name} takes no value (got {item!r})")
            values[_FAIL_ON_FLAGS[name]] = True
        elif name == "none":
            raise ValueError("--fail-on none cannot be combined with other conditions")
        else:
            raise ValueError(f"--fail-on: unknown condition {name!r}; known: none, {known}")
    return FailOn(**values)


def attention(status: Status) -> list[str]:
    """What an operator should look at, among what ``status.fail_on`` counts; empty is exit 0."""
    found = []
    totals = status.totals
    rule = status.fail_on
    if rule.expired_leases and totals["expired"]:
        found.append(
            f"{totals['expired']:,} running job(s) with an expired lease "
            "(a worker died or is late; the next run reaps them)"
        )
    if rule.any_failed and totals["failed"]:
        found.append(
            f"{totals['failed']:,} failed job(s) (see the errors; `drain retry` puts them back)"
        )
    elif rule.failed_since is not None and status.recent_failures:
        found.append(
            f"{status.recent_failures:,} job(s) failed for good in the last "
            f"{format_duration(rule.failed_since)} (see the errors; `drain retry` puts them back)"
        )
    oldest_ready = status.oldest_ready_seconds
    if (
        rule.ready_older_than is not None
        and oldest_ready is not None
        and oldest_ready > rule.ready_older_than
    ):
        found.append(
            f"a ready job has waited {format_duration(round(oldest_ready))} "
            f"(over {format_duration(rule.ready_older_than)}; is a run scheduled for its queue?)"
        )
    oldest = status.oldest_transaction
    if (
        rule.old_transaction
        and oldest is not None
        and oldest.transaction_seconds is not None
        and oldest.transaction_seconds > status.max_transaction_age
    ):
        found.append(
            f"a transaction open for {format_duration(oldest.transaction_seconds)} holds "
            f"vacuum back (over {format_duration(status.max_transaction_age)})"
        )
    version = status.schema_version
    if rule.schema and version is not None and version != SCHEMA_VERSION:
        found.append(
            f"schema version {version}, this drain expects {SCHEMA_VERSION} "
            "(runs will refuse the table)"
        )
    if rule.schema and status.drift:
        found.append(f"schema drift: {'; '.join(status.drift)} (runs will refuse the table)")
    return found
