-- nullable_columns: which of the named columns of the queue table allow NULL.
-- drain relies on NOT NULL where the article's table has it; a table made by hand
-- without it passes every other check, and a row with a NULL there fails alone
-- (attempts, max_attempts, payload, created_at) or is never claimed (queue,
-- status, run_at). drain init reports these columns as drift.
-- Parameters: table_oid (oid), columns (text[]).
-- Locks: none.
SELECT a.attname::text
FROM pg_attribute AS a
WHERE a.attrelid = %(table_oid)s::oid
  AND a.attname = ANY (%(columns)s::text[])
  AND a.attnum > 0
  AND NOT a.attisdropped
  AND NOT a.attnotnull
ORDER BY a.attnum
