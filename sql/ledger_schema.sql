-- The LLM call ledger: one row per finished logical call (retries and re-asks included).
-- Append-only: a failed call stays on record when a later rerun succeeds.
-- The request and reply texts are zstd-compressed: judge requests repeat the rubric and the
-- answer schema, and DuckDB's default string compression (dictionary/FSST, chosen per
-- segment) cost ~110 µs CPU per row to write and checkpoint at the paper's scale against
-- ~50 µs, for a file 8× larger (82 MB against 10 MB for 21,840 calls). Ledgers created
-- before keep their columns as they were.
CREATE TABLE IF NOT EXISTS llm_calls (
    key VARCHAR NOT NULL,             -- hash of endpoint, model id, messages, params, schema, sample
    model VARCHAR NOT NULL,           -- registry name
    endpoint VARCHAR NOT NULL,        -- configured base URL (never a key)
    model_id VARCHAR NOT NULL,        -- the model id requested
    returned_model VARCHAR,           -- the model id the API said it used
    stage VARCHAR,
    tag VARCHAR,
    status VARCHAR NOT NULL,          -- ok | parse_error | api_error | refused | truncated | skipped
    error_kind VARCHAR,
    error VARCHAR,
    -- the canonical JSON the key hashes: endpoint, model id, messages, effective params,
    -- schema, sample index
    request JSON USING COMPRESSION zstd NOT NULL,
    response_text VARCHAR USING COMPRESSION zstd,
    parsed JSON USING COMPRESSION zstd,
    finish_reason VARCHAR,
    input_tokens BIGINT,
    output_tokens BIGINT,
    cost_usd DOUBLE,
    latency_s DOUBLE,
    attempts INTEGER NOT NULL,        -- HTTP requests sent: 1 + retries + reasks
    started_at TIMESTAMPTZ,
    finished_at TIMESTAMPTZ NOT NULL,
    code_version VARCHAR NOT NULL,
    run_id VARCHAR,                   -- the run that paid for the call (NULL: no run, or
                                      -- recorded before calls carried their run)
    retries INTEGER,                  -- of the attempts, re-sent after a transient transport
                                      -- failure (429, 5xx, timeout, dropped connection)
    reasks INTEGER,                   -- of the attempts, sent again because the reply was
                                      -- empty or broke the answer format (NULL: recorded
                                      -- before the two were counted apart)
    cached_input_tokens BIGINT,       -- of input_tokens, served from the provider's prompt
                                      -- cache (NULL: not reported, or recorded before the
                                      -- ledger kept it; the cost then is at the input price)
    batched BOOLEAN                   -- TRUE: answered through a provider's batch API
                                      -- (llm.batch), at its batch price; NULL: a direct call
);
CREATE INDEX IF NOT EXISTS llm_calls_key ON llm_calls (key);
