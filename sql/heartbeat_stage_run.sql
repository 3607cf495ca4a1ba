-- A running stage is alive: refreshed every few tens of seconds while it computes.
UPDATE stage_runs
SET heartbeat_at = $heartbeat_at
WHERE stage_run_id = $stage_run_id AND status = 'running';
