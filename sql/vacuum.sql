-- vacuum: clean the queue table's dead rows and refresh its statistics. A
-- suspending compute may never give autovacuum its chance, and a queue table is
-- all updates and deletes, so a run that is awake anyway cleans up after itself.
-- SKIP_LOCKED makes a second run's vacuum skip the table instead of waiting while
-- another run (or autovacuum) is vacuuming it: one at a time, with no session state.
-- Runs outside any transaction (autocommit). Parameters: none.
-- Locks: SHARE UPDATE EXCLUSIVE on the table (claims and completions go on).
VACUUM (ANALYZE, SKIP_LOCKED) {jobs}
