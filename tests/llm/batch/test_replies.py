"""Batch replies are read as direct replies are: structured output, re-asks (the rest of
the budget sent directly), parse errors with the raw text; keys never stored."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from essaybench.llm.batch import BatchError, BatchRunner
from essaybench.llm.ledger import Ledger
from essaybench.llm.types import CallStatus
from tests.llm.batch.conftest import FAST, SCHEMA, gateway, requests, run_batch, run_direct

jsonschema = pytest.importorskip("jsonschema")
INVALID = {"kind": "invalid_structured", "rate": 0.5, "seed": 11}


def test_re_asks_and_parse_errors_end_as_the_direct_calls_do(
        serve: Any, tmp_path: Path) -> None:
    # Two fakes with one scenario: a reply breaks the schema when hash(body, arrival) < 0.5,
    # the same decision for a body whether it came in a batch line or directly.
    scenario: dict[str, Any] = {"batch": {"per_item_s": 0.005}, "faults": [INVALID]}
    reqs = requests(12, schema=True, prefix="评分")
    got = run_batch(serve(**scenario), tmp_path / "b.duckdb", reqs, max_reasks=1)
    direct_fake = serve(**scenario)
    direct = run_direct(direct_fake, tmp_path / "d.duckdb", reqs, max_reasks=1)
    for b, d in zip(got, direct, strict=True):
        assert (b.status, b.text, b.parsed, b.attempts, b.reasks, b.error_kind, b.error) == (
            d.status, d.text, d.parsed, d.attempts, d.reasks, d.error_kind, d.error)
        assert b.usage == d.usage
        if b.ok:
            jsonschema.validate(b.parsed, SCHEMA)
    outcomes = {(b.status, b.reasks) for b in got}
    # all three paths happen: ok at once, ok after a re-ask, parse_error after the budget
    assert outcomes == {(CallStatus.OK, 0), (CallStatus.OK, 1), (CallStatus.PARSE_ERROR, 1)}
    assert direct_fake.stats().totals.received == sum(d.attempts for d in direct)


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_reply_failing_its_schema_without_budget_is_a_parse_error_with_its_text(
        serve: Any, tmp_path: Path, protocol: str) -> None:
    fake = serve({"per_item_s": 0.005}, faults=[{"kind": "invalid_structured",
                                                 "variant": "not_json"}])
    got = run_batch(fake, tmp_path / "b.duckdb", requests(3, schema=True), batch=protocol,
                    max_reasks=0)
    assert all(r.status is CallStatus.PARSE_ERROR and r.error_kind == "schema" for r in got)
    assert all(r.text and r.parsed is None and r.attempts == 1 for r in got)
    assert fake.stats().totals.received == 0
    with Ledger(tmp_path / "b.duckdb") as ledger:
        rows = ledger.query("SELECT status, response_text, batched FROM llm_calls")
    assert [(r["status"], r["batched"]) for r in rows] == [("parse_error", True)] * 3
    assert all(r["response_text"] for r in rows)


KEY = "sk-live-Batch1234SecretValue"


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_api_keys_are_never_stored(serve: Any, tmp_path: Path, protocol: str,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EB_BATCH_TEST_KEY", KEY)
    # every line is a 401 whose message quotes the key, as a provider's might
    fake = serve({"per_item_s": 0.005}, api_key_env="EB_BATCH_TEST_KEY",
                 faults=[{"kind": "status", "status": 401,
                          "message": f"Incorrect API key provided: {KEY}"}])
    path = tmp_path / "b.duckdb"
    got = run_batch(fake, path, requests(3), batch=protocol, api_key_env="EB_BATCH_TEST_KEY")
    assert all(r.status is CallStatus.API_ERROR and r.error_kind == "http_401" for r in got)
    assert all(r.error and "Incorrect API key" in r.error and KEY not in r.error for r in got)
    # a wrong key: the batch API refuses the create; one clear error, no key in it or stored
    monkeypatch.setenv("EB_BATCH_TEST_KEY", KEY + "-wrong")
    with Ledger(path, linger_s=0) as ledger, pytest.raises(BatchError) as caught:
        runner = BatchRunner(gateway(fake, ledger, batch=protocol,
                                     api_key_env="EB_BATCH_TEST_KEY"), FAST)
        asyncio.run(runner.run(requests(2, prefix="另一篇")))
    assert "401" in str(caught.value) and KEY not in str(caught.value)
    with Ledger(path) as ledger:
        [(failed,)] = ledger.con.execute(
            "SELECT count(*) FROM llm_batches WHERE state = 'failed'").fetchall()
        assert failed == 1
        ledger.con.execute("CHECKPOINT")
    for stored in tmp_path.iterdir():
        assert KEY.encode() not in stored.read_bytes(), stored.name
