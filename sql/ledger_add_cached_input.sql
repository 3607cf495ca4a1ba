-- Ledgers created before cached input tokens were kept gain the column in place; their old
-- rows keep NULL: what the provider served from its cache is not known, and their cost
-- (recorded at the input price) stays what it was.
ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS cached_input_tokens BIGINT;
