"""The judge-free signals through the real stages on the fake server: four weekly runs.
Weeks 1–3 the writer answers as usual (the fake echoes the prompt: the same essay every
week, fully on topic); week 4 it answers every prompt with the same unrelated text. Week 2
has no history, week 3 one earlier median (below min_history: no band, said so), week 4
two: its median falls below the band and every essay is off topic."""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from essaybench.bench.alerts import AlertParams
from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.request import JudgeParams
from essaybench.bench.signals.lexical import rouge_l
from essaybench.bench.signals.params import SignalParams
from essaybench.llm.fake.embeddings import fake_embedding
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.report.data import load_run
from essaybench.report.page import render_report
from essaybench.stages.alerts import alerts_stage, run_alerts
from essaybench.store import Store
from tests.stages.test_alerts_stage import use_models, week

UNRELATED = ("人工智能正在改变世界，机器学习让计算机能够从数据中学习，深度神经网络在图像识别、"
             "语音识别和自然语言处理方面取得了巨大进步。")
SWAPPED = FakeScenario.model_validate({"models": {"writer": {
    "reply": "template", "template": UNRELATED}, "judge": {}}})


def signals_meta(store: Store, run_id: str) -> dict[str, object]:
    [row] = [r for r in store.stage_runs(run_id, 100) if r.stage == "alerts"]
    meta = (row.meta or {})["signals"]
    assert isinstance(meta, dict)
    return meta


@pytest.mark.slow
def test_drift_band_and_off_topic_over_four_weeks(
        curated_copy: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = curated_copy
    (store.root / "ledger.duckdb").unlink(missing_ok=True)
    config = BenchmarkConfig(
        per_genre=1, generate=GenerateParams(models=("writer",)),
        judge=JudgeParams(judges=["judge"]),
        alerts=AlertParams(n_boot=200, signals=SignalParams(min_history=2)))
    for run_id, scenario in (("w1", None), ("w2", None), ("w3", None), ("w4", SWAPPED)):
        week(store, run_id, scenario, config, tmp_path, monkeypatch)
        alerts_stage(store, run_id, config.alerts,
                     store.require_ok_snapshot("judge", run_id, "test"))

    w1, w2, w3 = (signals_meta(store, r) for r in ("w1", "w2", "w3"))
    assert w1["drift"] == {}  # no comparable run: no pairs
    rel = w1["relevance"]["writer"]  # type: ignore[index]
    assert rel["n_off_topic"] == 0 and rel["n_checked"] > 0
    d2, d3 = w2["drift"]["writer"], w3["drift"]["writer"]  # type: ignore[index]
    assert d2["median"] == 1.0 and d2["history"] == [] and d2["verdict"] == "no_band"
    assert d3["history"] == [1.0] and d3["verdict"] == "no_band"
    assert "1 of 2 earlier weeks: no band yet" in d3["reason"]
    assert not [a for r in ("w2", "w3") for a in run_alerts(store, r).alerts
                if a.kind in ("output_drift", "off_topic")]

    w4 = signals_meta(store, "w4")
    d4 = w4["drift"]["writer"]  # type: ignore[index]
    assert d4["history"] == [1.0, 1.0] and d4["verdict"] == "below"
    assert d4["band_low"] == pytest.approx(1.0 - SignalParams().band_min_drop)
    assert d4["n_pairs"] == d3["n_pairs"] and d4["median"] < 0.3
    r4 = w4["relevance"]["writer"]  # type: ignore[index]
    assert r4["n_off_topic"] == r4["n_checked"] > 0
    kinds = {a.kind: a for a in run_alerts(store, "w4").alerts}
    assert kinds["output_drift"].now == pytest.approx(d4["median"])
    assert kinds["off_topic"].now == 1.0
    assert "answered a different question" in kinds["off_topic"].message

    # The report shows both per model, the band's verdict and the off-topic count.
    page = render_report(load_run(store, "w4"))
    section = page[page.index('id="signals"'):]
    assert "below" in section and "band low" in section
    assert f'<td class="num">{r4["n_off_topic"]}</td>' in section
    early = render_report(load_run(store, "w3"))
    assert "1 of 2 earlier weeks: no band yet" in early


@pytest.mark.slow
def test_gold_references_are_secondary_figures_in_meta_and_report(
        curated_copy: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A gold file for two of the run's prompts: per model, median ROUGE-L and chrF of the
    essays on those prompts against the references, with the gold set's identity."""
    store = curated_copy
    (store.root / "ledger.duckdb").unlink(missing_ok=True)
    config = BenchmarkConfig(per_genre=1, generate=GenerateParams(models=("writer",)),
                             judge=JudgeParams(judges=["judge"]), drift=None)
    week(store, "g1", None, config, tmp_path, monkeypatch)
    essays = store.require_ok_snapshot("generate", "g1", "test").read().sort("prompt_id")
    first, second = essays.head(2).iter_rows(named=True)
    gold = tmp_path / "gold.yaml"
    gold.write_text(yaml.safe_dump({"prompt_set": str(first["prompt_set"]), "version": "g1",
                                    "items": [
        {"prompt_id": first["prompt_id"], "reference": first["essay_text"],
         "criteria": ["切题"]},
        {"prompt_id": second["prompt_id"], "reference": UNRELATED}]}, allow_unicode=True),
        encoding="utf-8")
    params = AlertParams(n_boot=200, signals=SignalParams(gold_file=str(gold),
                                                          embedding_model="writer"))
    with run_fake_server(None) as server:  # it serves /v1/embeddings too
        use_models(tmp_path / "models-emb.yaml", server.base_url, monkeypatch)
        alerts_stage(store, "g1", params, store.require_ok_snapshot("judge", "g1", "test"))
    meta = signals_meta(store, "g1")
    ok = essays.filter(pl.col("status") == "ok")
    expected = statistics.median(
        float(np.dot(fake_embedding(p), fake_embedding(e)))
        for p, e in ok.select("prompt_text", "essay_text").iter_rows())
    embedding = meta["embedding"]
    assert isinstance(embedding, dict) and embedding["drift"] == {}  # no comparable run
    assert embedding["relevance"]["writer"] == pytest.approx(expected)
    ref = meta["reference"]
    assert isinstance(ref, dict) and ref["version"] == "g1" and ref["matches_prompt_set"]
    writer = ref["models"]["writer"]
    identical, unrelated = rouge_l(first["essay_text"], first["essay_text"]), rouge_l(
        second["essay_text"], UNRELATED)
    assert identical is not None and unrelated is not None
    assert writer["n_essays"] == 2
    assert writer["median_rouge_l"] == pytest.approx(statistics.median([identical, unrelated]))
    page = render_report(load_run(store, "g1"))
    assert "Against the gold references (secondary, not a ranking)" in page
    assert "median cosine to the prompt" in page
    assert writer["median_embedding"] is not None  # and shown as the third figure
    assert "<th>embedding cosine</th>" in page
    assert f'<td class="num">{writer["median_embedding"]:.3f}</td>' in page
