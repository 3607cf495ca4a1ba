-- A submission's new state (batch_id, provider status and error kept when NULL is given).
UPDATE llm_batches SET state = $state, batch_id = coalesce($batch_id, batch_id),
    provider_status = coalesce($provider_status, provider_status),
    error = coalesce($error, error), updated_at = $now
WHERE submission_id = $submission_id;
