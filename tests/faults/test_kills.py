"""Scenario 2: racing runs under 30+ random SIGKILLs lose nothing.

Duplicates are allowed only for attempts whose run was killed; everything is
finished by one more run started one lease after the last kill.
"""

from __future__ import annotations

import itertools
import os
import random
from typing import Any

import psycopg
import pytest

from tests.faults.conftest import Figures
from tests.faults.support import ledger_audit
from tests.faults.support.chaos import Chaos, analyse, chaos_payloads
from tests.faults.support.processes import Runs

pytestmark = pytest.mark.faults

LEASE = 3.0
SLOTS = 8
PERIOD = 0.5  # a new run every half second while a slot is free
MAX_ATTEMPTS = 25  # kills may strand one job again and again; it must still end done


def test_sigkills_lose_nothing_and_duplicate_only_killed_attempts(
    dsn: str,
    ledger_conn: psycopg.Connection[Any],
    runs: Runs,
    soak: bool,
    figures: Figures,
) -> None:
    seed = int(os.environ.get("DRAIN_FAULT_SEED", random.randrange(2**32)))
    rng = random.Random(seed)
    jobs = 20_000 if soak else 10_000
    kills_by_test = 100 if soak else 30
    payloads = chaos_payloads(rng, jobs, in_handler=6, after_return=6)
    ledger_audit.add_payload_jobs(ledger_conn, payloads, max_attempts=MAX_ATTEMPTS)

    chaos = Chaos(
        runs,
        dsn,
        ledger_conn,
        rng=rng,
        jobs=jobs,
        slots=SLOTS,
        lease=LEASE,
        period=PERIOD,
        kills_by_test=kills_by_test,
        options=["--concurrency", "2", "--batch-size", "20"],
    )
    chaos.storm(timeout=240)
    final = chaos.finish(timeout=120)
    result = chaos.result

    context = f"seed {seed}"
    assert result.kills >= 30, f"only {result.kills} kills landed ({context})"
    assert final.process.returncode == 0, final.stderr
    audit = ledger_audit.audit(ledger_conn)
    audit.assert_ok()
    assert audit.statuses == {"done": jobs}, context
    analysis = analyse(audit, result.kill_times)
    assert analysis.unexplained_repeats == [], context
    survivors = [code for code in result.exit_codes if code != -9]
    # a survivor whose jobs were taken over (a kill left its leases to run out
    # meanwhile) ends lost, exit 1; no survivor fails otherwise
    assert set(survivors) <= {0, 1}, f"runs that were not killed exited {survivors} ({context})"
    reasons = {summary["exit_reason"] for summary in result.summaries}
    assert reasons <= {"drained", "lost"}, f"{reasons} ({context})"
    stale_rejected = sum(summary["lost"] for summary in result.summaries)
    figures(
        "2",
        seed=seed,
        jobs=jobs,
        slots=SLOTS,
        runs_started=len(result.run_starts),
        kills=result.kills,
        kills_by_test=result.kills_by_test,
        kills_by_handler=result.kills_by_handler,
        lost=jobs - audit.count("done") - audit.count("failed"),
        executed_more_than_once=analysis.executed_more_than_once,
        repeats_cut_in_handler=analysis.killed_in_handler,
        repeats_after_return=analysis.killed_after_return,
        attempts_claimed_never_started=analysis.killed_before_handler,
        unexplained_repeats=len(analysis.unexplained_repeats),
        stale_completions_rejected=stale_rejected,
        reaped_by_final_run=final.summary()["reaped"],
        lease_s=LEASE,
        run_period_s=PERIOD,
        longest_gap_between_run_starts_s=round(
            max(b - a for a, b in itertools.pairwise(result.run_starts)),
            2,
        ),
        kill_to_reexecution=analysis.delay_figures(),
        exit_codes=sorted(set(result.exit_codes)),
    )
