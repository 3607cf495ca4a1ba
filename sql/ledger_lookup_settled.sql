-- For each wanted key: its newest successful call; failing that, its newest call that
-- finished at or after $since (a failure settled earlier in the same run, not re-sent).
-- Only calls the reuse scope allows (as ledger_lookup_ok), and only the columns a
-- ChatResult is rebuilt from.
SELECT c.key, c.model, c.status, c.response_text, c.parsed, c.returned_model, c.finish_reason,
       c.input_tokens, c.output_tokens, c.cached_input_tokens, c.latency_s, c.cost_usd, c.attempts, c.retries,
       c.reasks, c.error_kind, c.error, c.started_at, c.finished_at, c.stage, c.tag, c.batched
FROM llm_calls AS c
JOIN wanted AS w ON c.key = w.key
WHERE (c.status = 'ok' OR c.finished_at >= $since)
  AND ($any_run OR list_contains($runs::VARCHAR[], c.run_id)
       OR ($unattributed AND c.run_id IS NULL))
QUALIFY row_number() OVER (PARTITION BY c.key
                           ORDER BY (c.status = 'ok') DESC, c.finished_at DESC) = 1;
