"""Both batch protocols end to end on the fake: results equal a direct call's, at the batch
price, durable in the ledger (served again without a batch), marked as batched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from essaybench.llm.types import CallStatus
from tests.llm.batch.conftest import SCHEMA, requests, run_batch, run_direct

jsonschema = pytest.importorskip("jsonschema")


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_batch_results_are_the_direct_calls_at_the_batch_price(
        serve: Any, tmp_path: Path, protocol: str) -> None:
    fake = serve({"delay_s": 0.05, "per_item_s": 0.01},
                 models={"*": {"cache_report": "openai", "cached_prefix": "system"}})
    reqs = requests(5) + requests(2, schema=True, prefix="评分")
    # a request repeated in the input is one line, its result given to both
    got = run_batch(fake, tmp_path / "batch.duckdb", [*reqs, reqs[3]], batch=protocol)
    assert got[-1] == got[3]
    got = got[:-1]
    stats = fake.stats()
    assert stats.totals.received == 0  # nothing went direct
    assert stats.batch is not None and stats.batch.batches_created == 1
    assert stats.batch.received_per_key == {"1": 7}
    assert stats.batch.batches_per_custom_id == {"1": 7}

    direct = run_direct(fake, tmp_path / "direct.duckdb", reqs, batch="none")
    assert [r.key for r in got] == [r.key for r in direct]  # custom_id = the ledger key
    for b, d, req in zip(got, direct, reqs, strict=True):
        assert b.status is CallStatus.OK and d.status is CallStatus.OK
        assert (b.tag, b.stage, b.attempts, b.reasks) == (d.tag, d.stage, 1, 0)
        # The fake derives a structured reply from the body it hashes; an Anthropic body
        # is not the chat body, so only its text replies (the echo) are the same.
        u = b.usage
        assert u.input_tokens and u.output_tokens and u.cached_input_tokens
        # list price 1 $/M input (no cached price: cached input at the input price), 2 $/M
        # output, batch factor 0.5
        assert b.cost_usd == pytest.approx((u.input_tokens + 2 * u.output_tokens) / 1e6 * 0.5)
        assert u.cached_input_tokens == d.usage.cached_input_tokens
        if protocol == "openai" or req.response_schema is None:
            assert (b.text, b.parsed, u) == (d.text, d.parsed, d.usage)
            assert d.cost_usd is not None and b.cost_usd == pytest.approx(d.cost_usd * 0.5)
        if req.response_schema is not None:
            jsonschema.validate(b.parsed, SCHEMA)

    # Durable: a second process with the same requests is served from the ledger.
    again = run_batch(fake, tmp_path / "batch.duckdb", reqs, batch=protocol)
    assert all(r.from_ledger for r in again) and [r.text for r in again] == [
        r.text for r in got]
    assert fake.stats().batch.batches_created == 1

    con = duckdb.connect(str(tmp_path / "batch.duckdb"), read_only=True)
    rows = con.execute("SELECT key, batched, run_id, cost_usd FROM llm_calls").fetchall()
    assert len(rows) == 7 and all(r[1] is True and r[2] == "run-1" for r in rows)
    [(state, provider, n)] = con.execute(
        "SELECT state, provider, n_items FROM llm_batches").fetchall()
    assert (state, provider, n) == ("collected", protocol, 7)
    con.close()
