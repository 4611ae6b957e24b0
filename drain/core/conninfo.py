"""The password a connection string carries, read the way libpq reads it, without the driver.

Redaction sits at the bottom of the stack (everything prints through it), so it
cannot lean on psycopg to parse a DSN. libpq takes two forms: a URI
(``postgresql://user:secret@host/db?password=...``, percent-encoded) and
``keyword=value`` pairs (values bare up to a blank, or single-quoted, with
backslash escaping a quote or a backslash in both). ``tests/test_conninfo.py``
checks this reading against libpq's own on every form it names.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, unquote

URI_PREFIXES = ("postgresql://", "postgres://")


def password_of(dsn: str) -> str | None:
    """The password in ``dsn``, or None; :class:`ValueError` for a string libpq would refuse."""
    if dsn.startswith(URI_PREFIXES):
        return _uri_password(dsn)
    return _keywords(dsn).get("password")


def _uri_password(uri: str) -> str | None:
    rest = uri.split("://", 1)[1]
    authority, _, tail = rest.partition("/")
    query = ""
    if "?" in authority:
        authority, query = authority.split("?", 1)
    elif "?" in tail:
        query = tail.split("?", 1)[1]
    password: str | None = None
    if "@" in authority:
        userinfo = authority.rsplit("@", 1)[0]
        if ":" in userinfo:
            password = unquote(userinfo.split(":", 1)[1]) or None
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key == "password":
            password = value
    return password


def _keywords(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i == n:
            return found
        start = i
        while i < n and text[i] != "=" and not text[i].isspace():
            i += 1
        key = text[start:i]
        while i < n and text[i].isspace():
            i += 1
        if i == n or text[i] != "=" or not key:
            raise ValueError(f"missing '=' after {key!r} in the connection string")
        i += 1
        while i < n and text[i].isspace():
            i += 1
        value, i = _value(text, i)
        found[key] = value


def _value(text: str, i: int) -> tuple[str, int]:
    out: list[str] = []
    n = len(text)
    if i < n and text[i] == "'":
        i += 1
        while i < n and text[i] != "'":
            if text[i] == "\\" and i + 1 < n:
                i += 1
            out.append(text[i])
            i += 1
        if i == n:
            raise ValueError("unterminated quoted value in the connection string")
        return "".join(out), i + 1
    while i < n and not text[i].isspace():
        if text[i] == "\\" and i + 1 < n:
            i += 1
        out.append(text[i])
        i += 1
    return "".join(out), i
