"""The fault-injection suite: real runs, a real server, a ledger, and the invariants."""
