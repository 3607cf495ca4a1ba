-- Stage runs of one run ($run_id), or the one that wrote a snapshot ($snapshot_id), newest
-- first, with what they read and their parameters (any status: a killed run's stage runs
-- still name their upstream and parameters).
SELECT run_id, stage, status, snapshot_id, upstream_snapshot_ids, params, started_at
FROM stage_runs
WHERE ($run_id IS NULL OR run_id = $run_id)
  AND ($snapshot_id IS NULL OR snapshot_id = $snapshot_id)
ORDER BY started_at DESC;
