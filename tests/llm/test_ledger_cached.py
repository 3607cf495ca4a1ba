"""A ledger written before cached input tokens were kept (issue 26 item 2) still opens: it
gains the column in place, its old calls' cached input is unknown (never zero), and new
calls record theirs beside them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb

from essaybench.core.hashing import canonical_json
from essaybench.llm.ledger import Ledger, ledger_row
from essaybench.llm.scope import ANY_RUN
from essaybench.llm.types import CallStatus, ChatResult, Usage

# llm_calls as the ledger schema had it before cached_input_tokens (run ids, retries and
# re-asks already kept), with one priced call on record.
BEFORE_CACHED = """
CREATE TABLE llm_calls (
    key VARCHAR NOT NULL, model VARCHAR NOT NULL, endpoint VARCHAR NOT NULL,
    model_id VARCHAR NOT NULL, returned_model VARCHAR, stage VARCHAR, tag VARCHAR,
    status VARCHAR NOT NULL, error_kind VARCHAR, error VARCHAR,
    request JSON USING COMPRESSION zstd NOT NULL, response_text VARCHAR USING COMPRESSION zstd,
    parsed JSON USING COMPRESSION zstd, finish_reason VARCHAR, input_tokens BIGINT,
    output_tokens BIGINT, cost_usd DOUBLE, latency_s DOUBLE, attempts INTEGER NOT NULL,
    started_at TIMESTAMPTZ, finished_at TIMESTAMPTZ NOT NULL, code_version VARCHAR NOT NULL,
    run_id VARCHAR, retries INTEGER, reasks INTEGER
);
CREATE INDEX llm_calls_key ON llm_calls (key);
INSERT INTO llm_calls (key, model, endpoint, model_id, stage, status, request, response_text,
                       input_tokens, output_tokens, cost_usd, attempts, finished_at,
                       code_version, run_id, retries, reasks)
VALUES ('old-key', 'fake', 'http://x/v1', 'gpt-x', 'judge', 'ok', '{}', '旧答', 1000, 100,
        0.0012, 1, now(), 'old', 'r0', 0, 0);
"""


def make_old_ledger(path: Path) -> None:
    with duckdb.connect(str(path)) as con:
        con.execute(BEFORE_CACHED)


def new_row(key: str, cached: int) -> dict[str, object]:
    now = datetime.now(UTC)
    result = ChatResult(key=key, model="fake", status=CallStatus.OK, text="新答",
                        usage=Usage(1000, 100, cached), cost_usd=0.0009, attempts=1,
                        started_at=now, finished_at=now, stage="judge", tag=key)
    return ledger_row(result, endpoint="http://x/v1", model_id="gpt-x", run_id="r1",
                      request=canonical_json({"k": key}))


def test_an_old_ledger_gains_cached_input_in_place(tmp_path: Path) -> None:
    path = tmp_path / "ledger.duckdb"
    make_old_ledger(path)
    with Ledger(path) as ledger:
        old = ledger.lookup_ok(["old-key"], scope=ANY_RUN)["old-key"]
        ledger.write_rows([new_row("new-key", 600)])
        new = ledger.lookup_ok(["new-key"], scope=ANY_RUN)["new-key"]
    assert old.text == "旧答" and old.usage == Usage(1000, 100, None)
    assert old.cost_usd == 0.0012  # what was recorded stays what it was
    assert new.usage == Usage(1000, 100, 600)
    with Ledger(path) as ledger:  # opening again changes nothing
        rows = ledger.query("SELECT key, cached_input_tokens FROM llm_calls ORDER BY key")
    assert rows == [{"key": "new-key", "cached_input_tokens": 600},
                    {"key": "old-key", "cached_input_tokens": None}]
