-- Rows of another ledger (a shard's, as the registered table `batch`) that this ledger does
-- not hold yet: a call is the same call when its key, run and finish time agree, so merging
-- the same shard ledger twice adds nothing.
INSERT INTO llm_calls BY NAME
SELECT b.* FROM batch AS b
WHERE NOT EXISTS (
    SELECT 1 FROM llm_calls AS c
    WHERE c.key = b.key AND c.finished_at = b.finished_at
      AND c.run_id IS NOT DISTINCT FROM b.run_id);
