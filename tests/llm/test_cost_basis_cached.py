"""Cost per 1,000 characters with cached input (issue 26 item 2): the decision table, the
alerts and the report use what each essay cost (cached input at its price), checked against
a hand computation from the ledger of a run on the fake server; a writer whose provider
reports no cached figure is named, once, as an upper bound."""

from __future__ import annotations

import re

import duckdb
import pytest

from essaybench.bench.alerts import model_metrics
from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.request import JudgeParams
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.session import LEDGER_FILE, open_gateway
from essaybench.report import write_report
from essaybench.report.tables import model_facts
from essaybench.stages.aggregate import aggregate_stage
from essaybench.stages.generate import generate_stage
from essaybench.stages.judge import judge_stage
from essaybench.store import Store
from tests.llm.conftest import fake_spec, registry_of

PRICES = {"price_input_per_mtok": 1.0, "price_output_per_mtok": 2.0,
          "price_cached_input_per_mtok": 0.1}


def _by_hand(store: Store, model: str) -> tuple[float, int]:
    """(cost per 1,000 characters, essays without a cached figure) from the ledger."""
    with duckdb.connect(str(store.root / LEDGER_FILE), read_only=True) as con:
        rows = con.execute("SELECT status, input_tokens, cached_input_tokens, output_tokens, "
                           "response_text FROM llm_calls WHERE model = ? AND stage = "
                           "'generate'", [model]).fetchall()
    spend = sum(((i - (c or 0)) * 1.0 + (c or 0) * 0.1 + o * 2.0) / 1e6
                for _, i, c, o, _ in rows)
    grid = sum(len(re.sub(r"\s", "", t)) for s, _, _, _, t in rows if s == "ok")
    return spend / grid * 1000, sum(c is None for _, _, c, _, _ in rows)


def test_decision_table_and_report_use_cached_prices(curated_copy: Store) -> None:
    config = BenchmarkConfig(per_genre=1, generate=GenerateParams(models=("c", "u")),
                             judge=JudgeParams(judges=["j"]), drift=None)
    scenario = FakeScenario.model_validate({"models": {
        "c": {"reply": "template", "template": "门开了。{prompt}", "cache_report": "openai",
              "cached_prefix": 10},
        "*": {"reply": "template", "template": "门开了。{prompt}"}}})
    models = ["c", "u", "j"]
    with run_fake_server(scenario) as server, open_gateway(
            registry_of(*(fake_spec(m, model_id=m, **PRICES) for m in models)),
            curated_copy.root, models, base_urls=dict.fromkeys(models, server.base_url)
    ) as session:
        gen = generate_stage(curated_copy, "r1", config, session)
        judged = judge_stage(curated_copy, "r1", config, gen, session)
    aggregate_stage(curated_copy, "r1", judged)
    essays = gen.read()
    n = essays.filter(essays["model"] == "u").height
    assert n >= 4 and essays.filter(essays["model"] == "c")["cached_input_tokens"].to_list() \
        == [10] * n

    facts = {r["model"]: r for r in model_facts(essays).iter_rows(named=True)}
    metrics = model_metrics(essays)
    for model, bounded in (("c", 0), ("u", n)):
        expected, unknown = _by_hand(curated_copy, model)
        assert unknown == bounded
        assert facts[model]["cost_per_1k_chars"] == pytest.approx(expected, rel=1e-12)
        assert metrics[model].cost_per_1k_chars == pytest.approx(expected, rel=1e-12)
        assert facts[model]["cost_upper_bound"] == bounded
    # the cached prefix makes c cheaper than u for the same essays
    assert facts["c"]["cost_per_1k_chars"] < facts["u"]["cost_per_1k_chars"]

    html = write_report(curated_copy, "r1").read_text(encoding="utf-8")
    assert html.count("is an upper bound") == 1
    assert (f"Cost of u is an upper bound: {n} essays priced without a cached-input figure "
            "from the provider, at the full input price.") in html
