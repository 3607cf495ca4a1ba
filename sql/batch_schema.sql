-- Provider batches (llm.batch), kept in the call ledger's file: one row per submission,
-- written BEFORE the batch is created at the provider, so a killed process finds it again.
-- state: submitting (intent recorded; the provider's id not yet known) -> open (created,
-- batch_id known) -> collected (its results are in llm_calls); or failed (the provider
-- refused or failed the batch as a whole; its items were handled by the on_expired policy).
CREATE TABLE IF NOT EXISTS llm_batches (
    submission_id VARCHAR PRIMARY KEY,   -- ours; sent as metadata where the provider keeps it
    batch_id VARCHAR,                    -- the provider's id (NULL while submitting)
    provider VARCHAR NOT NULL,           -- openai | anthropic
    model VARCHAR NOT NULL,              -- registry name
    endpoint VARCHAR NOT NULL,           -- configured base URL (never a key)
    run_id VARCHAR,                      -- the run that pays for it
    state VARCHAR NOT NULL,
    provider_status VARCHAR,             -- the provider's last status word
    n_items INTEGER NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    error VARCHAR                        -- why it failed as a whole (redacted)
);
-- The calls in each submission: custom_id = the call's ledger key.
CREATE TABLE IF NOT EXISTS llm_batch_items (
    submission_id VARCHAR NOT NULL,
    key VARCHAR NOT NULL
);
CREATE INDEX IF NOT EXISTS llm_batch_items_key ON llm_batch_items (key);
