INSERT INTO prompt_sets
    (version, snapshot_id, run_id, n_prompts, counts, funnel, jsonl_path, parquet_path, created_at)
VALUES ($version, $snapshot_id, $run_id, $n_prompts, $counts, $funnel, $jsonl_path,
        $parquet_path, $created_at)
ON CONFLICT (version) DO NOTHING;
