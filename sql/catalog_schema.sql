-- The catalog: one row per stage run and per snapshot, one per published prompt set.
CREATE TABLE IF NOT EXISTS snapshots (
    snapshot_id VARCHAR PRIMARY KEY,  -- "<stage>-<content hash>"
    stage VARCHAR NOT NULL,
    path VARCHAR NOT NULL,            -- relative to the store root
    content_hash VARCHAR NOT NULL,    -- sha256 of the canonical rows and meta
    n_rows BIGINT NOT NULL,
    upstream_snapshot_ids VARCHAR[] NOT NULL,
    meta JSON,
    created_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE IF NOT EXISTS stage_runs (
    stage_run_id VARCHAR PRIMARY KEY,
    run_id VARCHAR NOT NULL,
    stage VARCHAR NOT NULL,
    status VARCHAR NOT NULL,          -- running | ok | failed (running, process gone: abandoned)
    snapshot_id VARCHAR,              -- null until the stage succeeds
    upstream_snapshot_ids VARCHAR[] NOT NULL,
    params JSON NOT NULL,
    code_version VARCHAR NOT NULL,
    rows_in BIGINT,
    rows_out BIGINT,                  -- rows the stage kept
    meta JSON,                        -- facts of this run (timings, counts)
    started_at TIMESTAMPTZ NOT NULL,
    ended_at TIMESTAMPTZ,
    error VARCHAR,
    pid INTEGER,                      -- the process running the stage, on host: a running
    host VARCHAR,                     -- row whose process is gone is listed as abandoned
    heartbeat_at TIMESTAMPTZ          -- refreshed while it runs (a stale one: abandoned)
);

CREATE TABLE IF NOT EXISTS prompt_sets (
    version VARCHAR PRIMARY KEY,      -- content hash of prompts and labels
    snapshot_id VARCHAR NOT NULL,     -- the classify snapshot it was frozen from
    run_id VARCHAR NOT NULL,
    n_prompts BIGINT NOT NULL,
    counts JSON NOT NULL,             -- genre x set
    funnel JSON NOT NULL,
    jsonl_path VARCHAR NOT NULL,
    parquet_path VARCHAR NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);

-- One row per benchmark run: what it is and whose LLM calls it may serve (its lineage).
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY,
    kind VARCHAR NOT NULL,            -- run | rerun
    base_run VARCHAR,                 -- rerun: the run it continues (snapshots and calls)
    from_stage VARCHAR,               -- the first stage the run computes
    reuse_from VARCHAR,               -- run --reuse-from: a run whose calls it may serve
    reuse_scope VARCHAR[] NOT NULL,   -- every run whose calls it may serve, itself first
    reuse_unattributed BOOLEAN NOT NULL,  -- also calls recorded before run ids (a rerun of such a run)
    config_path VARCHAR,              -- the benchmark config, as given
    config_sha256 VARCHAR,            -- and the hash of its bytes when the run started
    flow_run_id VARCHAR,              -- the Prefect flow run, when Prefect ran it
    code_version VARCHAR NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);

-- Gold sets attached to a published prompt set (reference answers and acceptance criteria
-- by prompt id; essaybench gold attach). Never edited: a changed set is a new version.
CREATE TABLE IF NOT EXISTS gold_sets (
    prompt_set_version VARCHAR NOT NULL,  -- the prompt set it is attached to
    version VARCHAR NOT NULL,         -- the set's own version (g1, spot-v3, ...)
    sha256 VARCHAR NOT NULL,          -- of its canonical content (bench/gold.py)
    n_items BIGINT NOT NULL,
    n_criteria BIGINT NOT NULL,       -- items with acceptance criteria
    format VARCHAR NOT NULL,          -- yaml | spot_jsonl: the file it was attached from
    source VARCHAR NOT NULL,          -- that file, as given
    path VARCHAR NOT NULL,            -- its canonical JSON, relative to the store root
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (prompt_set_version, version)
);
