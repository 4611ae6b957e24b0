"""Keep passwords out of everything drain prints or stores.

libpq and the driver quote the connection string back in some error texts (a
malformed URL is echoed, percent-escapes and all), so every error text passes
through :func:`redact` before it reaches a log line, the summary, ``last_error``
or the run record. The password is found three ways: from the parsed DSN, from a
rough parse of a DSN the driver could not parse, and from ``PGPASSWORD``; the
tokens given for metrics, traces and check-ins come from :mod:`drain.core.credentials`.
An error text that quotes a statement may carry a password literal (``ALTER ROLE
... PASSWORD '...'``), masked here too; another session's statement is never
shown with its literals at all (:mod:`drain.core.literals`).

An error text bound for ``last_error`` comes from a handler, so anything may be in
it: :func:`storable_error` is the one place that makes it fit a ``text`` column.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from urllib.parse import quote, unquote

from drain.core import credentials
from drain.core.conninfo import password_of

MASK = "********"
MAX_ERROR_LENGTH = 2000
# What stands in for a character PostgreSQL text cannot hold.
REPLACEMENT = "\ufffd"
# A text is cut to this many times the limit before the regular expressions
# scan it (a handler may raise with a message of any size); far past the limit,
# so a password the cut splits is cut away with the rest.
_SCAN_FACTOR = 16
TRUNCATED = " ... (truncated)"

_URL_PASSWORD = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^:/@\s?#]*:)(?P<secret>.*)@", re.I)
_KEYWORD_PASSWORD = re.compile(
    r"(?P<head>\bpassword\s*=\s*)(?P<secret>'(?:[^'\\]|\\.)*'|\S+)",
    re.I,
)
# A password literal an error text quotes: PASSWORD '...' (doubled quotes inside), E'...' (with
# backslash escapes) or $tag$...$tag$, also when the statement was cut short
# inside it (pg_stat_activity keeps a statement's first 1 kB).
_SQL_PASSWORD = re.compile(
    r"(?P<head>\bpassword\s+)"
    r"(?P<secret>e'(?:[^'\\]|\\.|'')*(?:'|$)"
    r"|'(?:[^']|'')*(?:'|$)"
    r"|(?P<tag>\$(?:[a-z_][a-z0-9_]*)?\$).*?(?:(?P=tag)|$))",
    re.I | re.S,
)
# NUL (PostgreSQL text cannot hold it) and lone surrogates (no UTF-8 encoding:
# os.listdir and os.fsdecode return them for bytes that are not UTF-8).
_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")


def secrets_in(dsn: str | None) -> list[str]:
    """Every form of the password that may appear in a text about this DSN."""
    found: set[str] = set()
    if dsn:
        try:
            password = password_of(dsn)
        except ValueError:
            password = None
        if isinstance(password, str):
            found.add(password)
        url = _URL_PASSWORD.search(dsn)
        if url:
            found.add(url.group("secret"))
        keyword = _KEYWORD_PASSWORD.search(dsn)
        if keyword:
            found.add(keyword.group("secret").strip("'"))
    env_password = os.environ.get("PGPASSWORD")
    if env_password:
        found.add(env_password)
    variants: set[str] = set()
    for secret in found:
        if not secret:
            continue
        variants.update({secret, quote(secret, safe=""), quote(secret), unquote(secret)})
    return sorted((v for v in variants if len(v) >= 2), key=len, reverse=True)


def has_password(dsn: str) -> bool:
    """Whether the DSN itself carries a password (``PGPASSWORD`` does not count)."""
    try:
        return bool(password_of(dsn))
    except ValueError:  # a DSN libpq would refuse may still hold one
        url = _URL_PASSWORD.search(dsn)
        return bool((url and url.group("secret")) or _KEYWORD_PASSWORD.search(dsn))


class Redactor:
    """Masks the passwords of one DSN, plus anything that looks like a password."""

    def __init__(self, dsn: str | None = None) -> None:
        self._secrets = secrets_in(dsn)

    def __call__(self, text: str) -> str:
        return redact(text, self._secrets)


def redact(text: str, secrets: list[str] | None = None) -> str:
    """``text`` with known passwords and password-shaped fragments masked.

    Known are ``secrets`` (a DSN's, from :func:`secrets_in`) and, always, the
    tokens of drain's observability (:func:`drain.core.credentials.secrets`).
    """
    for secret in secrets or ():
        text = text.replace(secret, MASK)
    for secret in credentials.secrets():
        text = text.replace(secret, MASK)
    text = _URL_PASSWORD.sub(lambda m: m.group("head") + MASK + "@", text)
    text = _KEYWORD_PASSWORD.sub(lambda m: m.group("head") + MASK, text)
    return _SQL_PASSWORD.sub(lambda m: m.group("head") + f"'{MASK}'", text)


def storable_error(
    text: str, redactor: Callable[[str], str] = redact, limit: int = MAX_ERROR_LENGTH
) -> str:
    """``text`` as ``last_error`` can hold it: storable, redacted, at most ``limit`` long.

    A NUL byte or a lone surrogate in one error text used to fail the statement
    that records the whole batch's outcomes; they become U+FFFD here. Give the
    run's :class:`Redactor` so its DSN's password is masked too.
    """
    text = _UNSTORABLE.sub(REPLACEMENT, text[: limit * _SCAN_FACTOR])
    text = redactor(text)
    if len(text) <= limit:
        return text
    return text[: limit - len(TRUNCATED)] + TRUNCATED


def describe(exc: BaseException) -> str:
    """``Type: message`` for an exception, which never raises.

    Building the text calls the exception's own ``__str__``; one that raises (or
    returns something other than a string) would otherwise take down the worker
    thread that ran the handler.
    """
    name = type(exc).__name__
    try:
        message = str(exc)
    except BaseException as inner:  # whatever user code raises is reported, never re-raised
        return f"{name}: <unprintable: str() raised {type(inner).__name__}>"
    return f"{name}: {message}" if message else name
