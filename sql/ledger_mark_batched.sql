-- The calls of $keys recorded under run $run since $since (the results of one batch, just
-- written) are marked as sent through a batch API.
UPDATE llm_calls SET batched = TRUE
WHERE list_contains($keys::VARCHAR[], key) AND run_id IS NOT DISTINCT FROM $run
  AND finished_at >= $since AND batched IS NULL;
