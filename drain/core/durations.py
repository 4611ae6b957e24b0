"""Durations as people write them on a command line: ``90``, ``90s``, ``5m``, ``1h``, ``7d``.

Every duration option of every command goes through :func:`parse_duration`, so a
schedule, a lease and a retention are all written the same way.
"""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
# Far past any lease, budget, window or retention anyone means, yet well inside
# what datetime, time.monotonic arithmetic and a PostgreSQL interval hold: a
# typo such as 99999999999d is refused in one line, not an OverflowError later.
MAX_DURATION = 100 * 365 * 86400.0
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)?")


def parse_duration(text: str) -> float:
    """Return the number of seconds ``text`` stands for.

    Accepts plain seconds (``"90"``, ``"2.5"``) or one or more number-unit pairs
    (``"1h30m"``). Raises ``ValueError`` with a message fit to show a user.
    """
    cleaned = text.strip().lower().replace(" ", "")
    if not cleaned:
        raise ValueError("empty duration; write seconds or a unit, e.g. 90, 90s, 5m, 1h, 7d")
    position = 0
    total = 0.0
    parts = 0
    while position < len(cleaned):
        match = _PART.match(cleaned, position)
        if match is None or match.end() == position:
            break
        number, unit = match.groups()
        if unit is None and match.end() != len(cleaned):
            break
        total += float(number) * _UNITS[unit or "s"]
        position = match.end()
        parts += 1
    if position != len(cleaned) or parts == 0:
        raise ValueError(
            f"not a duration: {text!r}; write seconds or a unit, e.g. 90, 90s, 5m, 1h, 7d"
        )
    if total > MAX_DURATION:
        raise ValueError(f"too long: {text!r}; at most 36500d (100 years)")
    return total


def format_duration(seconds: float) -> str:
    """Render seconds the short way a person reads them: ``45s``, ``12m``, ``1h30m``, ``2d``."""
    if seconds < 0:
        return "-" + format_duration(-seconds)
    if seconds < 60:
        return f"{seconds:g}s" if seconds != int(seconds) else f"{int(seconds)}s"
    whole = round(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    pieces = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    text = "".join(f"{value}{unit}" for value, unit in pieces if value)
    return text or "0s"
