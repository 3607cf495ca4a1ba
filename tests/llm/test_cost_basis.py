"""Cost per 1,000 characters: one definition in the report, the alerts and ``llm usage``
(issue 25 item 22) — all generate spend, billed failures (truncated essays) included,
over the grid characters of the ok essays — checked against a computation straight from
the ledger of a run on the fake server where some essays are cut at max_tokens."""

from __future__ import annotations

import re

import duckdb
import pytest
from typer.testing import CliRunner

from essaybench.bench.alerts import model_metrics
from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.request import JudgeParams
from essaybench.cli import app
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.session import LEDGER_FILE, open_gateway
from essaybench.report.tables import model_facts
from essaybench.stages.generate import generate_stage
from essaybench.store import Store
from tests.llm.conftest import fake_spec, registry_of


def _from_ledger(store: Store, model: str) -> tuple[float, float]:
    """(the definition, the old ok-only figure) for ``model``, from the ledger's rows."""
    with duckdb.connect(str(store.root / LEDGER_FILE), read_only=True) as con:
        rows = con.execute("SELECT status, cost_usd, response_text FROM llm_calls "
                           "WHERE model = ? AND stage = 'generate'", [model]).fetchall()
    grid = [len(re.sub(r"\s", "", text)) if status == "ok" else 0 for status, _, text in rows]
    spend = sum(cost for _, cost, _ in rows)
    ok_spend = sum(cost for status, cost, _ in rows if status == "ok")
    return spend / sum(grid) * 1000, ok_spend / sum(grid) * 1000


def test_one_definition_against_the_ledger(curated_copy: Store) -> None:
    config = BenchmarkConfig(per_genre=2, generate=GenerateParams(models=("w", "v")),
                             judge=JudgeParams(judges=["w"]), drift=None)
    scenario = FakeScenario.model_validate({
        "models": {"*": {"reply": "template", "template": "门开了，我走了进去。 {prompt}"}},
        "faults": [{"kind": "finish_reason", "finish_reason": "length", "rate": 0.4,
                    "seed": 3, "models": ["w"]}]})
    models = ["w", "v"]
    with run_fake_server(scenario) as server, open_gateway(
            registry_of(*(fake_spec(m, model_id=m) for m in models)), curated_copy.root,
            models, base_urls=dict.fromkeys(models, server.base_url)) as session:
        essays = generate_stage(curated_copy, "r1", config, session).read()
    cut = essays.filter((essays["model"] == "w") & (essays["status"] != "ok"))
    assert cut.height >= 2 and set(cut["status"]) == {"truncated"}
    assert all(c > 0 for c in cut["cost_usd"])  # billed
    expected, ok_only = _from_ledger(curated_copy, "w")
    assert expected > ok_only * 1.05  # the truncations' spend is counted (it was not)

    facts = {r["model"]: r for r in model_facts(essays).iter_rows(named=True)}
    assert facts["w"]["cost_per_1k_chars"] == pytest.approx(expected, rel=1e-12)
    assert facts["v"]["cost_per_1k_chars"] == pytest.approx(_from_ledger(curated_copy, "v")[0])
    assert model_metrics(essays)["w"].cost_per_1k_chars == pytest.approx(expected, rel=1e-12)

    out = CliRunner().invoke(app, ["llm", "usage", "--store", str(curated_copy.root),
                                   "--markdown"])
    assert out.exit_code == 0, out.output
    [row] = [ln for ln in out.output.splitlines() if ln.startswith("| w | generate |")]
    assert row.split(" | ")[-2] == f"{expected:.4g}"  # USD / 1k chars
    assert "all generate spend" in out.output and "usable (ok) essays" in out.output
