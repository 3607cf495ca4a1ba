INSERT INTO prompt_usage (run_id, week, prompt_set_version, prompt_id, genre, prompt_set,
                          role, core_fingerprint, core_settings, recorded_at)
VALUES ($run_id, $week, $prompt_set_version, $prompt_id, $genre, $prompt_set, $role,
        $core_fingerprint, $core_settings, $recorded_at)
ON CONFLICT DO NOTHING;
