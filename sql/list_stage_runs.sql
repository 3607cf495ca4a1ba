SELECT run_id, stage, status, snapshot_id, rows_in, rows_out, started_at, ended_at,
       code_version, error, pid, host, heartbeat_at, meta
FROM stage_runs
WHERE ($run_id IS NULL OR run_id = $run_id)
ORDER BY started_at DESC
LIMIT $limit;
