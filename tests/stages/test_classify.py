"""classify in rules+llm mode through the pipeline: real gateway, ledger, fake server."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from essaybench.curate.config import load_curate_config
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.stages.curate import run_curation_stage
from essaybench.store import Store

PROMPTS = [
    "以“那一刻”为题，写一篇文章。",  # no genre cue: rules leave the genre to the LLM
    "写一篇文章，题目是《窗》。",
    "以“桥”为话题写一篇作文。",
    "写一篇议论文，谈谈诚信，不少于800字。",  # rules decide this one
]


def test_rules_plus_llm_labels_through_the_gateway(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "p.txt").write_text(
        "".join(f"{i}. {p}\n" for i, p in enumerate(PROMPTS, 1)), encoding="utf-8")
    (tmp_path / "sources.yaml").write_text(
        "sources:\n  - {name: s, kind: numbered_text, path: p.txt}\n", encoding="utf-8")
    (tmp_path / "curate.yaml").write_text(
        "sources: sources.yaml\nclassify: {mode: rules+llm, llm_model: labeller}\n",
        encoding="utf-8")
    config = load_curate_config(tmp_path / "curate.yaml")
    store = Store(tmp_path / "store")
    # The labeller says "essay" and quotes each prompt's task as its evidence (a passage of
    # the prompt holding a cue the rules know; the fake's schema-generated strings are not).
    rules = [{"contains": [p], "reply": json.dumps(
        {"essay": "essay", "genre": "narrative", "prompt_set": None,
         "evidence": p[p.index("写一篇"):p.index("写一篇") + 5]}, ensure_ascii=False)}
        for p in PROMPTS]
    scenario = FakeScenario.model_validate({"seed": 3, "models": {"*": {"rules": rules}}})
    with run_fake_server(scenario) as server:
        (tmp_path / "models.yaml").write_text(
            "models:\n  labeller:\n    provider: fake\n"
            f"    base_url: {server.base_url}\n    model_id: fake-labeller\n"
            "    family: fake\n    structured_output: json_schema\n", encoding="utf-8")
        monkeypatch.setenv("ESSAYBENCH_MODELS", str(tmp_path / "models.yaml"))
        snap = None
        for stage in ("collect", "filter", "dedup", "rouge"):
            snap = run_curation_stage(store, "r1", stage, config, snap)
        rouge = snap
        classified = run_curation_stage(store, "r1", "classify", config, rouge).read()
        sent = server.stats().totals.received
        again = run_curation_stage(store, "r2", "classify", config, rouge).read()
        assert server.stats().totals.received == sent  # the rerun was served by the ledger
    assert sent >= 2
    assert again.equals(classified)
    sources = classified["genre_source"].to_list()
    assert "llm" in sources and "rule" in sources
    with duckdb.connect(str(store.root / "ledger.duckdb"), read_only=True) as con:
        stages = con.execute("select distinct stage from llm_calls").fetchall()
    assert stages == [("classify",)]
