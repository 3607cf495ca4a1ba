SELECT model, stage, status, count(*) AS calls, sum(attempts) AS attempts,
       sum(retries) AS retries, sum(reasks) AS reasks,
       sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
       sum(cost_usd) AS cost_usd
FROM llm_calls
GROUP BY ALL
ORDER BY model, stage, status;
