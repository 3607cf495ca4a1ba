SELECT prompt_set_version, version, sha256, n_items, n_criteria, format, source, path,
       created_at
FROM gold_sets
WHERE $prompt_set_version IS NULL OR prompt_set_version = $prompt_set_version
ORDER BY prompt_set_version, created_at DESC, version DESC;
