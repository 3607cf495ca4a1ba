-- Ledgers created before transport retries and re-asks were counted apart gain the two
-- columns in place; their old rows keep NULL: how their attempts split is not known.
ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS retries INTEGER;
ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS reasks INTEGER;
