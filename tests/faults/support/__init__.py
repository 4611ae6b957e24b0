"""What the fault scenarios are built from: real runs in subprocesses, the audit
of the ledger the handlers write (tests/apps/ledger_writer.py), roles, relays
that cut or delay replies, and the settling loop that runs until a queue is done."""
