INSERT INTO stage_runs
    (stage_run_id, run_id, stage, status, upstream_snapshot_ids, params, code_version,
     rows_in, started_at, pid, host, heartbeat_at)
VALUES ($stage_run_id, $run_id, $stage, 'running', $upstream_snapshot_ids, $params,
        $code_version, $rows_in, $started_at, $pid, $host, $started_at);
