-- The newest successful call for each wanted key (keys arrive as the registered table `wanted`)
-- that the reuse scope allows: any run ($any_run), one of $runs, or a call recorded before
-- rows carried a run id ($unattributed). Only the columns a ChatResult is rebuilt from: the
-- stored request (kilobytes per row) stays put.
SELECT c.key, c.model, c.status, c.response_text, c.parsed, c.returned_model, c.finish_reason,
       c.input_tokens, c.output_tokens, c.cached_input_tokens, c.latency_s, c.cost_usd, c.attempts, c.retries,
       c.reasks, c.error_kind, c.error, c.started_at, c.finished_at, c.stage, c.tag, c.batched
FROM llm_calls AS c
JOIN wanted AS w ON c.key = w.key
WHERE c.status = 'ok'
  AND ($any_run OR list_contains($runs::VARCHAR[], c.run_id)
       OR ($unattributed AND c.run_id IS NULL))
QUALIFY row_number() OVER (PARTITION BY c.key ORDER BY c.finished_at DESC) = 1;
