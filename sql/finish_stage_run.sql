UPDATE stage_runs
SET status = $status, snapshot_id = $snapshot_id, rows_in = COALESCE($rows_in, rows_in),
    rows_out = $rows_out, meta = $meta, ended_at = $ended_at, error = $error
WHERE stage_run_id = $stage_run_id;
