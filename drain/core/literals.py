"""Another session's statement with every literal replaced, as ``pg_stat_statements`` shows it.

``drain status --verbose`` shows the last statement of the session that holds
vacuum back, and that statement may carry a secret in a literal: ``ALTER ROLE
... PASSWORD 'x'``, ``set_config('app.api_key', 'x', false)``. A masker of known
forms always misses one (``PASSWORD'x'``, ``PASSWORD U&'x'``,
``PASSWORD/**/'x'`` all passed the last one), so the statement is shown only
with every literal replaced by ``$n``, whatever it is: strings in every quoting
form (``'...'``, ``E'...'``, ``U&'...'``, ``N'...'``, ``B'...'``, ``X'...'``,
``$tag$...$tag$``) and numbers. Comments are dropped too: they are free text.

This is a small lexer of PostgreSQL's own rules (``src/backend/parser/scan.l``)
with ``standard_conforming_strings`` on: quoted identifiers ``"..."`` are kept,
``--`` and nested ``/* */`` comments are understood. Where the lexer cannot be
sure what comes next, the rest is cut and ``...`` stands for it: an unterminated
quote or comment (``pg_stat_activity`` keeps only a statement's first kilobyte,
so the cut often falls inside a literal), a backslash in a plain string (which
with ``standard_conforming_strings`` off would have escaped the closing quote),
a ``$`` that starts neither a parameter nor a dollar quote.
"""

from __future__ import annotations

import re

CUT = "..."

# A parameter of the statement's own ($1): kept, and the literals' numbers start above.
_PARAMETER = re.compile(r"\$(\d+)")
# An identifier or key word: PostgreSQL takes any byte above 0x7F as a letter.
_IDENTIFIER = re.compile(r"[A-Za-z_\x80-\U0010ffff][A-Za-z0-9_$\x80-\U0010ffff]*")
# A number: decimal (with PostgreSQL 16's underscores), an exponent, hex, octal or
# binary, and any junk glued to it (PostgreSQL refuses 123abc; it is cut with it).
_NUMBER = re.compile(
    r"(?:0[xXoObB][0-9A-Fa-f_]*|(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?)"
    r"[A-Za-z0-9_$\x80-\U0010ffff]*"
)
# The tag of a dollar quote, between its two dollars (empty for $$).
_DOLLAR_TAG = re.compile(r"\$([A-Za-z_\x80-\U0010ffff][A-Za-z0-9_\x80-\U0010ffff]*)?\$")
# String prefixes: E'...' (backslash escapes), N'...', B'...', X'...'; U&'...' apart.
_PREFIXES = frozenset({"e", "n", "b", "x"})


class _Cut(Exception):
    """The lexer cannot be sure of what follows: the rest of the text is left out."""


def replace_literals(text: str) -> str:
    """``text`` with every literal replaced by ``$n`` and comments dropped (see above)."""
    lexer = _Lexer(text)
    try:
        lexer.run()
    except _Cut:
        lexer.out.append(CUT)
    number = max(lexer.parameters, default=0)
    shown = []
    for piece in lexer.out:
        if piece is None:
            number += 1
            piece = f"${number}"
        shown.append(piece)
    return "".join(shown)


class _Lexer:
    """One pass over the text: what it keeps goes to ``out``, None for each literal.

    The literals are numbered once the pass is over, after the highest parameter
    (``$1``) the statement has of its own, as pg_stat_statements numbers them.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0
        self.out: list[str | None] = []
        self.parameters: list[int] = []

    def run(self) -> None:
        text = self.text
        while self.at < len(text):
            char = text[self.at]
            if text.startswith("--", self.at):
                self._line_comment()
            elif text.startswith("/*", self.at):
                self._block_comment()
            elif char == "'":
                self._string(escapes=False)
            elif char == '"':
                self._quoted_identifier()
            elif char == "$":
                self._dollar()
            elif char.isdigit() or (char == "." and text[self.at + 1 : self.at + 2].isdigit()):
                found = _NUMBER.match(text, self.at)
                assert found is not None
                self.at = found.end()
                self._literal()
            elif char == "\\":
                raise _Cut
            elif (found := _IDENTIFIER.match(text, self.at)) is not None:
                self._word(found.group())
            else:
                self.out.append(char)
                self.at += 1

    def _literal(self) -> None:
        self.out.append(None)

    def _word(self, word: str) -> None:
        """An identifier or key word, unless it is a string's prefix (E'...', U&'...')."""
        after = self.at + len(word)
        lowered = word.lower()
        if lowered in _PREFIXES and self.text.startswith("'", after):
            self.at = after
            self._string(escapes=lowered == "e")
        elif lowered == "u" and self.text.startswith("&'", after):
            self.at = after + 1
            self._string(escapes=False)
        else:
            self.out.append(word)
            self.at = after

    def _string(self, *, escapes: bool) -> None:
        """A quoted string from its opening quote: replaced whole, or the rest cut."""
        text = self.text
        at = self.at + 1
        while at < len(text):
            char = text[at]
            if char == "\\":
                if not escapes:  # with standard_conforming_strings off it escapes
                    raise self._cut_literal()
                at += 2
            elif char == "'":
                if text.startswith("''", at):
                    at += 2
                else:
                    self.at = at + 1
                    self._literal()
                    return
            else:
                at += 1
        raise self._cut_literal()

    def _cut_literal(self) -> _Cut:
        self._literal()
        return _Cut()

    def _quoted_identifier(self) -> None:
        end = self.text.find('"', self.at + 1)
        while end != -1 and self.text.startswith('""', end):
            end = self.text.find('"', end + 2)
        if end == -1:
            raise _Cut
        self.out.append(self.text[self.at : end + 1])
        self.at = end + 1

    def _dollar(self) -> None:
        """``$1`` is a parameter, kept; ``$tag$`` opens a dollar quote; anything else is cut."""
        text = self.text
        parameter = _PARAMETER.match(text, self.at)
        if parameter is not None:
            self.out.append(parameter.group())
            self.parameters.append(int(parameter.group(1)))
            self.at = parameter.end()
            return
        tag = _DOLLAR_TAG.match(text, self.at)
        if tag is None:
            raise _Cut
        end = text.find(tag.group(), tag.end())
        if end == -1:
            raise self._cut_literal()
        self.at = end + len(tag.group())
        self._literal()

    def _line_comment(self) -> None:
        end = self.text.find("\n", self.at)
        self.at = len(self.text) if end == -1 else end
        self.out.append(" ")

    def _block_comment(self) -> None:
        """A ``/* */`` comment, nested as PostgreSQL nests them; unterminated, the rest is cut."""
        text = self.text
        depth, at = 1, self.at + 2
        while depth:
            opens, closes = text.find("/*", at), text.find("*/", at)
            if closes == -1:
                raise _Cut
            if opens != -1 and opens < closes:
                depth, at = depth + 1, opens + 2
            else:
                depth, at = depth - 1, closes + 2
        self.at = at
        self.out.append(" ")
