"""``--exec`` output forwarded a block at a time: the same lines, cuts and masks as
line by line, through the real CLI and against a line-by-line reference."""

from __future__ import annotations

from typing import Any

import psycopg
from hypothesis import given, settings
from hypothesis import strategies as st

from drain.core.redact import Redactor, secrets_in
from drain.runner.program_output import CUT, LINE_LIMIT, Lines, mask_block
from tests.support import add_jobs, drain_cli, summary_of

DSN = "postgresql://app:s3cr3t-pw@db.example/app"
PIECES = st.sampled_from(
    [
        "plain text",
        "password=hunter2",
        "PassWord 'quoted",
        "url postgresql://u:pw@h/db",
        "s3cr3t-pw",
        "pa\u017f\u017fword=x",  # long s: matches s under re.IGNORECASE
        "w",
        ":",
        "é",
        "'",
        "",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(PIECES, max_size=4).map(" ".join), min_size=1, max_size=8))
def test_a_block_is_masked_as_its_lines_are_one_by_one(lines: list[str]) -> None:
    redact = Redactor(DSN)
    block = "\n".join(lines)
    assert mask_block(block, redact, secrets_in(DSN)) == "\n".join(redact(x) for x in lines)


def reference(data: bytes) -> list[str]:
    """Line by line: each line cut at LINE_LIMIT bytes, marked, decoded alone."""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return [
        line[:LINE_LIMIT].decode(errors="replace") + (CUT if len(line) > LINE_LIMIT else "")
        for line in lines
    ]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([0, 1, 44, 4096, 8191, 8192, 8193, 20000]), st.booleans()),
        min_size=1,
        max_size=12,
    ),
    st.lists(st.sampled_from([1, 3, 4096, 65536, 1 << 20]), min_size=1, max_size=6),
)
def test_lines_are_cut_as_one_by_one_however_the_reads_fall(
    shape: list[tuple[int, bool]], reads: list[int]
) -> None:
    data = b"".join(b"y" * n + (b"\n" if end else b"") for n, end in shape)
    emitted: list[str] = []
    lines = Lines(emitted.append)
    at, turn = 0, 0
    while at < len(data):
        step = reads[turn % len(reads)]
        lines.add(data[at : at + step])
        at, turn = at + step, turn + 1
    lines.close()
    assert "".join(block + "\n" for block in emitted).splitlines() == reference(data)


def test_a_program_writing_a_lot_is_forwarded_whole_cut_and_masked(
    conn: psycopg.Connection[Any], dsn: str
) -> None:
    """40 MB of 45-byte lines, one line of 20,000 bytes and one quoting a password."""
    add_jobs(conn, 1)
    line, count = "forty-four bytes of output, one line after an"[:44], 888_889
    program = (
        f"yes '{line}' | head -c {count * (len(line) + 1)}; "
        "printf 'PASSWORD=hunter2\\n'; head -c 20000 /dev/zero | tr '\\0' z; echo"
    )
    result = drain_cli("run", "--exec", program, "--json", dsn=dsn)
    assert result.returncode == 0, result.stderr[-2000:]
    assert summary_of(result)["done"] == 1
    lines = result.stderr.splitlines()
    assert lines.count(line) == count
    assert "PASSWORD=********" in lines
    assert "hunter2" not in result.stderr
    assert "z" * LINE_LIMIT + CUT in lines
