-- One submission's keys, in one statement (written before its llm_batches row: items without
-- a batch row are never read).
INSERT INTO llm_batch_items SELECT $submission_id, unnest($keys::VARCHAR[]);
