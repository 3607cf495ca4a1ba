-- Snapshots are immutable and content-addressed: writing the same content twice is a no-op.
INSERT INTO snapshots
    (snapshot_id, stage, path, content_hash, n_rows, upstream_snapshot_ids, meta, created_at)
VALUES ($snapshot_id, $stage, $path, $content_hash, $n_rows, $upstream_snapshot_ids, $meta, $created_at)
ON CONFLICT (snapshot_id) DO NOTHING;
