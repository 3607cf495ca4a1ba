-- Tokens and latency of the newest $recent ok calls per model and stage (read-only), for
-- `essaybench estimate`: what a model's replies in a stage have recently cost, and the
-- fastest of them (the wall-time lower bound). $exclude: a run whose calls are left out
-- (`estimate --check RUN`: what would have been estimated before RUN); '' leaves none out.
SELECT model, stage, count(*) AS calls,
       avg(input_tokens) AS mean_input_tokens, avg(output_tokens) AS mean_output_tokens,
       median(latency_s) AS median_latency_s, min(latency_s) AS min_latency_s
FROM (
    SELECT model, stage, input_tokens, output_tokens, latency_s,
           row_number() OVER (PARTITION BY model, stage ORDER BY finished_at DESC) AS newest
    FROM llm_calls
    WHERE status = 'ok' AND stage IS NOT NULL
      AND input_tokens IS NOT NULL AND output_tokens IS NOT NULL
      AND run_id IS DISTINCT FROM $exclude
)
WHERE newest <= $recent
GROUP BY model, stage
ORDER BY model, stage;
