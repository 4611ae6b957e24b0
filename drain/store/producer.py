"""The producer API: enqueue and cancel jobs in the caller's own transaction.

drain never commits here: a job becomes visible when the caller's transaction
commits, with the data it belongs to. Payloads are checked before anything is
sent (:func:`payload_text`), so jsonb's refusals never abort the caller's
transaction midway. :mod:`drain.store.aio` shares these checks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import psycopg
from psycopg import errors

from drain.core.errors import DatabaseError, DedupeNotEnabled
from drain.core.settings.defaults import DEFAULT_MAX_ATTEMPTS
from drain.core.table import JobTable
from drain.store import priorities
from drain.store.params import seconds
from drain.store.sqlfiles import statement_for


class CancelOutcome(NamedTuple):
    """What a cancel did: queued jobs failed at once, running ones marked."""

    cancelled: tuple[int, ...]  # were queued: now failed, never to be claimed
    requested: tuple[int, ...]  # were running: no further attempt, the handler is told


def cancel(
    conn: psycopg.Connection[Any],
    ids: Sequence[int] = (),
    *,
    queue: str | None = None,
    older_than: float | timedelta = 0.0,
    table: JobTable | None = None,
) -> CancelOutcome:
    """Cancel jobs by id, or the jobs of ``queue`` created at least ``older_than`` ago.

    In the caller's transaction (nothing is committed here). A queued job fails
    at once with ``last_error`` 'cancelled'; a running job gets no further
    attempt and its handler sees ``job.cancel_requested`` at the run's next lease
    renewal, while the attempt's own outcome is still recorded. Done and failed
    jobs are left alone (and are in neither list).
    """
    target = table or JobTable()
    if queue is None:
        params: dict[str, Any] = {"ids": list(ids)}
        cursor = conn.execute(statement_for(target, "cancel_ids"), params)
    else:
        params = {"queue": queue, "older_than": seconds(older_than)}
        cursor = conn.execute(statement_for(target, "cancel_queue"), params)
    rows = cursor.fetchall()
    return CancelOutcome(
        cancelled=tuple(sorted(row[0] for row in rows if row[1] == "failed")),
        requested=tuple(sorted(row[0] for row in rows if row[1] == "running")),
    )


# per call, which was a fifth of bulk enqueue's time.
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def payload_text(payload: Any) -> str:
    """The payload as the JSON text sent; refused (``ValueError``) when jsonb cannot hold it."""
    try:
        text = _ENCODER.encode(payload)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"payload is not JSON-serialisable: {exc}") from None
    reason = unstorable(payload, text)
    if reason is not None:
        raise ValueError(f"payload {reason}")
    return text


# A JSON escape that may stand for what jsonb refuses: NUL, or half of a surrogate pair.
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")
_SURROGATE = re.compile("[\ud800-\udfff]")


def unstorable(payload: Any, text: str) -> str | None:
    """Why jsonb would refuse ``payload`` (whose JSON is ``text``), or None.

    PostgreSQL's jsonb cannot hold a NUL character (``\\u0000``) nor a lone
    surrogate, and its refusal is a multi-part error that quotes the whole
    payload back. Checked before anything is sent; the value is walked only
    when its text holds such an escape (an emoji's surrogate pair is one, and
    passes).
    """
    if _SUSPECT_ESCAPE.search(text) is None:
        return None
    stack = [payload]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)
        elif isinstance(value, str):
            if "\x00" in value:
                return (
                    "holds a NUL character (\\u0000), which PostgreSQL's jsonb cannot store; "
                    "remove it, or encode the value (base64, say)"
                )
            if _SURROGATE.search(value):
                return (
                    "holds a lone surrogate (half of a UTF-16 pair), which PostgreSQL's "
                    "jsonb cannot store"
                )
    return None


class Enqueued(int):
    """The id :func:`enqueue` answers with: an ``int``, and whether the job is new.

    It is the job's id, so code that stores, compares or prints what ``enqueue``
    returned keeps working. With a dedupe key, ``duplicate`` is True when a job of
    the same queue with the same key was already queued or running: nothing was
    inserted, and the id is that job's, the one that will do the work. Without a
    key every job is new.
    """

    duplicate: bool

    def __new__(cls, job_id: int, duplicate: bool = False) -> Enqueued:
        value = super().__new__(cls, job_id)
        value.duplicate = duplicate
        return value

    @property
    def id(self) -> int:
        return int(self)

    @property
    def new(self) -> bool:
        """True when this call inserted the job (the opposite of ``duplicate``)."""
        return not self.duplicate


# How many keyed jobs go in one statement of enqueue_many: each batch is two JSON
# arrays held whole in memory on both sides, and 10,000 rows keep that to a few
# megabytes while the round trips stay a small share of the time.
KEYED_BATCH = 10_000

# How often enqueue with a key runs its statement again when it neither inserted
# nor saw the job holding the key (see sql/enqueue_key.sql); each try has a new
# snapshot, and only a holder that keeps being replaced by new ones within
# milliseconds could use them all up.
_KEY_TRIES = 10


def _check_key(key: str | None) -> None:
    if key is None:
        return
    if not isinstance(key, str):
        raise TypeError(f"a dedupe key is a str, not {type(key).__name__}")
    if not key.strip():
        raise ValueError("a dedupe key is empty; give None for a job without one")


def _dedupe_missing(exc: psycopg.Error, table: JobTable) -> DedupeNotEnabled | None:
    """The error to raise when ``exc`` says the table has no dedupe keys, else None.

    Either the column is missing (undefined column ``dedupe_key``) or it exists
    without the unique index ON CONFLICT needs (invalid column reference).
    """
    primary = exc.diag.message_primary or ""
    missing = isinstance(exc, errors.UndefinedColumn) and "dedupe_key" in primary
    if not missing and not isinstance(exc, errors.InvalidColumnReference):
        return None
    return DedupeNotEnabled(
        f"queue table {table.qualified} has no dedupe keys (the dedupe_key column and its "
        "unique index); add them with `drain init --with dedupe`"
    )


def enqueue_params(
    payload: Any,
    *,
    queue: str,
    run_at: datetime | None,
    delay: float | timedelta | None,
    max_attempts: int,
    key: str | None,
    priority: int | None = None,
) -> dict[str, Any]:
    """The checked parameters of sql/enqueue.sql (sql/enqueue_key.sql with ``key``).

    Shared by :func:`enqueue` and :func:`drain.store.aio.enqueue_async`, so both refuse
    the same arguments with the same errors before anything is sent.
    """
    if run_at is not None and delay is not None:
        raise ValueError("give run_at or delay, not both")
    _check_key(key)
    priorities.check(priority)
    params: dict[str, Any] = {
        "queue": queue,
        "payload": payload_text(payload),
        "run_at": run_at,
        "delay": seconds(delay or 0.0),
        "max_attempts": max_attempts,
    }
    if key is not None:
        params["key"] = key
    return priorities.with_priority(params, priority)


def keyed_answer(row: tuple[Any, ...] | None) -> Enqueued | None:
    """What one run of sql/enqueue_key.sql answered, or None to run it again."""
    return None if row is None else Enqueued(row[0], bool(row[1]))


def key_unsettled(key: str, queue: str) -> DatabaseError:
    """The error once every try of sql/enqueue_key.sql came back without a row."""
    return DatabaseError(
        f"enqueue with key {key!r} on {queue} neither inserted a job nor found the one "
        f"holding the key after {_KEY_TRIES} tries (jobs with that key keep finishing "
        "and being enqueued again)"
    )


def _require_psycopg(conn: object) -> None:
    """A psycopg2 or asyncpg connection is one clear error naming what to use."""
    if not isinstance(conn, psycopg.Connection):
        from drain.store.driver import sync_connection

        sync_connection(conn)


def enqueue(
    conn: psycopg.Connection[Any],
    payload: Any,
    *,
    queue: str = "default",
    run_at: datetime | None = None,
    delay: float | timedelta | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    table: JobTable | None = None,
    key: str | None = None,
    priority: int | None = None,
) -> Enqueued:
    """Insert one job in the caller's current transaction and return its id.

    drain never commits here: the job becomes visible when the caller's own
    transaction commits, together with the data it belongs to (or not at all).

    With ``key``, the job is a duplicate while a job of the same queue with the
    same key is queued or running ("reindex user 42" enqueued after every edit
    runs once per run, not once per edit): nothing is inserted, and the answer is
    that job's id with ``duplicate`` True. Once that job is done or failed the key
    is free again; a transaction that rolls back frees the key it took. The
    duplicate keeps its own payload and run time: the first enqueue wins.

    The table needs ``drain init --with dedupe``; without it a key raises
    :class:`~drain.core.errors.DedupeNotEnabled` (and, as with any failed statement,
    the caller's transaction must be rolled back). Nothing is altered implicitly.

    ``priority`` (higher runs first; None leaves the column's default, 0) needs
    the priority column, or raises :class:`~drain.core.errors.PriorityNotEnabled`.
    """
    _require_psycopg(conn)
    params = enqueue_params(
        payload,
        queue=queue,
        run_at=run_at,
        delay=delay,
        max_attempts=max_attempts,
        key=key,
        priority=priority,
    )
    target = table or JobTable()
    if key is None:
        with priorities.refused_without_column(target):
            named = priorities.statement("enqueue", priority)
            row = conn.execute(statement_for(target, named), params).fetchone()
        assert row is not None
        return Enqueued(row[0])
    return _insert_keyed(conn, target, params, priority)


def _insert_keyed(
    conn: psycopg.Connection[Any], table: JobTable, params: dict[str, Any], priority: int | None
) -> Enqueued:
    """Run sql/enqueue_key.sql until it inserts the job or finds the one holding its key.

    No row means the holder committed while the statement waited on it, or
    finished in between; each try has a new snapshot (``_KEY_TRIES`` at most).
    """
    statement = statement_for(table, priorities.statement("enqueue_key", priority))
    for _ in range(_KEY_TRIES):
        try:
            with priorities.refused_without_column(table):
                answer = keyed_answer(conn.execute(statement, params).fetchone())
        except psycopg.Error as exc:
            missing = _dedupe_missing(exc, table)
            if missing is None:
                raise
            raise missing from exc
        if answer is not None:
            return answer
    raise key_unsettled(params["key"], params["queue"])


def check_many(
    payloads: Iterable[Any],
    run_at: datetime | None,
    delay: float | timedelta | None,
    keys: Iterable[str | None] | None,
) -> dict[str, Any]:
    """Refuse what :func:`enqueue_many` cannot do; the parameters of sql/database_time.sql.

    Shared with :func:`drain.store.aio.enqueue_many_async`: the same checks, in the same
    order, before anything is sent.
    """
    if run_at is not None and delay is not None:
        raise ValueError("give run_at or delay, not both")
    if keys is not None:
        _check_lengths(payloads, keys)
    return {"run_at": run_at, "delay": seconds(delay or 0.0)}


def payload_texts(payloads: Iterable[Any]) -> list[str]:
    """Every payload's JSON, before the COPY starts: one that cannot be stored stops the
    call before anything is sent (mid-COPY it would abort the caller's transaction)."""
    return [payload_text(payload) for payload in payloads]


def copy_row(
    queue: str, text: str, when: datetime, max_attempts: int, priority: int | None = None
) -> tuple[Any, ...]:
    """One row of sql/enqueue_copy.sql (``_priority`` with a priority), in its column
    order (``text``: the payload's JSON)."""
    row = (queue, text, when, max_attempts)
    return row if priority is None else (*row, priority)


def enqueue_many(
    conn: psycopg.Connection[Any],
    payloads: Iterable[Any],
    *,
    queue: str = "default",
    run_at: datetime | None = None,
    delay: float | timedelta | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    table: JobTable | None = None,
    keys: Iterable[str | None] | None = None,
    priority: int | None = None,
) -> int:
    """Insert many jobs in the caller's transaction; returns how many are new.

    Without ``keys`` every job is new and they go in one ``COPY``. With ``keys``
    (one per payload, in the same order; None for a job without a key) a job
    whose key is held by a queued or running job of the queue, or by an earlier
    job of the same call, is skipped, as :func:`enqueue` would, and the count
    says how many were inserted. COPY cannot skip a conflict, so keyed jobs go
    as ``INSERT ... ON CONFLICT DO NOTHING`` in batches of :data:`KEYED_BATCH`
    (sql/enqueue_keys.sql), sorted by key so that two bulk enqueues of the same
    keys never deadlock (new ids follow the keys' order, not the payloads').
    The whole call is held in memory. A table without dedupe keys raises
    :class:`~drain.core.errors.DedupeNotEnabled`. ``priority`` is every job's (see
    :func:`enqueue`).
    """
    _require_psycopg(conn)
    when_params = check_many(payloads, run_at, delay, keys)
    priorities.check(priority)
    target = table or JobTable()
    texts = None if keys is not None else payload_texts(payloads)
    when = conn.execute(statement_for(target, "database_time"), when_params).fetchone()
    assert when is not None
    if texts is None:
        assert keys is not None
        return _enqueue_keyed(conn, target, payloads, keys, queue, when[0], max_attempts, priority)
    named = priorities.statement("enqueue_copy", priority)
    with (
        priorities.refused_without_column(target),
        conn.cursor() as cursor,
        cursor.copy(statement_for(target, named)) as copy,
    ):
        for text in texts:
            copy.write_row(copy_row(queue, text, when[0], max_attempts, priority))
    return len(texts)


def _check_lengths(payloads: Iterable[Any], keys: Iterable[str | None]) -> None:
    """Refuse keys that do not pair with the payloads before anything is sent."""
    if isinstance(keys, str):
        raise TypeError("keys is one str; give a sequence of keys, one per payload")
    if not (isinstance(payloads, Collection) and isinstance(keys, Collection)):
        return  # a generator's length shows when it runs out (zip's strict check)
    if len(payloads) != len(keys):
        raise ValueError(f"{len(payloads)} payloads but {len(keys)} keys; give one key each")


def keyed_batches(
    payloads: Iterable[Any],
    keys: Iterable[str | None],
    queue: str,
    when: datetime,
    max_attempts: int,
    priority: int | None = None,
) -> Iterator[dict[str, Any]]:
    """The parameters of each sql/enqueue_keys.sql batch, the jobs in key order.

    Key order, not the caller's: a key held by another transaction that has not
    committed makes this one wait for it, and two bulk enqueues of the same keys
    in different orders would each wait for the other (a deadlock, one of them
    cancelled). In one order, the one that waits holds only keys the other has
    already passed. The sort is stable, so of two jobs with one key the first
    given is the one inserted; new ids follow the keys' order. Every payload is
    encoded and every key checked before the first batch is yielded, and each
    batch's text is built only when it is asked for.
    """
    rows = []
    try:
        for payload, key in zip(payloads, keys, strict=True):
            _check_key(key)
            rows.append((key, payload_text(payload)))
    except ValueError as exc:
        if not str(exc).startswith("zip()"):
            raise
        raise ValueError(f"payloads and keys differ in length ({exc}); give one key each") from None
    rows.sort(key=lambda row: (row[0] is not None, row[0] or ""))
    for start in range(0, len(rows), KEYED_BATCH):
        batch = rows[start : start + KEYED_BATCH]
        params = {
            "queue": queue,
            "run_at": when,
            "max_attempts": max_attempts,
            "payloads": "[" + ",".join(text for _, text in batch) + "]",
            "keys": _ENCODER.encode([key for key, _ in batch]),
        }
        yield priorities.with_priority(params, priority)


def _enqueue_keyed(
    conn: psycopg.Connection[Any],
    table: JobTable,
    payloads: Iterable[Any],
    keys: Iterable[str | None],
    queue: str,
    when: datetime,
    max_attempts: int,
    priority: int | None = None,
) -> int:
    """Insert keyed jobs in key order, batch by batch; returns how many were new."""
    statement = statement_for(table, priorities.statement("enqueue_keys", priority))
    new = 0
    for params in keyed_batches(payloads, keys, queue, when, max_attempts, priority):
        try:
            with priorities.refused_without_column(table):
                cursor = conn.execute(statement, params)
        except psycopg.Error as exc:
            missing = _dedupe_missing(exc, table)
            if missing is None:
                raise
            raise missing from exc
        new += max(cursor.rowcount, 0)
    return new
