-- The keys of $keys already in a batch of run $run that is not finished (submitting or open).
SELECT i.key, b.submission_id, b.batch_id, b.provider, b.model, b.state, b.n_items, b.created_at
FROM llm_batch_items AS i JOIN llm_batches AS b USING (submission_id)
WHERE b.state IN ('submitting', 'open') AND b.run_id IS NOT DISTINCT FROM $run
  AND list_contains($keys::VARCHAR[], i.key)
ORDER BY b.created_at, i.key;
