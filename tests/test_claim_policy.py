"""The claim policy on its own: no database, no clock but the one each test passes."""

from __future__ import annotations

import pytest

from drain.runner.policy import FIRST_CLAIM, ClaimPolicy, ClaimRequest

MB = 1024 * 1024


def policy(queues: tuple[str, ...] = ("default",), **settings: int) -> ClaimPolicy:
    values = {"batch_size": 1000, "concurrency": 1, "max_bytes": 16 * MB, **settings}
    return ClaimPolicy(queues, **values)


def test_the_first_claim_brings_ten_jobs_per_worker_up_to_a_hundred() -> None:
    assert policy(concurrency=1).size() == 10
    assert policy(concurrency=4).size() == 40
    assert policy(concurrency=50).size() == FIRST_CLAIM
    assert policy(concurrency=4, batch_size=25).size() == 25


def test_the_first_claim_of_many_workers_brings_one_job_each() -> None:
    assert policy(concurrency=500).size() == 500
    assert policy(concurrency=2000).size() == 1000  # up to a batch


def test_fast_jobs_are_claimed_in_bulk_and_slow_ones_a_few_at_a_time() -> None:
    fast = policy(concurrency=2)
    fast.learn([0.0001] * 5)
    assert fast.size() == 1000  # a quarter second of work is 5,000 jobs: capped by the batch
    slow = policy(concurrency=3)
    slow.learn([2.0])
    assert slow.size() == 3  # never fewer than the workers


def test_the_job_time_is_smoothed_not_replaced() -> None:
    learned = policy()
    learned.learn([1.0])
    learned.learn([0.0])
    assert learned.job_seconds == pytest.approx(0.8)


def test_large_payloads_keep_a_claim_near_the_byte_cap() -> None:
    big = policy(concurrency=8)
    big.took(10, 40 * MB)  # 4 MB a job
    assert big.size() == 4
    huge = policy()
    huge.took(1, 64 * MB)
    assert huge.size() == 1  # never below one job


def test_a_claim_is_cut_to_what_the_budget_lets_the_workers_finish() -> None:
    timed = policy(concurrency=2)
    timed.learn([1 / 64])
    assert timed.next_claim(0.0, 10.0, waiting=0, busy=0) == ClaimRequest("default", 32)
    # 1/8 s left, two workers, 1/64 s a job: 16 jobs fit, minus those already held
    assert timed.next_claim(9.875, 10.0, waiting=0, busy=0) == ClaimRequest("default", 16)
    assert timed.next_claim(9.875, 10.0, waiting=10, busy=2) == ClaimRequest("default", 4)
    assert timed.next_claim(9.999, 10.0, waiting=0, busy=0) is None
    assert timed.out_of_budget
    assert not policy().out_of_budget


def test_nothing_to_work_on_but_no_room_left_is_not_out_of_budget_while_jobs_work() -> None:
    timed = policy()
    timed.learn([1.0])
    assert timed.next_claim(9.5, 10.0, waiting=0, busy=1) is None
    assert not timed.out_of_budget


def test_queues_take_turns_and_an_empty_one_drops_out() -> None:
    rotation = policy(("emails", "reports", "thumbnails"))
    asked = [rotation.next_claim(0.0, 60.0, waiting=0, busy=0) for _ in range(4)]
    assert [request.queue for request in asked if request] == [
        "emails",
        "reports",
        "thumbnails",
        "emails",
    ]
    rotation.came_back_empty("reports")
    rotation.came_back_empty("emails")
    assert not rotation.drained
    rotation.came_back_empty("thumbnails")
    assert rotation.drained
    assert rotation.next_claim(0.0, 60.0, waiting=0, busy=0) is None


def test_a_claim_the_server_gave_up_on_halves_claims_which_then_grow_back() -> None:
    halving = policy(concurrency=10)
    assert halving.gave_up(100) == 50
    assert halving.size() == 50
    assert halving.gave_up(1) == 1  # never below one job
    for _ in range(3):
        halving.took(1, 100)
    assert halving.size() == 4  # 1, then 1.25 times as many, rounded up: 2, 3, 4


def test_the_next_claim_is_due_when_half_the_last_one_is_left() -> None:
    assert policy(concurrency=4).low_water(1000) == 500
    assert policy(concurrency=4).low_water(6) == 4  # never below the workers
    assert policy(concurrency=4, batch_size=4).low_water(4) == 2


def test_many_workers_on_waiting_jobs_claim_two_round_trips_ahead() -> None:
    """500 workers on 50 ms jobs finish 10,000 a second: with claims coming back in
    60 ms, two round trips are 1,200 jobs, cut to two per worker and a batch."""
    waiting = policy(concurrency=500)
    waiting.learn([0.05])
    assert waiting.low_water(1000) == 500  # no claim timed yet: half the last claim
    waiting.took(1000, 10_000, round_trip=0.06)
    assert waiting.low_water(1000) == 1000
    quick = policy(concurrency=500)
    quick.learn([0.05])
    quick.took(1000, 10_000, round_trip=0.002)
    assert quick.low_water(1000) == 500  # 40 jobs in two round trips: half the claim
    slow = policy(concurrency=4)
    slow.learn([1.0])
    slow.took(4, 40, round_trip=0.5)
    assert slow.low_water(4) == 4  # slow jobs: never more than the workers' share


def test_the_next_claim_goes_before_the_last_is_decoded_only_for_jobs_faster_than_a_claim() -> None:
    """No-op jobs run through a claim of 1,000 in a millisecond or two, where the claim
    takes 15 ms: the next claim goes out first. Jobs that outlast a round trip never
    hold a second claim's leases for it."""
    fast = policy()
    assert not fast.prefetch(1000)  # nothing timed yet
    fast.learn([2e-6])
    assert not fast.prefetch(1000)  # no claim timed yet
    fast.took(1000, 10_000, round_trip=0.015)
    assert fast.prefetch(1000)
    assert fast.prefetch(15_000)  # 15,000 jobs in two 15 ms round trips at 2 µs each
    assert not fast.prefetch(15_001)
    slow = policy(concurrency=8)
    slow.learn([0.01])
    slow.took(200, 2_000, round_trip=0.005)
    assert not slow.prefetch(200)  # 8 jobs per round trip
    large = policy()
    large.learn([2e-6])
    large.took(4, 16 * MB, round_trip=0.2)  # payloads of 4 MB
    assert large.prefetch(2)  # 8 MB on hand: half the byte cap
    assert not large.prefetch(3)  # more would put over 1.5 claims' bytes in memory
