-- Ledgers created before calls carried the run that paid for them gain the column in place;
-- their old rows keep NULL, which no run's reuse scope includes unless it asks (a rerun of
-- a run recorded before run ids).
ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS run_id VARCHAR;
