"""The claim policy: which queue the next claim takes from, and how many jobs it asks for.

Queues are taken in turn (``rotate``) or in the order given, each drained before
the next (``strict``). A queue with a cap across runs whose claim found the cap
reached is paused until this run records an outcome (one of its own jobs may
have freed a place), or closed for this run when the run holds no job at all:
the runs that hold the places drain it, and this run never polls for one.

Pure arithmetic over what the run has seen (job times, payload sizes, claims the
server gave up on) and the time it is given: no database, no clock of its own,
no lock. The main thread alone asks it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from drain.core.rates import Rate
from drain.core.settings import DEFAULT_MAX_CLAIM_BYTES

# Claim sizes: the first claim of a run, and the size claims keep while jobs are
# slow; fast jobs are claimed for about this much work across the workers.
FIRST_CLAIM = 100
FIRST_CLAIM_PER_WORKER = 10
CLAIM_WORK_SECONDS = 0.25
JOB_SECONDS_SMOOTHING = 0.2
# The next claim goes out while the jobs waiting would last the workers this many
# claims' round trips (see ClaimPolicy.low_water).
LOW_WATER_CLAIMS = 2
# After a claim the server gave up on, claims halve; each claim that passes lets
# them grow back by this factor.
CLAIM_REGROWTH = 1.25


class ClaimRequest(NamedTuple):
    queue: str
    size: int
    # Whether the claim runs under a time limit (see drain.runner.exchange): only
    # a run holding leases needs one, since only their renewals can be held up.
    time_limited: bool = True
    # The queue's cap across runs (--queue-cap), or None: the claim then counts
    # the queue's running jobs under an advisory lock and takes no more than fit.
    cap: int | None = None
    # The queue's rate across runs (--queue-rate), or None: the claim first takes
    # tokens from the queue's bucket in the database and leases no more jobs.
    rate: Rate | None = None


class ClaimPolicy:
    """Claim sizes and queue rotation for one run."""

    def __init__(
        self,
        queues: Sequence[str],
        *,
        batch_size: int,
        concurrency: int,
        max_bytes: int,
        strict: bool = False,
        caps: Mapping[str, int] | None = None,
        rates: Mapping[str, Rate] | None = None,
    ) -> None:
        self.open_queues: deque[str] = deque(queues)
        self.strict = strict
        self.caps = dict(caps or {})
        self.rates = dict(rates or {})
        # rated queues whose bucket was short at their last claim, by when it holds a
        # claim's worth again; a queue leaves it when it is claimed again, so a run
        # that stops between a refill and the claim that would use it still counts
        # the queue as held back by its rate
        # (on the run's clock): not claimed before then
        self.rate_paused: dict[str, float] = {}
        # rated queues closed for this run: their bucket refills after its deadline
        self.rated: set[str] = set()
        self.paused: set[str] = set()  # at their cap until this run records an outcome
        # closed at their cap, left to the runs holding every place (maybe with jobs ready)
        self.capped: set[str] = set()
        self.batch_size = batch_size
        self.concurrency = concurrency
        self.max_bytes = max_bytes
        self.job_seconds = 0.0  # smoothed; 0 until a job has been timed
        self.claim_seconds = 0.0  # a claim's round trip, smoothed; 0 until one came back
        self.claimed_jobs = 0
        self.claimed_bytes = 0  # decoded payload of the jobs claimed so far
        self.cap: int | None = None  # set after a claim the server gave up on
        self.out_of_budget = False

    @classmethod
    def for_run(
        cls,
        queues: Sequence[str],
        batch_size: int,
        concurrency: int,
        *,
        strict: bool = False,
        caps: Mapping[str, int] | None = None,
        rates: Mapping[str, Rate] | None = None,
    ) -> ClaimPolicy:
        return cls(
            queues,
            batch_size=batch_size,
            concurrency=concurrency,
            max_bytes=DEFAULT_MAX_CLAIM_BYTES,
            strict=strict,
            caps=caps,
            rates=rates,
        )

    @property
    def drained(self) -> bool:
        """Every queue came back empty."""
        return not self.open_queues

    def next_claim(
        self, now: float, deadline: float, *, waiting: int, busy: int
    ) -> ClaimRequest | None:
        """The next claim, or None when none fits in what is left of the budget.

        A claim is cut to what the workers can finish before the deadline, going
        by the jobs timed so far; once nothing fits and nothing is left to work
        on, ``out_of_budget`` says so. A capped queue is claimed only for workers
        that are free now: a place under the cap held by a job waiting in this run
        is a place another run could have used.
        """
        free = self.concurrency - waiting - busy
        self._close_rated(deadline)
        ready = [
            name
            for name in self.open_queues
            if name not in self.paused
            and (name not in self.caps or free > 0)
            and self.rate_paused.get(name, now) <= now
        ]
        if not ready:
            return None
        size = self.size()
        if self.job_seconds > 0:
            can_finish = int((deadline - now) * self.concurrency / self.job_seconds)
            size = min(size, can_finish - waiting - busy)
        if size < 1:
            self.out_of_budget = not waiting and not busy
            return None
        queue_name = ready[0]
        self.rate_paused.pop(queue_name, None)
        cap = self.caps.get(queue_name)
        if cap is not None:
            size = min(size, free)
        if not self.strict:
            # the one taken goes to the back: the others come first next time
            self.open_queues.remove(queue_name)
            self.open_queues.append(queue_name)
        return ClaimRequest(queue_name, size, cap=cap, rate=self.rates.get(queue_name))

    def _close_rated(self, deadline: float) -> None:
        """Close the rated queues whose bucket refills only after the deadline: the
        run cannot claim them again, and says so when it ends (exit reason ``rate``)."""
        for name, until in list(self.rate_paused.items()):
            if until >= deadline and name in self.open_queues:
                self.came_back_empty(name)
                self.rated.add(name)

    def rate_short(self, queue_name: str, until: float) -> None:
        """A rated queue's bucket holds a claim's worth again only at ``until``: no
        claim of it before then (the run sleeps; it never asks the database)."""
        self.rate_paused[queue_name] = until

    def rate_wake(self, now: float) -> float | None:
        """Seconds until the first rate-paused queue may claim again, or None."""
        later = [until - now for name, until in self.rate_paused.items() if until > now]
        return min(later) if later else None

    def held_by_rate(self) -> list[str]:
        """The rated queues the rate held back when the run stopped: their bucket was
        short at their last claim, and the run had not claimed them since."""
        return sorted(self.rate_paused.keys() | self.rated)

    def size(self) -> int:
        """How many jobs the next claim asks for, before the budget has its say.

        A claim costs one round trip and one commit whether it brings 10 jobs or
        1,000, so jobs that finish fast are claimed in bulk: enough for about
        ``CLAIM_WORK_SECONDS`` of work across the workers, up to --batch-size.
        Slow jobs are claimed a few at a time (never fewer than the workers), so
        a run holds no leases on work it will not reach soon and several runs
        share a backlog of slow jobs evenly; before any job has been timed a
        claim brings ``FIRST_CLAIM_PER_WORKER`` jobs per worker, up to
        ``FIRST_CLAIM`` or one per worker, whichever is more (500 tasks waiting on
        the network had 100 jobs among them for their first 50 ms). Large payloads
        keep a claim near ``max_bytes`` of decoded payload. Measured with bench/
        (20,000 no-op jobs, fsync on, 2 cores, the run loop alone, medians of
        3): claims of 100 drained 11,100 jobs/s, claims growing to 1,000 drained
        14,400; through a proxy adding 3 ms per round trip, 5,500 and 8,200.
        """
        workers = self.concurrency
        first = max(FIRST_CLAIM, workers)  # a job for every worker, from the start
        size = min(self.batch_size, first, FIRST_CLAIM_PER_WORKER * workers)
        if self.job_seconds > 0:
            fits = math.ceil(CLAIM_WORK_SECONDS * workers / self.job_seconds)
            size = min(self.batch_size, max(workers, fits))
        if self.claimed_bytes > 0:
            per_job = self.claimed_bytes / self.claimed_jobs
            size = min(size, max(1, int(self.max_bytes / per_job)))
        if self.cap is not None:
            size = min(size, self.cap)
        return size

    def low_water(self, claimed: int) -> int:
        """Claim the next batch while this many jobs still wait, so workers never starve.

        Half the last claim: the next claim (and the outcomes riding with it) is
        then worked on by the server while the workers run the second half, so
        the two overlap instead of taking turns. Many workers on jobs that wait
        may run through that half before the claim is back: then as many as the
        workers finish in two claims' round trips (smoothed), at most two per
        worker and a batch. 500 tasks of 50 ms ran through half a claim of 1,000
        in one 50 ms wave, less than a claim's round trip with its outcomes on a
        loaded server, and sat idle for a wave at a time.
        """
        keep = max(min(self.concurrency, self.batch_size // 2), claimed // 2)
        if self.job_seconds > 0 and self.claim_seconds > 0:
            rate = self.concurrency / self.job_seconds
            during = math.ceil(LOW_WATER_CLAIMS * self.claim_seconds * rate)
            keep = max(keep, min(during, 2 * self.concurrency, self.batch_size))
        return keep

    def prefetch(self, on_hand: int) -> bool:
        """Whether the workers will have run ``on_hand`` jobs before a claim sent now
        is back (two round trips, smoothed): then it goes before the last claim is
        decoded (no-op jobs ran through 1,000 in 1.3 ms; a claim took 15). Never
        for slow jobs, nor with over half ``max_bytes`` of payload on hand."""
        if self.job_seconds <= 0 or self.claim_seconds <= 0 or not self.claimed_jobs:
            return False
        rate = self.concurrency / self.job_seconds
        payload = on_hand * self.claimed_bytes / self.claimed_jobs
        return (
            payload <= self.max_bytes / 2
            and on_hand <= LOW_WATER_CLAIMS * self.claim_seconds * rate
        )

    # -- what the run saw ------------------------------------------------------------

    def learn(self, seconds: Iterable[float]) -> None:
        """Fold the times of finished jobs into the smoothed job time.

        Outcomes are on their way, so a place may have come free in a capped
        queue: the paused ones may claim again.
        """
        times = list(seconds)
        if times:
            self.paused.clear()
        for value in times:
            if self.job_seconds <= 0:
                self.job_seconds = value
            else:
                self.job_seconds += JOB_SECONDS_SMOOTHING * (value - self.job_seconds)

    def took(self, jobs: int, payload_bytes: int, round_trip: float = 0.0) -> None:
        """A claim brought ``jobs`` jobs with this much decoded payload, ``round_trip``
        seconds after it was sent."""
        self.claimed_jobs += jobs
        self.claimed_bytes += payload_bytes
        if round_trip > 0:
            if self.claim_seconds <= 0:
                self.claim_seconds = round_trip
            else:
                self.claim_seconds += JOB_SECONDS_SMOOTHING * (round_trip - self.claim_seconds)
        if self.cap is not None:
            self.cap = min(self.batch_size, math.ceil(self.cap * CLAIM_REGROWTH))

    def came_back_empty(self, queue_name: str) -> None:
        self.open_queues.remove(queue_name)
        self.paused.discard(queue_name)

    def resume(self) -> bool:
        """Let paused queues claim again (the run went idle without an outcome); any?"""
        paused = bool(self.paused)
        self.paused.clear()
        return paused

    def at_cap(self, queue_name: str, *, holding: bool) -> None:
        """A claim found ``queue_name`` at its cap across runs.

        A run holding jobs waits for its own outcomes before asking again; a run
        holding none leaves the queue to the runs that hold its places, and
        remembers it in ``capped``: a run that ends then has not drained it.
        """
        if holding:
            self.paused.add(queue_name)
        else:
            self.came_back_empty(queue_name)
            self.capped.add(queue_name)

    def gave_up(self, size: int) -> int:
        """The server gave up on a claim of ``size``: claims halve (never below 1)."""
        self.cap = max(1, size // 2)
        return self.cap
