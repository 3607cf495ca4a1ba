SELECT run_id, week, prompt_set_version, prompt_id, genre, prompt_set, role,
       core_fingerprint, core_settings, recorded_at
FROM prompt_usage
ORDER BY week, run_id, role, prompt_id;
