SELECT version, snapshot_id, run_id, n_prompts, counts, funnel, jsonl_path, parquet_path, created_at
FROM prompt_sets
WHERE version = $version;
