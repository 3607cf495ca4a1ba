-- For each wanted key: its newest successful call; failing that, its newest call that
-- finished at or after $since (a failure settled earlier in the same run, not re-sent).
SELECT c.*
FROM llm_calls AS c
JOIN wanted AS w ON c.key = w.key
WHERE c.status = 'ok' OR c.finished_at >= $since
QUALIFY row_number() OVER (PARTITION BY c.key
                           ORDER BY (c.status = 'ok') DESC, c.finished_at DESC) = 1;
