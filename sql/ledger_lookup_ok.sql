-- The newest successful call for each wanted key (keys arrive as the registered table `wanted`).
SELECT c.*
FROM llm_calls AS c
JOIN wanted AS w ON c.key = w.key
WHERE c.status = 'ok'
QUALIFY row_number() OVER (PARTITION BY c.key ORDER BY c.finished_at DESC) = 1;
