INSERT INTO gold_sets
    (prompt_set_version, version, sha256, n_items, n_criteria, format, source, path, created_at)
VALUES ($prompt_set_version, $version, $sha256, $n_items, $n_criteria, $format, $source,
        $path, $created_at);
