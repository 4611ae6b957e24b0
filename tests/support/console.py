"""The console examples of the docs site, read from the pages and run for real.

A ```console block is a shell session: ``$ `` starts a command (a line ending in
``\\`` goes on to the next one), every other line is what the command prints
(stdout and stderr together). The blocks that run a ``drain`` command are run by
``tests/test_docs.py``: every block of one page, in order, in one shell, on one
database of the page's own, in a folder holding the page's files (each ```python
block whose first line is ``# NAME.py``, and ``tests/data/docs/``).

What a command prints is compared line by line, loosely where a run cannot print
the same twice:

- a line that is ``...`` alone stands for any number of lines, and ``...`` after a
  space or an opening bracket inside a line for any text (``claimed ..., done
  ...``, ``(... on ...)``);
- ``(exit N)`` alone on a line is the exit code the command must end with;
- timings, rates, timestamps, ages and temporary paths are compared as kinds
  (``0.47s`` and ``0.21s`` are both a number), counts and words exactly.

Every such block is run. A block that needs a world the page cannot show being
made (a Pushgateway to push to, a week of recorded runs, other sessions on the
server) says how the tests make it, in comments a reader does not see:
``<!-- before this block the tests run: COMMAND -->`` on the line above it and
``<!-- after this block the tests run: COMMAND -->`` on the line after it.
Those commands run in the same shell; what they print is not compared, but each
must exit 0.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path

BEFORE_MARK = re.compile(r"<!-- before this block the tests run: (.+?) -->")
AFTER_MARK = re.compile(r"<!-- after this block the tests run: (.+?) -->")
FILE_MARK = re.compile(r"^# ([\w./-]+\.(?:py|jsonl|json|txt))$")
DRAIN_COMMAND = re.compile(r"(?:^|[\s;&|(])drain\s")
EXIT_LINE = re.compile(r"^\(exit (\d+)\)$")
MARKER = "@@drain-docs-example@@"


@dataclasses.dataclass
class Command:
    """One ``$`` line (continuations joined) and the lines it should print."""

    text: str
    expected: list[str] = dataclasses.field(default_factory=list)
    line: int = 0
    hidden: bool = False
    """Set for a command of a before or after mark: its exit code must be 0, what
    it prints is not compared, and nothing of it is written back into the page."""

    @property
    def exit_code(self) -> int | None:
        for line in self.expected:
            found = EXIT_LINE.match(line.strip())
            if found:
                return int(found.group(1))
        return None

    @property
    def output(self) -> list[str]:
        return [line for line in self.expected if not EXIT_LINE.match(line.strip())]


@dataclasses.dataclass
class Block:
    """One ```console block of a page."""

    page: str
    line: int
    commands: list[Command]
    before: Command | None = None
    after: Command | None = None

    @property
    def runs_drain(self) -> bool:
        return any(DRAIN_COMMAND.search(command.text) for command in self.commands)

    @property
    def to_run(self) -> list[Command]:
        """The block's commands with its before and after commands around them."""
        return [c for c in (self.before, *self.commands, self.after) if c is not None]


def blocks(page: Path, root: Path) -> list[Block]:
    """Every ```console block of ``page``, with the steps the tests take around it."""
    lines = page.read_text().split("\n")
    found: list[Block] = []
    index = 0
    name = page.relative_to(root).as_posix()
    while index < len(lines):
        if lines[index].strip() != "```console":
            index += 1
            continue
        above = lines[index - 1] if index else ""
        before = BEFORE_MARK.search(above)
        start = index + 1
        index += 1
        commands: list[Command] = []
        while index < len(lines) and lines[index].strip() != "```":
            text = lines[index]
            if text.startswith("$ "):
                command = text[2:]
                first = index
                while command.endswith("\\") and index + 1 < len(lines):
                    index += 1
                    command = command[:-1] + "\n" + lines[index]
                commands.append(Command(command, line=first + 1))
            elif commands:
                commands[-1].expected.append(text)
            index += 1
        below = lines[index + 1] if index + 1 < len(lines) else ""
        after = AFTER_MARK.search(below)
        found.append(
            Block(
                name,
                start,
                commands,
                Command(before.group(1), line=start - 1, hidden=True) if before else None,
                Command(after.group(1), line=index + 2, hidden=True) if after else None,
            )
        )
        index += 1
    return found


def files(page: Path) -> dict[str, str]:
    """The files a page writes out in full: ```python blocks opening with ``# NAME.py``."""
    text = page.read_text()
    out: dict[str, str] = {}
    for body in re.findall(r"```(?:python|json|text)\n(.*?)```", text, re.S):
        first = body.split("\n", 1)[0]
        named = FILE_MARK.match(first)
        if named:
            out[named.group(1)] = body
    return out


def script(commands: list[Command]) -> str:
    """One bash script running ``commands`` in order, each one's output after a marker.

    ``$?`` is carried from one command to the next (so ``$ echo $?`` works) and
    each command's own exit code is printed after its output.
    """
    parts = ["__drain_rc=0"]
    for number, command in enumerate(commands):
        parts.append(f"printf '\\n{MARKER} {number}\\n'")
        parts.append(f"(exit $__drain_rc); {{ {command.text}\n}} 2>&1 </dev/null; __drain_rc=$?")
        parts.append(f"printf '\\n{MARKER} rc %d\\n' $__drain_rc")
    return "\n".join(parts) + "\n"


def split_output(text: str, count: int) -> list[tuple[list[str], int]]:
    """Each command's output lines and exit code, from the output of :func:`script`."""
    results: list[tuple[list[str], int]] = []
    pattern = re.compile(
        rf"\n{re.escape(MARKER)} (\d+)\n(.*?)\n{re.escape(MARKER)} rc (\d+)\n", re.S
    )
    for found in pattern.finditer(text):
        body = found.group(2)
        lines = body.split("\n") if body else []
        results.append((lines, int(found.group(3))))
    assert len(results) == count, f"{len(results)} of {count} commands ran:\n{text[-3000:]}"
    return results


# Things that differ from run to run, compared as kinds rather than as text.
VOLATILE = [
    (re.compile(r"/tmp/[^\s)'\"]+"), "<tmp>"),
    (re.compile(r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:[+-]\d\d:\d\d)?"), "<time>"),
    (re.compile(r"\b\d{4}-\d\d-\d\d\b"), "<date>"),
    (re.compile(r"\b\d\d:\d\d\b"), "<clock>"),
    (re.compile(r"\b[0-9a-f]{32}\b"), "<hex>"),
    (re.compile(r"\bpid \d+"), "pid <n>"),
    (re.compile(r"\b\d[\d,]* jobs/s"), "<rate> jobs/s"),
    (re.compile(r"\b\d+\.\d+(?:e[+-]?\d+)?(?:ms|s|m|h|d)?"), "<number>"),
    (re.compile(r"\b\d+(?:ms|s|m|h|d)(?:\d+(?:ms|s|m|h))*\b"), "<age>"),
    (re.compile(r"\s+"), " "),
]


def normal(line: str) -> str:
    """``line`` with what varies from run to run replaced by its kind."""
    for pattern, kind in VOLATILE:
        line = pattern.sub(kind, line)
    return line.strip()


def _line_pattern(expected: str) -> re.Pattern[str]:
    text = normal(expected)
    pieces = re.split(r"(?<=[ (])\.\.\.", text)
    return re.compile(".*?".join(re.escape(piece) for piece in pieces) + "$")


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` is ``expected`` once the loose parts are read as wildcards."""
    want = [line for line in expected if line.strip()]
    got = [line for line in actual if line.strip()]
    memo: dict[tuple[int, int], bool] = {}

    def match(i: int, j: int) -> bool:
        if (i, j) in memo:
            return memo[i, j]
        if i == len(want):
            result = j == len(got)
        elif want[i].strip() == "...":
            result = any(match(i + 1, k) for k in range(j, len(got) + 1))
        else:
            result = (
                j < len(got)
                and bool(_line_pattern(want[i]).match(normal(got[j])))
                and match(i + 1, j + 1)
            )
        memo[i, j] = result
        return result

    return match(0, 0)


def quote(command: str) -> str:
    """The command as one line for a message."""
    return " ".join(shlex.split(command, comments=True)) if "\n" in command else command
