-- The recorded runs among $run_ids.
SELECT run_id, kind, base_run, from_stage, reuse_from, reuse_scope, reuse_unattributed,
       config_path, config_sha256, flow_run_id, code_version, created_at
FROM runs
WHERE list_contains($run_ids::VARCHAR[], run_id);
