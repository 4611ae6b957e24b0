"""drain's benchmark suite: drain against the raw protocol and the known Postgres queues.

Run it from the repository root with ``python -m bench`` (``--help`` for the
options, ``--quick`` for a check that finishes in under a minute). Every system
runs as a process a user would start, systems alternate run by run, and ratios
are taken between figures of the same invocation. See BENCHMARKS.md.
"""
