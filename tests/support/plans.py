"""Catch the plans of drain's own statements and check that they stay linear.

A queue statement's plan depends on what the statistics say, and the statistics
a deployment's table carries (its last run's VACUUM (ANALYZE), with every job
done) are not the ones a benchmark sees. :class:`ExplainingConnection` runs the
statement a ``drain.store`` function sends, with the parameters it passes,
under ``EXPLAIN (ANALYZE, FORMAT JSON, BUFFERS)`` in a transaction that is rolled
back, so the test sees the plan drain would get without changing the table.
The checks then walk the plan tree and name the offending node, with the whole
tree beside it, so a failure reads like the EXPLAIN a person would have run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import errors
from psycopg.abc import Params, QueryNoTemplate
from psycopg.rows import TupleRow

ANALYZE = b"EXPLAIN (ANALYZE, FORMAT JSON, BUFFERS) "
ESTIMATE = b"EXPLAIN (FORMAT JSON) "
# Nodes that read rows of a table (an index scan reads the heap too); the bitmap
# index scans under a Bitmap Heap Scan return row addresses, not rows, and the
# heap scan above them counts the rows.
TABLE_SCANS = frozenset(
    {"Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan", "Tid Scan", "Tid Range Scan"}
)
_REMOVED = ("Rows Removed by Filter", "Rows Removed by Index Recheck")


class PlanCaught(Exception):
    """Raised through the drain function once its statement has been explained.

    The function never reads the result (its statement was rolled back), so the
    plan leaves it by exception, the way a cancelled statement would.
    """

    def __init__(self, plan: Plan) -> None:
        super().__init__("statement explained")
        self.plan = plan


class ExplainingConnection(psycopg.Connection[TupleRow]):
    """A real connection that, while armed, explains what it is asked to execute.

    Armed, ``execute`` runs the statement under EXPLAIN ANALYZE inside a
    transaction it rolls back, with ``statement_timeout`` set to ``timeout`` so a
    quadratic plan fails the test in seconds rather than minutes (its estimated
    plan is shown instead). Unarmed it is an ordinary connection, for set-up.
    """

    armed = False
    timeout = 15.0

    def execute(  # type: ignore[override]
        self,
        query: QueryNoTemplate,
        params: Params | None = None,
        *,
        prepare: bool | None = None,
        binary: bool = False,
    ) -> psycopg.Cursor[TupleRow]:
        if not self.armed:
            return super().execute(query, params, prepare=prepare, binary=binary)
        statement = _as_bytes(query, self)
        try:
            with self.transaction(force_rollback=True), self.cursor() as cursor:
                cursor.execute(
                    "SELECT set_config('statement_timeout', %s, true)",
                    [f"{int(self.timeout * 1000)}ms"],
                )
                cursor.execute(ANALYZE + statement, params)
                row = cursor.fetchone()
        except errors.QueryCanceled:
            with self.transaction(force_rollback=True), self.cursor() as cursor:
                cursor.execute(ESTIMATE + statement, params)
                estimate = cursor.fetchone()
            assert estimate is not None
            plan = Plan(estimate[0][0])
            raise AssertionError(
                f"the statement did not finish within {self.timeout:g} s under EXPLAIN "
                f"ANALYZE; its estimated plan:\n{plan.render()}"
            ) from None
        assert row is not None
        raise PlanCaught(Plan(row[0][0]))


def _as_bytes(query: QueryNoTemplate, conn: psycopg.Connection[Any]) -> bytes:
    if isinstance(query, bytes):
        return query
    if isinstance(query, str):
        return query.encode()
    if isinstance(query, psycopg.sql.Composable):
        return query.as_bytes(conn)
    raise TypeError(f"cannot explain a query of type {type(query).__name__}")


def explain(conn: ExplainingConnection, call: Callable[[ExplainingConnection], object]) -> Plan:
    """The plan of the first statement ``call`` sends through ``conn`` (rolled back)."""
    conn.armed = True
    try:
        call(conn)
    except PlanCaught as caught:
        return caught.plan
    finally:
        conn.armed = False
    raise AssertionError("the call sent no statement to explain")


@dataclass(frozen=True)
class Plan:
    """One EXPLAIN (FORMAT JSON) result: the tree, with the timings when analyzed."""

    document: dict[str, Any]

    @property
    def root(self) -> dict[str, Any]:
        node: dict[str, Any] = self.document["Plan"]
        return node

    @property
    def execution_ms(self) -> float:
        return float(self.document.get("Execution Time", 0.0))

    def nodes(self) -> Iterator[dict[str, Any]]:
        """Every node, InitPlans and SubPlans included, parents before children."""
        stack = [self.root]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.get("Plans", [])))

    def scans(self, relation: str) -> list[dict[str, Any]]:
        return [
            node
            for node in self.nodes()
            if node["Node Type"] in TABLE_SCANS and node.get("Relation Name") == relation
        ]

    def rows_touched(self, relation: str) -> int:
        """Rows the plan read from ``relation``: returned or filtered out, every loop."""
        return sum(touched(node) for node in self.scans(relation))

    def render(self) -> str:
        lines: list[str] = []

        def walk(node: dict[str, Any], depth: int) -> None:
            lines.append("  " * depth + describe(node))
            for child in node.get("Plans", []):
                walk(child, depth + 1)

        walk(self.root, 0)
        if "Execution Time" in self.document:
            lines.append(f"execution {self.execution_ms:.1f} ms")
        return "\n".join(lines)


def touched(node: dict[str, Any]) -> int:
    """Rows one node read over all its loops (EXPLAIN's rows are per loop)."""
    per_loop = float(node.get("Actual Rows", 0)) + sum(float(node.get(k, 0)) for k in _REMOVED)
    return round(per_loop * int(node.get("Actual Loops", 0)))


def describe(node: dict[str, Any]) -> str:
    """One line per node, with what a reader of EXPLAIN ANALYZE looks at first."""
    text = str(node["Node Type"])
    if "Subplan Name" in node:
        text = f"[{node['Subplan Name']}] {text}"
    if "Relation Name" in node:
        text += f" on {node['Relation Name']}"
        if node.get("Alias") not in (None, node["Relation Name"]):
            text += f" {node['Alias']}"
    if "Index Name" in node:
        text += f" using {node['Index Name']}"
    if "Actual Rows" in node:
        text += (
            f" (rows {_count(node['Actual Rows'])} x{node['Actual Loops']} loops,"
            f" estimated {node['Plan Rows']}, {float(node['Actual Total Time']):.1f} ms)"
        )
    else:
        text += f" (estimated rows {node['Plan Rows']})"
    for key in ("Index Cond", "Recheck Cond", "Hash Cond", "Join Filter", "Filter"):
        if key in node:
            text += f" {key.lower()}: {node[key]}"
    for key in ("Rows Removed by Join Filter", *_REMOVED):
        if node.get(key):
            text += f"; {key.lower()}: {_count(node[key])}"
    return text


def _count(value: float) -> str:
    """A row count as EXPLAIN means it: whole, or per loop with two decimals (18+)."""
    number = float(value)
    return f"{number:.0f}" if number.is_integer() else f"{number:.2f}"


def _fail(plan: Plan, problem: str, offenders: list[dict[str, Any]]) -> AssertionError:
    named = "\n".join(f"  {describe(node)}" for node in offenders)
    return AssertionError(f"{problem}:\n{named}\nwhole plan:\n{plan.render()}")


def assert_no_seq_scan(plan: Plan, relation: str, tolerated_rows: int | None = None) -> None:
    """No sequential scan of ``relation``, or none reading over ``tolerated_rows``.

    A scan that reads the whole table costs as much as the table is big, not as
    much as the batch; a table hardly bigger than the batch may still be read
    whole, and the planner rightly does so. Without ``tolerated_rows``, any
    sequential scan fails, even one the execution never reached.
    """
    found = [
        node
        for node in plan.scans(relation)
        if node["Node Type"] == "Seq Scan"
        and (tolerated_rows is None or touched(node) > tolerated_rows)
    ]
    if found:
        limit = "" if tolerated_rows is None else f" reading over {tolerated_rows} rows"
        raise _fail(plan, f"sequential scan of {relation}{limit}", found)


def assert_join_filters_within(plan: Plan, limit: int) -> None:
    """A join filter that throws away more rows than the batch is a quadratic join."""
    found = [
        node
        for node in plan.nodes()
        if float(node.get("Rows Removed by Join Filter", 0)) * int(node.get("Actual Loops", 1))
        > limit
    ]
    if found:
        raise _fail(plan, f"join filter removing more than {limit} rows", found)


def assert_rows_touched_within(
    plan: Plan, relation: str, limit: int, leaving_out: dict[str, Any] | None = None
) -> None:
    """At most ``limit`` rows of ``relation`` read, counting ``leaving_out``'s scan aside."""
    scans = [node for node in plan.scans(relation) if node is not leaving_out]
    total = sum(touched(node) for node in scans)
    if total > limit:
        heaviest = sorted(scans, key=touched, reverse=True)
        raise _fail(plan, f"{total} rows of {relation} touched, over {limit}", heaviest)


def assert_reached_once_by_key(
    plan: Plan,
    relation: str,
    primary_key: str,
    nodes: list[dict[str, Any]],
    most: int,
    *,
    lookups_per_row: bool = False,
) -> None:
    """Each of ``nodes`` finds its rows through the primary key, each row once.

    An index scan of the key, or a bitmap heap scan over the key's index, run
    once and reading at most ``most`` rows; with ``lookups_per_row``, also one
    lookup of the key per row (the inner side of a nested loop that finds at
    most one row each time). A scan repeated per row that reads more than that
    row, or a scan of anything but the key, is what makes a statement's cost
    grow faster than its batch.
    """

    def once_each(node: dict[str, Any]) -> bool:
        loops = int(node.get("Actual Loops", 0))
        if primary_key not in _indexes_used(node) or touched(node) > most:
            return False
        return loops <= 1 or (lookups_per_row and touched(node) <= loops)

    wrong = [node for node in nodes if not once_each(node)]
    if wrong:
        raise _fail(plan, f"rows of {relation} not reached once each through {primary_key}", wrong)


def _indexes_used(node: dict[str, Any]) -> set[str]:
    if node["Node Type"] == "Bitmap Heap Scan":
        return {
            child["Index Name"]
            for child in _descendants(node)
            if child["Node Type"] == "Bitmap Index Scan"
        }
    return {node["Index Name"]} if "Index Name" in node else set()


def _descendants(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for child in node.get("Plans", []):
        yield child
        yield from _descendants(child)


def _claim_limit(plan: Plan) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The claim's LockRows under its Limit, and the InitPlans beside it (the
    claim's look at the queue's head, which is not the Limit's input)."""
    for node in plan.nodes():
        if node["Node Type"] != "Limit":
            continue
        children = node.get("Plans", [])
        beside = [c for c in children if c.get("Parent Relationship") == "InitPlan"]
        inputs = [c for c in children if c.get("Parent Relationship") != "InitPlan"]
        if inputs and inputs[0].get("Node Type") == "LockRows":
            return inputs[0], beside
    raise AssertionError(f"no Limit -> LockRows in the plan:\n{plan.render()}")


def selection_under_lock(plan: Plan) -> dict[str, Any]:
    """The claim's selection: the scan under Limit -> LockRows; fails without that shape."""
    lock_rows, _ = _claim_limit(plan)
    scan: dict[str, Any] = lock_rows.get("Plans", [{}])[0]
    return scan


def head_look(plan: Plan, relation: str) -> list[dict[str, Any]]:
    """The scans of ``relation`` the claim makes to see whether the queue's head
    is a marked row (an InitPlan of its Limit): each must read one row at most."""
    _, beside = _claim_limit(plan)
    nodes = [node for init in beside for node in (init, *_descendants(init))]
    return [
        node
        for node in nodes
        if node["Node Type"] in TABLE_SCANS and node.get("Relation Name") == relation
    ]
