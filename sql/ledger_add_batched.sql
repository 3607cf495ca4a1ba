-- Calls sent through a provider's batch API (llm.batch) are marked; NULL: a direct call, or
-- a ledger written before the column (ledger export and shard merges do not carry it).
ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS batched BOOLEAN;
