"""Enqueue from Django, in the same transaction as the ORM's writes.

Add ``"drain.contrib.django"`` to ``INSTALLED_APPS`` (for ``manage.py drain_run``),
then::

    from django.db import transaction
    from drain.contrib import django as jobs

    with transaction.atomic():
        order = Order.objects.create(...)
        jobs.enqueue({"order": order.pk}, queue="emails")
        jobs.kick_on_commit(wake_a_runner)

The job is inserted on Django's own connection (``connections[using]``), through
the psycopg 3 connection under it, so it commits or rolls back with the
``atomic()`` block around it; outside one, Django's autocommit commits it at
once, as it would any ORM write. Django 5.x picks psycopg 3 when it is
installed; with psycopg2 underneath, :class:`~drain.core.errors.NotPsycopg3` says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

import psycopg
from django.db import (  # type: ignore[import-untyped]  # Django ships no types
    DEFAULT_DB_ALIAS,
    connections,
    transaction,
)
from psycopg import conninfo

from drain.core.errors import ConfigurationError, NotPsycopg3
from drain.core.settings.defaults import DEFAULT_MAX_ATTEMPTS
from drain.core.table import JobTable
from drain.store.driver import ADVICE, sync_connection
from drain.store.producer import Enqueued
from drain.store.producer import enqueue as _enqueue
from drain.store.producer import enqueue_many as _enqueue_many

# Keys of OPTIONS that are Django's own, not libpq's: drain run does without them.
DJANGO_ONLY_OPTIONS = frozenset(
    {"assume_role", "isolation_level", "pool", "server_side_binding", "cursor_factory", "context"}
)


def connection(using: str = DEFAULT_DB_ALIAS) -> psycopg.Connection[Any]:
    """The psycopg 3 connection under Django's connection ``using``, opened if need be."""
    wrapper = connections[using]
    if wrapper.vendor != "postgresql":
        raise NotPsycopg3(f"{ADVICE}; settings.DATABASES[{using!r}] is a {wrapper.vendor} database")
    wrapper.ensure_connection()
    return sync_connection(wrapper.connection)


def enqueue(
    payload: Any,
    *,
    queue: str = "default",
    using: str = DEFAULT_DB_ALIAS,
    run_at: datetime | None = None,
    delay: float | timedelta | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    table: JobTable | None = None,
    key: str | None = None,
) -> Enqueued:
    """:func:`drain.enqueue` on Django's connection ``using``, in its current transaction."""
    return _enqueue(
        connection(using),
        payload,
        queue=queue,
        run_at=run_at,
        delay=delay,
        max_attempts=max_attempts,
        table=table,
        key=key,
    )


def enqueue_many(
    payloads: Iterable[Any],
    *,
    queue: str = "default",
    using: str = DEFAULT_DB_ALIAS,
    run_at: datetime | None = None,
    delay: float | timedelta | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    table: JobTable | None = None,
    keys: Iterable[str | None] | None = None,
) -> int:
    """:func:`drain.enqueue_many` on Django's connection ``using``; how many jobs are new."""
    return _enqueue_many(
        connection(using),
        payloads,
        queue=queue,
        run_at=run_at,
        delay=delay,
        max_attempts=max_attempts,
        table=table,
        keys=keys,
    )


def kick_on_commit(fn: Callable[[], Any], *, using: str = DEFAULT_DB_ALIAS) -> None:
    """Call ``fn`` once the transaction that enqueued commits; never if it rolls back.

    For what must not happen before the jobs are visible, such as starting a run
    (a Cloud Run Job, a Lambda): a run started earlier would find nothing.
    Outside ``atomic()`` Django calls ``fn`` at once.
    """
    transaction.on_commit(fn, using=using)


def dsn(using: str = DEFAULT_DB_ALIAS) -> str:
    """A libpq connection string for ``settings.DATABASES[using]``.

    NAME, USER, PASSWORD, HOST, PORT and the libpq keys of OPTIONS (``sslmode``,
    ``service``, ``options``, ...), read the way Django's postgresql backend reads
    them: an empty value is not given, NAME None is the ``postgres`` database.
    Django's own OPTIONS (``pool``, ``server_side_binding``, ``isolation_level``,
    ``assume_role``) are left out: drain opens its connections itself.
    """
    from django.conf import settings  # type: ignore[import-untyped]

    try:
        database = settings.DATABASES[using]
    except KeyError:
        raise ConfigurationError(f"settings.DATABASES has no {using!r} database") from None
    engine = database.get("ENGINE", "")
    if not engine.endswith("postgresql"):
        raise NotPsycopg3(f"{ADVICE}; settings.DATABASES[{using!r}] uses the engine {engine!r}")
    params: dict[str, Any] = {
        key: value
        for key, value in (database.get("OPTIONS") or {}).items()
        if key not in DJANGO_ONLY_OPTIONS
        and isinstance(value, str | int)
        and not isinstance(value, bool)
        and value != ""
    }
    name = database.get("NAME")
    if name is None:
        params.pop("service", None)
        params["dbname"] = "postgres"
    elif name:
        params["dbname"] = name
    for setting, key in (("USER", "user"), ("PASSWORD", "password"), ("HOST", "host")):
        if database.get(setting):
            params[key] = database[setting]
    if database.get("PORT"):
        params["port"] = str(database["PORT"])
    try:
        return conninfo.make_conninfo("", **params)
    except psycopg.ProgrammingError as exc:
        raise ConfigurationError(
            f"settings.DATABASES[{using!r}] does not make a connection string: {exc}"
        ) from None
