-- The keys of $keys that were in a collected submission of run $run (their results, or their
-- failures, are in llm_calls): a later process of the run serves them, never submits them
-- again. `since`: when the key's first such submission was created.
SELECT i.key, min(b.created_at) AS since
FROM llm_batch_items AS i JOIN llm_batches AS b USING (submission_id)
WHERE b.state = 'collected' AND b.run_id IS NOT DISTINCT FROM $run
  AND list_contains($keys::VARCHAR[], i.key)
GROUP BY i.key;
