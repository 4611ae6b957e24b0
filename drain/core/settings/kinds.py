"""The parsers of settings, one per kind of value, and :class:`Setting`, one row of the table.

A parser turns the text a person gave (on the command line, in a variable, in a
deploy file) into the value a command uses, and shows a default the way the help
prints it; its errors name where the text came from (``--lease`` or
``DRAIN_LEASE``), so a bad value is one line a user can act on.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable
from typing import Any, ClassVar, NamedTuple

from drain.core.durations import format_duration, parse_duration
from drain.core.errors import UsageError
from drain.core.rates import Rate, parse_queue_rate

# -- the parsers, one per kind ------------------------------------------------------------


class Duration:
    """``90``, ``90s``, ``5m``, ``1h``, ``7d``: seconds as a float (:func:`parse_duration`).

    ``plain`` shows the default as bare seconds, for options named ``--*-seconds``.
    """

    metavar = "TEXT"

    def __init__(self, *, plain: bool = False) -> None:
        self.plain = plain

    def parse(self, text: str, name: str) -> float:
        try:
            return parse_duration(text)
        except ValueError as exc:
            raise UsageError(f"{name}: {exc}") from None

    def shown(self, value: Any) -> str | None:
        return f"{value:g}" if self.plain else format_duration(value)


class Integer:
    """A whole number; its limits are the run's to check (``RunConfig.validate``)."""

    metavar = "INTEGER"

    def parse(self, text: str, name: str) -> int:
        try:
            return int(text.strip())
        except ValueError:
            raise UsageError(f"{name}: not a whole number: {text!r}") from None

    def shown(self, value: Any) -> str | None:
        return str(value)


class Number:
    """A number, fractions allowed (``--days 0.5``, ``--compute-units 0.25``)."""

    metavar = "FLOAT"

    def parse(self, text: str, name: str) -> float:
        try:
            return float(text.strip())
        except ValueError:
            raise UsageError(f"{name}: not a number: {text!r}") from None

    def shown(self, value: Any) -> str | None:
        return f"{value:g}"


class Size:
    """Bytes, bare or with a unit (``65536``, ``64KiB``, ``16MiB``, ``1MB``), as
    every other size-like option takes units; the floor is ``RunConfig.validate``'s."""

    metavar = "SIZE"
    _UNITS: ClassVar[dict[str, int]] = {
        "": 1,
        "b": 1,
        "k": 1024,
        "kb": 1000,
        "kib": 1024,
        "m": 1024**2,
        "mb": 1000**2,
        "mib": 1024**2,
        "g": 1024**3,
        "gb": 1000**3,
        "gib": 1024**3,
    }
    _FORM = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)")

    def parse(self, text: str, name: str) -> int:
        match = self._FORM.fullmatch(text.strip().lower())
        if match is None or match.group(2) not in self._UNITS:
            raise UsageError(f"{name}: not a size: {text!r}; write bytes or a unit, e.g. 16MiB")
        return int(float(match.group(1)) * self._UNITS[match.group(2)])

    def shown(self, value: Any) -> str | None:
        for unit in ("GiB", "MiB", "KiB"):
            scale = self._UNITS[unit.lower()]
            if value % scale == 0:
                return f"{value // scale}{unit}"
        return str(value)


class Choice:
    """One of a few words, in any case."""

    metavar = "TEXT"

    def __init__(self, choices: tuple[str, ...]) -> None:
        self.choices = choices

    def parse(self, text: str, name: str) -> str:
        cleaned = text.strip().lower()
        if cleaned not in self.choices:
            *first, last = self.choices
            raise UsageError(f"{name} must be {', '.join(first)} or {last}, not {text!r}")
        return cleaned

    def shown(self, value: Any) -> str | None:
        return str(value)


class Names:
    """A list of names, comma separated, blanks around each stripped (queues, variables).

    On the command line the option also repeats; every value is split the same way.
    """

    def parse(self, text: str, name: str) -> tuple[str, ...]:
        return self.join([text], name)

    def join(self, texts: Iterable[str], name: str = "") -> tuple[str, ...]:
        return tuple(part.strip() for text in texts for part in text.split(",") if part.strip())

    def shown(self, value: Any) -> str | None:
        return None


class VariableNames(Names):
    """Names split as any list is; given, but naming none, is an empty name.

    ``--exec-keep-env "$UNSET"`` names no variable: kept as an empty name, so the
    check of the names (:func:`drain.runner.program_env.check_variable_names`) refuses it
    rather than the program running without the variable it was meant to keep;
    ``drain init --with ""`` is refused the same way, not taken as no extra.
    """

    def join(self, texts: Iterable[str], name: str = "") -> tuple[str, ...]:
        given = list(texts)
        return super().join(given, name) or (("",) if given else ())


class Paths(Names):
    """Files or directories, repeatable; a name is taken whole (a path may hold a comma)."""

    metavar = "PATH"

    def join(self, texts: Iterable[str], name: str = "") -> tuple[str, ...]:
        return tuple(text for text in texts if text)


class Ids(Names):
    """Job ids (``--id 4182 --id 4190``, or ``4182,4190`` in a variable): whole numbers."""

    metavar = "INTEGER"

    def parse(self, text: str, name: str) -> tuple[int, ...]:  # type: ignore[override]
        return self._numbers([text], name)

    def join(self, texts: Iterable[str], name: str = "--id") -> tuple[int, ...]:  # type: ignore[override]
        return self._numbers(texts, name)

    def _numbers(self, texts: Iterable[str], name: str) -> tuple[int, ...]:
        numbers: list[int] = []
        for part in super().join(texts):
            try:
                numbers.append(int(part))
            except ValueError:
                raise UsageError(f"{name}: not a whole number: {part!r}") from None
        return tuple(numbers)


class Caps(Names):
    """``QUEUE=N`` pairs (``emails=7``): a queue and the most of its jobs running at once.

    Repeats and splits on commas as any list does; a queue named twice keeps the
    last cap given.
    """

    metavar = "QUEUE=N"

    def parse(self, text: str, name: str) -> tuple[tuple[str, int], ...]:  # type: ignore[override]
        return self._pairs([text], name)

    def join(  # type: ignore[override]
        self, texts: Iterable[str], name: str = "--queue-cap"
    ) -> tuple[tuple[str, int], ...]:
        return self._pairs(texts, name)

    def _pairs(self, texts: Iterable[str], name: str) -> tuple[tuple[str, int], ...]:
        caps: dict[str, int] = {}
        for part in super().join(texts):
            queue, equals, number = part.rpartition("=")
            queue = queue.strip()
            try:
                cap = int(number.strip()) if equals and queue else 0
            except ValueError:
                cap = 0
            if cap < 1:
                raise UsageError(
                    f"{name}: {part!r} is not QUEUE=N with N at least 1, e.g. emails=7"
                )
            caps[queue] = cap
        return tuple(caps.items())


class Rates(Names):
    """``QUEUE=N/s|m|h`` pairs (``emails=40/s``): a queue and its starts per period
    across every run (:mod:`drain.core.rates`). Repeats and splits on commas as any
    list does; a queue named twice keeps the last rate given."""

    metavar = "QUEUE=N/s|m|h"

    def parse(self, text: str, name: str) -> tuple[tuple[str, Rate], ...]:  # type: ignore[override]
        return self._pairs([text], name)

    def join(  # type: ignore[override]
        self, texts: Iterable[str], name: str = "--queue-rate"
    ) -> tuple[tuple[str, Rate], ...]:
        return self._pairs(texts, name)

    def _pairs(self, texts: Iterable[str], name: str) -> tuple[tuple[str, Rate], ...]:
        found = dict(parse_queue_rate(part, name) for part in super().join(texts))
        return tuple(found.items())


class Text:
    """Free text, taken as written (a module, a command, a DSN, a name)."""

    metavar = "TEXT"

    def parse(self, text: str, name: str) -> str:
        return text

    def shown(self, value: Any) -> str | None:
        return None if value is None else str(value)


# The spellings click accepts for a flag read from its variable, so the serverless
# entry point reads DRAIN_POOLER=y exactly as ``drain run`` does.
_TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})
_FALSE = frozenset({"0", "false", "f", "no", "n", "off", ""})


class Flag:
    """On or off; ``negated`` for an option that turns a setting off (``--no-record``)."""

    def __init__(self, *, negated: bool = False) -> None:
        self.negated = negated

    def parse(self, text: str, name: str) -> bool:
        value = text.strip().lower()
        if value not in _TRUE | _FALSE:
            raise UsageError(f"{name}: not yes or no: {text!r}; write 1 or 0 (or true/false)")
        return (value in _TRUE) != self.negated

    def given(self, flag: bool) -> bool:
        """The setting's value when the flag was (or was not) given."""
        return flag != self.negated

    def shown(self, value: Any) -> str | None:
        return None


Kind = Duration | Integer | Number | Size | Choice | Names | Caps | Rates | Text | Flag
DURATION = Duration()
SECONDS = Duration(plain=True)
INTEGER = Integer()
NUMBER = Number()
IDS = Ids()
PATHS = Paths()
NAMES = Names()
VARIABLE_NAMES = VariableNames()
CAPS = Caps()
RATES = Rates()
TEXT = Text()
FLAG = Flag()


# -- the table ------------------------------------------------------------------------


class Setting(NamedTuple):
    """One option of a command: how people give it, what it is when they do not, its parser.

    ``key`` is the keyword the command's function receives (for ``drain run``, the
    keyword ``drain.run`` takes: a :class:`~drain.core.config.RunConfig` or
    connection field, a handler source, ``dsn``, ``schema``/``table``).
    ``command_only`` settings shape what the command prints, not the run, so the
    serverless entry point does not read them. ``panel`` groups the option in its
    command's help; ``metavar`` names its value there when the kind's word says
    too little (``ROLE``); ``required`` options have no default at all.
    """

    key: str
    option: str
    envvars: tuple[str, ...]
    kind: Kind
    default: Any
    help: str
    short: str | None = None
    command_only: bool = False
    panel: str | None = None
    metavar: str | None = None
    required: bool = False

    @property
    def envvar(self) -> str:
        return self.envvars[0]

    @property
    def param(self) -> str:
        """The option as a Python name (``--no-record``: ``no_record``), as the CLI calls it.

        A keyword gets an underscore (``--from``: ``from_``).
        """
        name = self.option.lstrip("-").replace("-", "_")
        return f"{name}_" if keyword.iskeyword(name) else name

    @property
    def shown_default(self) -> str | None:
        """The default as ``drain run --help`` shows it; ``None`` shows none."""
        if isinstance(self.kind, Flag) or self.default is None:
            return None
        return self.kind.shown(self.default)

    def parse(self, text: str, name: str | None = None) -> Any:
        """The value of ``text`` given for this setting; usage errors name ``name``."""
        return self.kind.parse(text, name or self.option)

    def from_option(self, given: Any, name: str | None = None) -> Any:
        """The value from what the option parser produced (text, repeated texts or a flag).

        ``name`` is where the text came from, for the error: the option, or the
        variable when the environment gave it (``DRAIN_MAX_SECONDS: not a duration``).
        """
        if isinstance(self.kind, Flag):
            return self.kind.given(bool(given))
        if isinstance(self.kind, Names):
            return self.kind.join(given or (), name or self.option)
        if given is None:
            return self.default
        return self.parse(given, name)
