SELECT version
FROM prompt_sets
ORDER BY created_at DESC
LIMIT 1;
