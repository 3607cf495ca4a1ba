SELECT snapshot_id, stage, path, content_hash, n_rows, upstream_snapshot_ids, meta, created_at
FROM snapshots
WHERE snapshot_id = $snapshot_id;
