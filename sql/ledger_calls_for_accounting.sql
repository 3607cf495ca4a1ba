-- Every recorded call, with what accounting needs: every column but the stored request and
-- parsed reply (kilobytes per row). Not a column list, so that a ledger read before it gained
-- a column (retries, reasks: read-only readers do not migrate) still reads; accounting takes
-- a missing count as unknown.
SELECT * EXCLUDE (request, parsed)
FROM llm_calls
WHERE ($stage IS NULL OR stage = $stage);
