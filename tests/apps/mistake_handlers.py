"""Handlers for the catalogue of mistakes (tests/test_mistakes.py).

``talks`` prints to stdout as many a user's handler does, which must never spoil
``drain run --json``; ``breaks`` raises, so ``--verbose`` must show why.
"""

from __future__ import annotations

import drain


def talks(job: drain.Job) -> None:
    print(f"handling job {job.id}")


def breaks(job: drain.Job) -> None:
    raise ValueError("the mailer refused the address")
