"""Connecting to PostgreSQL, and turning driver errors into drain's own.

Every connection drain opens is in autocommit (each statement is its own short
transaction, so the session is ``idle``, never ``idle in transaction``), carries
``application_name`` so ``pg_stat_activity`` shows who it is, and has an explicit
connect timeout (libpq would otherwise wait over two minutes). A compute that is
resuming from suspension refuses or stalls connections for a few seconds, so
connecting retries with backoff until a deadline.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg import conninfo, errors

from drain.core.config import ConnectOptions
from drain.core.durations import format_duration
from drain.core.errors import (
    ConfigurationError,
    ConnectError,
    ConnectionLost,
    DatabaseError,
    DrainError,
    ReadOnlyServer,
    SchemaError,
    StatementAborted,
)
from drain.core.redact import Redactor
from drain.core.settings import DSN_VARIABLES

log = logging.getLogger("drain")
T = TypeVar("T")

# ConnectOptions, APPLICATION_NAME and DSN_VARIABLES live in the bottom layer
# (drain.core.config, drain.core.settings); they are imported above under their old names.
# How many fresh connections a reconnect may try when each breaks while checked.
RECONNECT_CHECKS = 5
LIBPQ_TARGET_VARIABLES = ("PGHOST", "PGSERVICE", "PGDATABASE")

# Messages libpq gives for problems that waiting will not fix.
_PERMANENT_CONNECT_ERRORS = (
    "authentication failed",
    "does not exist",
    "pg_hba.conf",
    "could not translate host name",
    "invalid",
    "no password supplied",
    "certificate",
    "permission denied",
)


def resolve_dsn(explicit: str | None) -> str:
    """The DSN to use: the option, else ``DRAIN_DSN``, else ``DATABASE_URL``.

    With none of them, libpq's own ``PG*`` variables are used only when one of
    ``PGHOST``, ``PGSERVICE`` or ``PGDATABASE`` names a target; otherwise this is
    an error, never a silent fallback to a local default.
    """
    if explicit:
        return explicit
    for name in DSN_VARIABLES:
        value = os.environ.get(name)
        if value:
            return value
    if any(os.environ.get(name) for name in LIBPQ_TARGET_VARIABLES):
        return ""
    raise ConfigurationError(
        "no database given: pass --dsn, or set DRAIN_DSN or DATABASE_URL "
        "(or PGHOST/PGDATABASE, with the password in PGPASSWORD or ~/.pgpass)"
    )


def describe_target(dsn: str) -> str:
    """``host:port/dbname`` for messages, never including the password."""
    try:
        params = conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:
        return "the database"
    host = str(params.get("host") or os.environ.get("PGHOST") or "local socket")
    port = str(params.get("port") or os.environ.get("PGPORT") or "5432")
    dbname = str(params.get("dbname") or os.environ.get("PGDATABASE") or "")
    where = host if host.startswith("/") else f"{host}:{port}"
    return f"{where}/{dbname}" if dbname else where


# A URL's scheme, as libpq would see one; key=value words have none.
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
URL_PREFIXES = ("postgresql://", "postgres://")
# Schemes of other databases' URLs, named back to a user who pasted one; any other
# scheme is not echoed (the text before a colon may be anything, a password too).
_OTHER_SCHEMES = frozenset(
    {"mysql", "mariadb", "sqlite", "mongodb", "mongodb+srv", "redis", "rediss", "mssql"}
    | {"sqlserver", "oracle", "jdbc", "http", "https", "amqp", "cockroachdb", "file"}
)
PERCENT_ENCODING_HINT = (
    "in a URL, percent-encode special characters of the password "
    "(space %20, % %25, @ %40, # %23, / %2F)"
)


def check_dsn(dsn: str) -> None:
    """Refuse a DSN that libpq would misread, before anything connects, echoing none of it.

    A URL with two raw ``@`` is read by libpq up to the first one: the rest of
    the password became the host, and every retry printed it in ``failed to
    resolve host '...'`` for half a minute. (A database name or query value with
    a raw ``@`` is refused too; percent-encoded, it passes.) A URL of another
    scheme (``mysql://``) or a mistyped one (``postgres:/x``) is no connection
    string libpq knows; it used to draw the percent-encoding advice.
    """
    scheme = _SCHEME.match(dsn)
    if scheme is None:
        return  # key=value words, or empty (libpq's PG* variables)
    if not dsn.startswith(URL_PREFIXES):
        name = scheme.group(1).lower()
        if name in ("postgresql", "postgres"):
            raise ConfigurationError(
                "the DSN is not a PostgreSQL URL: one starts with postgresql:// or "
                "postgres:// (in lower case, with two slashes)"
            )
        if name in _OTHER_SCHEMES:
            raise ConfigurationError(
                f"the DSN is a {name}: URL, not a PostgreSQL URL: give one such as "
                "postgresql://app@db.example.com:5432/app, or key=value words"
            )
        raise ConfigurationError(
            "the DSN is neither a PostgreSQL URL (postgresql://app@db.example.com:5432/app) "
            "nor key=value words (host=db.example.com dbname=app)"
        )
    # libpq takes the user and password up to the first '@': a second one anywhere
    # (a host or database name has none) means the password holds a raw '@'.
    if dsn.count("@") > 1:
        raise ConfigurationError(
            "the connection URL has more than one '@', so part of the password would "
            f"be read as the host (not shown); {PERCENT_ENCODING_HINT}"
        )


def _conninfo(options: ConnectOptions, timeout: float | None = None) -> str:
    check_dsn(options.dsn)
    try:
        params = conninfo.conninfo_to_dict(options.dsn)
    except psycopg.ProgrammingError:
        # libpq's message quotes the malformed part, which may be the password.
        raise ConfigurationError(
            f"the connection string is malformed; {PERCENT_ENCODING_HINT}"
        ) from None
    # libpq counts whole seconds and reads anything under 2 as 2.
    params["connect_timeout"] = max(2, math.floor(timeout or options.connect_timeout))
    params.setdefault("application_name", options.application_name)
    return conninfo.make_conninfo("", **params)


# libpq's words for a connection option it cannot use (sslmode=bogus, port=x):
# the DSN is wrong, so it is a usage error (exit 2), not a failure to connect.
_BAD_OPTION = re.compile(r"\binvalid\b.*\b(value|number)\b", re.I)


def _is_permanent(message: str) -> bool:
    lowered = message.lower()
    return any(fragment in lowered for fragment in _PERMANENT_CONNECT_ERRORS)


def _reason(message: str) -> str:
    """The useful part of a libpq connect error: after the last 'failed:' prefix."""
    text = " ".join(message.split())
    marker = "failed: "
    if marker in text:
        text = text.rsplit(marker, 1)[1]
    return text.removeprefix("FATAL: ").strip()


def connect(
    options: ConnectOptions,
    *,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> psycopg.Connection[Any]:
    """Open one autocommit connection, retrying transient failures until the deadline.

    The deadline is ``retry_for`` seconds from now, or the given monotonic time if
    that comes first (a run never waits for the database past its own budget).
    """
    redactor = Redactor(options.dsn)
    _conninfo(options)  # a malformed DSN is a usage error before any attempt
    started = clock()
    stop_at = started + options.retry_for
    if deadline is not None:
        stop_at = min(stop_at, deadline)
    attempt = 0
    delay = 0.25
    while True:
        attempt += 1
        # One attempt never runs past the deadline either (a host that never
        # answers held a 5 s budget for one whole 10 s connect timeout).
        left = stop_at - clock() if deadline is not None else None
        timeout = options.connect_timeout if left is None else min(options.connect_timeout, left)
        try:
            conn = _open(_conninfo(options, timeout))
        except psycopg.OperationalError as exc:
            reason = redactor(_reason(str(exc)))
            elapsed = clock() - started
            if _BAD_OPTION.search(reason):
                raise ConfigurationError(f"the connection string is wrong: {reason}") from None
            # Under a deadline, an attempt needs libpq's shortest timeout (2 s) to fit.
            shortest = 2.0 if deadline is not None else 0.0
            if _is_permanent(reason) or clock() + delay + shortest >= stop_at:
                tries = f" (after {attempt} attempts over {elapsed:.1f}s)" if attempt > 1 else ""
                raise ConnectError(
                    f"cannot connect to {describe_target(options.dsn)}: {reason}{tries}"
                ) from None
            log.info("connect attempt %d failed (%s); retrying in %.2fs", attempt, reason, delay)
            if attempt == 1 and options.retry_notice:
                _say_retrying(options, reason, stop_at - clock())
            sleep(delay)
            delay = min(delay * 2, 5.0)
            continue
        _warn_about_tls(conn)
        return conn


def _say_retrying(options: ConnectOptions, reason: str, left: float) -> None:
    """Once, on a terminal: a wrong port would otherwise look like a hang for half a minute."""
    log.warning(
        "cannot reach %s yet (%s); retrying for up to %s (--connect-retry sets how long)",
        describe_target(options.dsn),
        reason,
        format_duration(max(1, round(left))),
    )


def _open(target: str) -> psycopg.Connection[Any]:
    return psycopg.connect(
        target,
        autocommit=True,
        # No server-side prepared statements, pooler or not. Their generic plans go
        # wrong on a queue table, whose statistics say "nothing is running" as often
        # as not: the fenced completion's generic plan loops over the running index
        # once per id, and the claim's uses a 10 % LIMIT guess. The measurement is in
        # BENCHMARKS.md, "What these measurements changed": no server-side prepared
        # statements.
        prepare_threshold=None,
    )


def _warn_about_tls(conn: psycopg.Connection[Any]) -> None:
    host = conn.info.host
    if not host or host.startswith("/") or _is_loopback(host):
        return
    sslmode = conn.info.get_parameters().get("sslmode") or _sslmode_of(conn)
    if sslmode != "verify-full":
        log.warning(
            "warning: connected to %s with sslmode=%s; use sslmode=verify-full so the "
            "server's certificate is checked",
            host,
            sslmode or "prefer",
        )


def _sslmode_of(conn: psycopg.Connection[Any]) -> str:
    for option in conn.pgconn.info:
        if option.keyword == b"sslmode" and option.val is not None:
            return option.val.decode()
    return "prefer"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def translate(exc: psycopg.Error, redactor: Redactor) -> DrainError:
    """The drain error a driver error stands for, its text redacted."""
    message = redactor(" ".join(str(exc).split()))
    if isinstance(exc, errors.ReadOnlySqlTransaction):
        return ReadOnlyServer(
            "the server is read-only (a standby after failover, or "
            "default_transaction_read_only is on); stopping"
        )
    if isinstance(exc, errors.UndefinedTable | errors.UndefinedColumn | errors.InvalidSchemaName):
        # The primary message alone: the rest quotes the statement (LINE 1: INSERT ...).
        primary = redactor(" ".join((exc.diag.message_primary or message).split()))
        return SchemaError(
            f"the queue schema is missing or incomplete ({primary}); create it with `drain init`"
        )
    if isinstance(exc, errors.InsufficientPrivilege):
        return DatabaseError(f"permission denied: {message}")
    aborted = _aborted_kind(exc)
    if aborted is not None:
        return StatementAborted(f"{aborted}: {message}")
    if isinstance(exc, psycopg.OperationalError):
        return ConnectionLost(f"lost the connection to the database: {message}")
    return DatabaseError(message)


# Statement errors that say nothing about the connection, each named as a user
# would look it up. QueryCanceled is an OperationalError in psycopg, so it must
# be told apart before the connection check; it is a timeout unless a person
# cancelled the statement.
_ABORTED_KINDS: tuple[tuple[type[psycopg.Error], str], ...] = (
    (errors.LockNotAvailable, "lock timeout"),
    (errors.DeadlockDetected, "deadlock"),
    (errors.SerializationFailure, "serialization failure"),
)


def _aborted_kind(exc: psycopg.Error) -> str | None:
    if isinstance(exc, errors.QueryCanceled):
        text = str(exc).lower()
        return "statement timeout" if "timeout" in text else "statement cancelled"
    for kind, name in _ABORTED_KINDS:
        if isinstance(exc, kind):
            return name
    return None


def is_statement_aborted(exc: BaseException) -> bool:
    """True for a statement the server gave up on while the connection stays usable."""
    return isinstance(exc, psycopg.Error) and _aborted_kind(exc) is not None


def is_connection_failure(exc: BaseException, conn: psycopg.Connection[Any] | None) -> bool:
    """True when ``exc`` means the connection itself is gone (not a failed statement)."""
    if not isinstance(exc, psycopg.OperationalError):
        return False
    if isinstance(exc, errors.QueryCanceled):
        return False
    return conn is None or conn.broken or conn.closed


class Session:
    """The one connection a run uses, shared by the runner and its lease keeper.

    Every use holds a lock, so the lease keeper's extension never interleaves with
    a pipeline the runner has open. When the connection breaks, the next call
    reconnects (within the run's deadline) and repeats the statement, which is safe
    because every statement drain sends is either fenced by (id, attempt) or
    idempotent.
    """

    def __init__(
        self,
        options: ConnectOptions,
        *,
        deadline: Callable[[], float | None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
        on_reconnect: Callable[[psycopg.Connection[Any]], None] | None = None,
    ) -> None:
        """``on_reconnect`` runs on every new connection after the first, before any
        statement is repeated on it: session state (a runner slot, say) is gone
        with the old connection and has to be taken again."""
        self.options = options
        self._on_reconnect = on_reconnect
        self.redactor = Redactor(options.dsn)
        self._deadline = deadline
        self._clock = clock
        self._lock = threading.RLock()
        self._conn: psycopg.Connection[Any] | None = None

    def open(self) -> psycopg.Connection[Any]:
        with self._lock:
            if self._conn is None or self._conn.closed or self._conn.broken:
                again = self._conn is not None
                if self._conn is not None:
                    self._conn.close()
                self._conn = self._connect(check=again)
            return self._conn

    def _connect(self, *, check: bool) -> psycopg.Connection[Any]:
        """Connect; after a lost connection, run ``on_reconnect`` on the new one too.

        The new connection may break while it is being checked (a server still
        restarting): that counts as one more failed connection attempt, not as
        the end of the run.
        """
        for _ in range(RECONNECT_CHECKS):
            conn = connect(self.options, deadline=self._deadline(), clock=self._clock)
            if not check or self._on_reconnect is None:
                return conn
            try:
                self._on_reconnect(conn)
                return conn
            except psycopg.Error as exc:
                lost = is_connection_failure(exc, conn)
                conn.close()
                if not lost:
                    raise translate(exc, self.redactor) from exc
                log.warning("connection lost again while checking it; reconnecting")
            except BaseException:  # the check refused the server (read-only, say)
                conn.close()
                raise
        raise ConnectionLost("lost the connection to the database again and again; stopping")

    def call(self, work: Callable[[psycopg.Connection[Any]], T], *, attempts: int = 3) -> T:
        """Run ``work`` on the connection, reconnecting and repeating it if the connection broke."""
        with self._lock:
            for attempt in range(1, attempts + 1):
                conn = self.open()
                try:
                    return work(conn)
                except psycopg.Error as exc:
                    if not is_connection_failure(exc, conn) or attempt == attempts:
                        raise translate(exc, self.redactor) from exc
                    log.warning(
                        "connection lost (%s); reconnecting",
                        self.redactor(" ".join(str(exc).split())),
                    )
                    try:
                        self.open()
                    except ConnectError as failed:
                        raise ConnectionLost(
                            f"lost the connection to the database and could not reconnect: {failed}"
                        ) from None
            raise AssertionError("unreachable")

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
