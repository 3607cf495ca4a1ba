"""``essaybench llm usage`` with cached input (issue 26 item 2): cached tokens per model and
stage, costs as recorded (cached input at its price), and one line saying which costs are
upper bounds (priced without a cached-input figure from the provider)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from essaybench.cli import app
from essaybench.cli.common import console
from essaybench.llm.fake.protocol import count_tokens
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.ledger import Ledger
from essaybench.llm.session import LEDGER_FILE, open_gateway
from essaybench.llm.types import ChatRequest, Message
from tests.llm.conftest import fake_spec, registry_of
from tests.llm.test_ledger_cached import make_old_ledger, new_row

RUBRIC = "请按评分标准逐项打分。" * 20


def _table(output: str) -> list[dict[str, str]]:
    lines = [line for line in output.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True))
            for line in lines[2:]]


def test_usage_shows_cached_input_and_its_cost(tmp_path: Path) -> None:
    scenario = FakeScenario.model_validate({"models": {
        "cached": {"reply": "template", "template": "好", "cache_report": "openai"},
        "plain": {"reply": "template", "template": "好"}}})
    specs = [fake_spec(m, model_id=m, price_input_per_mtok=2.0, price_output_per_mtok=8.0,
                       price_cached_input_per_mtok=0.2) for m in ("cached", "plain")]
    requests = [ChatRequest(model=m, stage="judge", messages=(
        Message(role="system", content=RUBRIC), Message(role="user", content=f"第{i}篇")))
        for m in ("cached", "plain") for i in range(4)]
    with run_fake_server(scenario) as server, open_gateway(
            registry_of(*specs), tmp_path, ["cached", "plain"],
            base_urls=dict.fromkeys(("cached", "plain"), server.base_url)) as session:
        results = session.run(requests)
    assert all(r.ok for r in results)
    out = CliRunner().invoke(app, ["llm", "usage", "--store", str(tmp_path), "--markdown"])
    assert out.exit_code == 0, out.output
    rows = {r["model"]: r for r in _table(out.output)}
    cached = 4 * (count_tokens(RUBRIC) + 4)
    assert rows["cached"]["cached in"] == str(cached) and rows["plain"]["cached in"] == "0"
    # by hand, from the fake's documented token rule: each call's input is the rubric and
    # its user message with 4 tokens of framing each, plus 3
    inputs = [count_tokens(RUBRIC) + 4 + count_tokens(f"第{i}篇") + 4 + 3 for i in range(4)]
    output = 4 * count_tokens("好")
    hand = ((sum(inputs) - cached) * 2.0 + cached * 0.2 + output * 8.0) / 1e6
    assert float(rows["cached"]["cost USD"]) == pytest.approx(hand, rel=1e-3)
    assert rows["plain"]["cost USD"].endswith("(≤, 4 uncached-priced)")
    notes = [line for line in out.output.splitlines() if "upper bound" in line]
    assert len(notes) == 1 and notes[0].startswith("Cost marked ≤: 4 calls priced without")


def test_usage_of_a_ledger_from_before_cached_input(tmp_path: Path) -> None:
    make_old_ledger(tmp_path / LEDGER_FILE)  # read-only: not migrated
    out = CliRunner().invoke(app, ["llm", "usage", "--store", str(tmp_path), "--markdown"])
    assert out.exit_code == 0, out.output
    [row] = _table(out.output)
    assert row["cached in"] == "0" and row["cost USD"].startswith("0.0012 (≤, 1 ")
    with Ledger(tmp_path / LEDGER_FILE) as ledger:  # migrated, plus a call with its figure
        ledger.write_rows([new_row("new-key", 600)])
    out = CliRunner().invoke(app, ["llm", "usage", "--store", str(tmp_path), "--markdown"])
    [row] = _table(out.output)
    assert row["cached in"] == "600" and row["calls"] == "2"
    assert "Cost marked ≤: 1 call priced without" in out.output


def test_llm_models_shows_the_discounts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  m:\n    provider: p\n    base_url: http://localhost:1/v1\n"
                    "    model_id: x\n    family: fam\n    price_input_per_mtok: 2\n"
                    "    price_output_per_mtok: 8\n    price_cached_input_per_mtok: 0.5\n"
                    "    batch_price_factor: 0.5\n    off_peak:\n"
                    "      - {start: '00:00', end: '00:00', price_factor: 0.5, days: [sat]}\n",
                    encoding="utf-8")
    # the console reads $COLUMNS once, when it is made (CI exports COLUMNS=80)
    monkeypatch.setattr(console, "_width", 200)
    out = CliRunner().invoke(app, ["llm", "models", "--models", str(path)])
    assert out.exit_code == 0, out.output
    assert "2.0 / 0.5 / 8.0" in out.output and "batch ×0.5" in out.output
    assert "00:00-00:00 UTC ×0.5 sat" in out.output
