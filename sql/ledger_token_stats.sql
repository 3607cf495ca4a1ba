-- Tokens and latency of the newest $recent ok calls per model and stage (read-only), for
-- `essaybench estimate`: what a model's replies in a stage have recently cost.
SELECT model, stage, count(*) AS calls,
       avg(input_tokens) AS mean_input_tokens, avg(output_tokens) AS mean_output_tokens,
       median(latency_s) AS median_latency_s
FROM (
    SELECT model, stage, input_tokens, output_tokens, latency_s,
           row_number() OVER (PARTITION BY model, stage ORDER BY finished_at DESC) AS newest
    FROM llm_calls
    WHERE status = 'ok' AND stage IS NOT NULL
      AND input_tokens IS NOT NULL AND output_tokens IS NOT NULL
)
WHERE newest <= $recent
GROUP BY model, stage
ORDER BY model, stage;
