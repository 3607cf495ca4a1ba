-- A run is recorded once, when it starts; recording it again (a retried flow run) keeps the first.
INSERT INTO runs
    (run_id, kind, base_run, from_stage, reuse_from, reuse_scope, reuse_unattributed,
     config_path, config_sha256, flow_run_id, code_version, created_at)
VALUES ($run_id, $kind, $base_run, $from_stage, $reuse_from, $reuse_scope, $reuse_unattributed,
        $config_path, $config_sha256, $flow_run_id, $code_version, $created_at)
ON CONFLICT (run_id) DO NOTHING;
