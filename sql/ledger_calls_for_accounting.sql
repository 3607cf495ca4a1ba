-- Every recorded call, with what accounting needs.
SELECT model, stage, status, input_tokens, output_tokens, cost_usd, latency_s, response_text
FROM llm_calls
WHERE ($stage IS NULL OR stage = $stage);
