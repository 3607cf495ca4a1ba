-- For each key of $keys, the submissions of run $run it was in (a submission never created
-- at the provider not counted): what max_resubmits is checked against.
SELECT i.key, count(*) AS n
FROM llm_batch_items AS i JOIN llm_batches AS b USING (submission_id)
WHERE b.run_id IS NOT DISTINCT FROM $run AND list_contains($keys::VARCHAR[], i.key)
  AND b.error IS DISTINCT FROM 'never created'
GROUP BY i.key;
