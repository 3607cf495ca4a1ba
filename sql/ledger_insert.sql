-- Rows arrive as the registered Arrow table `batch`, one transaction per group commit.
INSERT INTO llm_calls BY NAME SELECT * FROM batch;
