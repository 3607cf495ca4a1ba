-- The newest successful run of a stage, optionally within one pipeline run.
SELECT run_id, snapshot_id, ended_at
FROM stage_runs
WHERE stage = $stage AND status = 'ok' AND ($run_id IS NULL OR run_id = $run_id)
ORDER BY ended_at DESC
LIMIT 1;
