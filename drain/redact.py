"""Keep passwords out of everything drain prints or stores.

libpq and the driver quote the connection string back in some error texts (a
malformed URL is echoed, percent-escapes and all), so every error text passes
through :func:`redact` before it reaches a log line, the summary, ``last_error``
or the run record. The password is found three ways: from the parsed DSN, from a
rough parse of a DSN the driver could not parse, and from ``PGPASSWORD``.
"""

from __future__ import annotations

import os
import re
from urllib.parse import quote, unquote

from psycopg import conninfo

MASK = "********"
MAX_ERROR_LENGTH = 2000

_URL_PASSWORD = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^:/@\s?#]*:)(?P<secret>.*)@", re.I)
_KEYWORD_PASSWORD = re.compile(
    r"(?P<head>\bpassword\s*=\s*)(?P<secret>'(?:[^'\\]|\\.)*'|\S+)",
    re.I,
)


def secrets_in(dsn: str | None) -> list[str]:
    """Every form of the password that may appear in a text about this DSN."""
    found: set[str] = set()
    if dsn:
        try:
            password = conninfo.conninfo_to_dict(dsn).get("password")
        except Exception:
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


class Redactor:
    """Masks the passwords of one DSN, plus anything that looks like a password."""

    def __init__(self, dsn: str | None = None) -> None:
        self._secrets = secrets_in(dsn)

    def __call__(self, text: str) -> str:
        return redact(text, self._secrets)


def redact(text: str, secrets: list[str] | None = None) -> str:
    """``text`` with known passwords and password-shaped fragments masked."""
    for secret in secrets or ():
        text = text.replace(secret, MASK)
    text = _URL_PASSWORD.sub(lambda m: m.group("head") + MASK + "@", text)
    return _KEYWORD_PASSWORD.sub(lambda m: m.group("head") + MASK, text)


def short_error(text: str, limit: int = MAX_ERROR_LENGTH) -> str:
    """A redacted error text cut to ``limit`` characters, for ``last_error``."""
    text = redact(text)
    if len(text) <= limit:
        return text
    return text[: limit - 15] + " ... (truncated)"
