INSERT INTO llm_batches (submission_id, batch_id, provider, model, endpoint, run_id, state,
                         provider_status, n_items, created_at, updated_at, error)
VALUES ($submission_id, NULL, $provider, $model, $endpoint, $run, 'submitting', NULL,
        $n_items, $now, $now, NULL);
