-- Brings a catalog made by an earlier version up to catalog_schema.sql (run once per
-- process and catalog: each ALTER costs a few ms even when there is nothing to add).
-- Stage runs record their process (pid, host) and a heartbeat (abandoned-run detection).
ALTER TABLE stage_runs ADD COLUMN IF NOT EXISTS pid INTEGER;
ALTER TABLE stage_runs ADD COLUMN IF NOT EXISTS host VARCHAR;
ALTER TABLE stage_runs ADD COLUMN IF NOT EXISTS heartbeat_at TIMESTAMPTZ;
