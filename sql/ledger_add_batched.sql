-- Calls sent through a provider's batch API (llm.batch) are marked TRUE; NULL: a direct call,
-- or a row written before the column existed (ledger files created before it get it here).
ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS batched BOOLEAN;
