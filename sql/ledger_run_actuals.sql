-- What one run ($run_id) paid for, per model and stage (read-only, for `essaybench estimate
-- --check`): calls, tokens, the recorded cost (unpriced: billed calls without one, so the
-- sum is unknown, never a quiet zero), and the span from its first start to its last end.
SELECT model, stage, count(*) AS calls,
       coalesce(sum(input_tokens), 0) AS input_tokens,
       coalesce(sum(output_tokens), 0) AS output_tokens,
       coalesce(sum(cost_usd), 0) AS cost_usd,
       count(*) FILTER (WHERE cost_usd IS NULL AND status = 'ok') AS unpriced,
       epoch(max(finished_at)) - epoch(min(started_at)) AS wall_s,
       min(started_at) AS first_start, max(finished_at) AS last_end
FROM llm_calls
WHERE run_id = $run_id AND stage IS NOT NULL
GROUP BY model, stage
ORDER BY min(started_at), model;
