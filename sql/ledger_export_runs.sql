-- Every recorded call of the runs in $runs (and, with $unattributed, those recorded before
-- rows carried a run id): what a run's shards may be served instead of sending.
SELECT * REPLACE (request::VARCHAR AS request, parsed::VARCHAR AS parsed) FROM llm_calls
WHERE list_contains($runs::VARCHAR[], run_id) OR ($unattributed AND run_id IS NULL)
ORDER BY finished_at, key;
