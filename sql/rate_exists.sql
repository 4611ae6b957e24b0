-- rate_exists: whether the rate buckets' table (rate_table.sql) is there yet.
-- Parameters: rates (text: the qualified name, quoted as an identifier).
-- Locks: none.
SELECT to_regclass(%(rates)s) IS NOT NULL
