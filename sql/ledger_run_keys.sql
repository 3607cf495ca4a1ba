-- Every key with a row (any status) recorded under run $run_id (NULL: the calls recorded
-- before rows carried a run id): the ledger's in-memory index of what a run-scoped look-up
-- can find (llm/ledger.py, Ledger._keys_of).
SELECT DISTINCT key FROM llm_calls WHERE run_id IS NOT DISTINCT FROM $run_id;
