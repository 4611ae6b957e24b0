"""Steady state: run after run on one long-lived table, a burst enqueued between runs.

This is where drain lives. A deployment never refills its table and never
analyzes it with the jobs queued: each run ends with its own archive and
``VACUUM (ANALYZE)`` while every job is done, and the next run claims the next
burst under the statistics that end left ("nothing is queued"), over the done
jobs the 7-day retention keeps. A series on one table covers the issue's states:

* run 1: fresh statistics, the burst queued and ``VACUUM (ANALYZE)`` (the state
  every other scenario starts from);
* runs 2 to n: the statistics the previous run's end left, with the done jobs
  of every earlier run under the burst: (k - 1) bursts of history for run k, so
  the 200,000-job series has 200,000 done jobs under its second burst and more
  under the later ones.

Every run is ``drain run`` with its defaults, timed as a whole process; the
suite only enqueues (one ``COPY``) and checkpoints between runs, never vacuums
or analyzes. Figures: each run's jobs/s; steady/first, the median of runs 2 to n
over run 1; the target's ratio, the median of runs 2 to n over the median of
fresh-statistics runs (refilled and ``VACUUM (ANALYZE)`` before each, the
throughput scenario's method, on a table of their own) alternated with them;
and the slowest of runs 2 to n over that same median, since one state's
collapse can hide under a median of healthy runs.
"""

from __future__ import annotations

from bench.measure import BenchError
from bench.scenarios import Check, Context, Outcome, Row, rate_ratio
from bench.systems import DrainCLI, SteadyDrain

NAME = "steady"
TITLE = "Steady state: {runs} drain runs in a row on one table, bursts of {small:,} and {large:,}"

# The targets: steady over fresh, and with 200,000 done jobs of history under the burst.
TARGET_STEADY = 0.9
TARGET_HISTORY = 0.8


def series(
    ctx: Context, outcome: Outcome, burst: int, runs: int, target: str, bound: float
) -> None:
    """One table, ``runs`` runs in a row; a fresh-statistics run alternated before runs 2..n."""
    server = ctx.server
    steady = SteadyDrain(server, key=f"steady@{burst}", label=f"drain run, {burst:,}-job bursts")
    fresh = DrainCLI(server, key=f"fresh@{burst}", label=f"drain run, {burst:,} jobs")
    steady.setup()
    fresh.setup()
    each = Row(f"{steady.label}, runs 2 to {runs} (steady state)", f"steady@{burst}", burst)
    alongside = Row(
        f"{fresh.label} refilled, VACUUM (ANALYZE) before each run (fresh statistics), "
        f"alternated with runs 2 to {runs}",
        f"fresh@{burst}",
        burst,
    )
    vacuumed = analyzed = 0
    for number in range(1, runs + 1):
        if number > 1:
            fresh.fill(burst)
            result = fresh.run(burst)
            alongside.seconds.add(result.seconds)
            ctx.log(f"  {alongside.label}: {burst / result.seconds:,.0f} jobs/s")
        history = steady.done_rows()
        if number == 1:
            steady.fresh(burst)
            state = "statistics fresh (VACUUM (ANALYZE) with the burst queued)"
        else:
            steady.burst(burst)
            state = f"the statistics run {number - 1} left"
            if steady.analyzes() != analyzed:
                raise BenchError(f"{steady.label}: the table was analyzed between runs")
        row = Row(f"{steady.label}, run {number}: {state}", f"steady@{burst}#{number}", burst)
        result = steady.run(burst)
        row.seconds.add(result.seconds)
        row.add("done_under_burst", history)
        vacuumed += bool(DrainCLI.summary(result).get("vacuumed"))
        analyzed = steady.analyzes()
        outcome.rows.append(row)
        if number > 1:
            each.seconds.add(result.seconds)
        ctx.log(
            f"  run {number}/{runs} {steady.label}: {burst / result.seconds:,.0f} jobs/s, "
            f"{result.seconds:.3f} s, {history:,} done jobs under the burst"
        )
    outcome.rows += [each, alongside]
    first = outcome.row(f"steady@{burst}#1")
    assert first is not None
    bursts = f"{burst:,}-job bursts"
    outcome.facts.setdefault("steady_over_first", {})[bursts] = round(
        each.rate.median / first.rate.median, 3
    )
    # The median hides one collapsed run among healthy ones; the slowest shows it.
    outcome.facts.setdefault("slowest_steady_run_over_fresh", {})[bursts] = round(
        each.rate.minimum / alongside.rate.median, 3
    )
    outcome.facts.setdefault("runs_that_vacuumed", {})[bursts] = f"{vacuumed} of {runs}"
    ratio = rate_ratio(outcome, f"steady@{burst}", f"fresh@{burst}")
    outcome.checks.append(Check(target, ratio, bound))


def run(ctx: Context) -> Outcome:
    small, large = ctx.size(20_000, 2_000), ctx.size(200_000, 4_000)
    runs = ctx.size(max(6, ctx.runs), 3)
    outcome = Outcome(NAME, TITLE.format(runs=runs, small=small, large=large))
    steady = f"steady state / fresh statistics, {small:,}-job bursts"
    series(ctx, outcome, small, runs, steady, TARGET_STEADY)
    history = (
        f"steady state / fresh statistics, {large:,}-job bursts "
        f"over {large:,} or more done jobs of history"
    )
    series(ctx, outcome, large, runs, history, TARGET_HISTORY)
    return outcome
