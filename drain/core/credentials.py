"""The credentials of drain's own observability, known in one place.

Besides the database's password, a run may hold tokens for what it reports to:
the OTLP endpoint and its headers (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_HEADERS`` and their ``TRACES_`` forms), the Pushgateway's
URL (``--pushgateway``, ``DRAIN_PUSHGATEWAY``) and the Sentry DSN
(``SENTRY_DSN``, whose user part is the project's key). This module names them
for three uses:

* :data:`VARIABLES`: an ``--exec`` program does not inherit them
  (:func:`drain.runner.program_env.program_environment`), unless ``--exec-keep-env`` keeps one;
* :func:`secrets`: their secret parts, which :func:`drain.core.redact.redact` masks
  in everything drain prints or stores (log lines, the summary, ``last_error``,
  a program's forwarded output);
* :func:`safe_endpoint`: an endpoint as a message shows it.

A message shows an endpoint without its user, password, query and fragment, and
with every path segment that is not plain as ``********``. Plain is at most 32
characters of lower-case letters, digits, ``.``, ``-`` and ``_``, with at most
3 digits unless it is all digits (a port-like or project number, at most 12 of
them): ``v1``, ``traces``, ``eu-west-1`` and ``42`` are shown, ``OTLPKEY111``,
a UUID, base64 or anything percent-encoded is not.

What is masked wherever it appears: a URL's password, query and fragment, the
value of a query parameter whose name says it is secret (``api_key``,
``token``, ``auth``, ...), and its user, other query values and path segments
that are not plain (a Sentry key is 32 hex digits; a plain word such as
``public`` would mask unrelated text). Header values are secret whole, and so
is their last word (the token after ``Bearer``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from urllib.parse import parse_qsl, unquote, urlsplit

MASK = "********"
URL_VARIABLES = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "DRAIN_PUSHGATEWAY",
    "SENTRY_DSN",
)
HEADER_VARIABLES = ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS")
VARIABLES = frozenset(URL_VARIABLES + HEADER_VARIABLES)
# A secret part shorter than this is not masked: it would mask unrelated text.
MIN_SECRET = 4

_PLAIN_SEGMENT = re.compile(r"[a-z0-9._-]{1,32}")
# A query parameter whose value is secret whatever it looks like.
_SECRET_NAME = re.compile(r"key|token|secret|auth|pass|sig|credential|session", re.I)
# URLs given other ways than the environment (--pushgateway), for secrets(); replaced
# whole, never changed in place, so a thread reading it never sees it change.
_given: frozenset[str] = frozenset()


def remember(url: str) -> None:
    """Make the secret parts of ``url``, given as an option, masked like the environment's."""
    global _given
    _given = _given | {url}


def plain(segment: str) -> bool:
    """Whether a URL path segment may be shown (the rule in the module's docstring)."""
    if not segment:
        return True
    if _PLAIN_SEGMENT.fullmatch(segment) is None:
        return False
    digits = sum(char.isdigit() for char in segment)
    if digits == len(segment):
        return digits <= 12
    return digits <= 3


def safe_endpoint(url: str) -> str:
    """``url`` as a message shows it: scheme, host, port and plain path segments only.

    No user or password, no query, no fragment; a segment that looks like a
    token is ``********``. A value that does not parse as a URL is not shown.
    """
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        parts, port = None, None
    if parts is None or not parts.scheme:
        return "<not a URL, not shown>"
    path = "/".join(segment if plain(segment) else MASK for segment in parts.path.split("/"))
    if not parts.netloc:
        return f"{parts.scheme}:{path}"
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    return f"{parts.scheme}://{host}{'' if port is None else f':{port}'}{path}"


def url_secrets(url: str) -> set[str]:
    """The parts of ``url`` that are secret (see the module's docstring), raw and decoded."""
    try:
        parts = urlsplit(url.strip())
        found = {parts.password or "", parts.fragment, parts.query}
        pairs = [("", parts.username or ""), *parse_qsl(parts.query, keep_blank_values=True)]
        found.update(value for name, value in pairs if _secret_named(name) or not plain(value))
        found.update(segment for segment in parts.path.split("/") if not plain(segment))
    except ValueError:  # not a URL: the whole value is the secret
        found = {url}
    return _forms(found)


def _secret_named(name: str) -> bool:
    return _SECRET_NAME.search(name) is not None


def header_secrets(value: str) -> set[str]:
    """The values of ``name=value,...`` headers, and the last word of each."""
    found = set()
    for pair in value.split(","):
        _, _, secret = pair.partition("=")
        secret = secret.strip()
        found.add(secret)
        words = unquote(secret).split()
        if len(words) > 1:
            found.add(words[-1])
    return _forms(found)


def _forms(found: Iterable[str]) -> set[str]:
    forms = set()
    for secret in found:
        forms.update({secret, unquote(secret)})
    return {secret for secret in forms if len(secret) >= MIN_SECRET}


def secrets(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Every secret part of drain's observability credentials, the longest first.

    Read from the environment at each call (a test or an application may change
    it) and the URLs :func:`remember` was given; the work is done once per set
    of values.
    """
    env = os.environ if environ is None else environ
    return _secrets(
        tuple(env.get(name, "") for name in URL_VARIABLES),
        tuple(env.get(name, "") for name in HEADER_VARIABLES),
        _given,
    )


@lru_cache(maxsize=16)
def _secrets(
    urls: tuple[str, ...], headers: tuple[str, ...], given: frozenset[str]
) -> tuple[str, ...]:
    found: set[str] = set()
    for url in (*urls, *given):
        if url:
            found |= url_secrets(url)
    for value in headers:
        if value:
            found |= header_secrets(value)
    return tuple(sorted(found, key=len, reverse=True))
