-- Prompt rotation (bench/rotation.py): which prompts each run used, in which role.
-- One row per (run, prompt), written when the run's generate stage starts (a killed run
-- keeps its selection; its rerun reuses it). week: the run's place in the rotation (1, 2,
-- ...); core_fingerprint: hash of the run's sorted core ids (a change of core shows);
-- core_settings: hash of the settings the core depends on.
CREATE TABLE IF NOT EXISTS prompt_usage (
    run_id VARCHAR NOT NULL,
    week INTEGER NOT NULL,
    prompt_set_version VARCHAR NOT NULL,
    prompt_id VARCHAR NOT NULL,
    genre VARCHAR,
    prompt_set VARCHAR NOT NULL,        -- open | constrained
    role VARCHAR NOT NULL,              -- core | rotated
    core_fingerprint VARCHAR NOT NULL,
    core_settings VARCHAR NOT NULL,
    recorded_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (run_id, prompt_id)
);
