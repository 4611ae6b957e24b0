-- rate_refund: give back the tokens a rated claim took but did not use (the
-- queue had fewer ready jobs than the room, or the payload limit stopped the
-- claim short), so a start counts only when a job was leased. Never above the
-- burst. Its own short transaction, after the claim committed.
-- Parameters: jobs_table (text), queue (text), tokens (int).
-- Locks: the bucket's row, for this statement only.
UPDATE {rates}
SET tokens = least(burst, tokens + %(tokens)s)
WHERE jobs_table = %(jobs_table)s AND queue = %(queue)s
