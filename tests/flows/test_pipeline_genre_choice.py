"""Open and multi-genre prompts through the weekly pipeline under a real Prefect engine:
curated with ``keep_genre_choice``, generated verbatim, each essay's genre asked of the
judge before it is scored with that genre's rubric, counted in Table 5, the statistics
and the HTML report, and a rerun of the judge stage pays for nothing again."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from essaybench.core.paths import PROJECT_ROOT
from essaybench.llm.fake.server import run_fake_server
from essaybench.store import Store

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_engine")]


def _curate_config(tmp_path: Path) -> Path:
    shipped = yaml.safe_load((PROJECT_ROOT / "configs" / "curate.yaml").read_text("utf-8"))
    data = PROJECT_ROOT / "data"
    shipped["sources"] = str(data / "sources.yaml")
    shipped["classify"] = {**shipped["classify"], "overrides_path": str(data / "overrides.yaml"),
                           "keep_genre_choice": True}
    path = tmp_path / "curate.yaml"
    path.write_text(yaml.safe_dump(shipped, allow_unicode=True), encoding="utf-8")
    return path


def _snapshot(store: Path, stage: str, snapshot_id: str) -> pl.DataFrame:
    return pl.read_parquet(store / "snapshots" / stage / f"{snapshot_id}.parquet")


def test_choice_prompts_are_judged_by_the_genre_the_essay_chose(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from essaybench.flows.pipeline import pipeline_flow

    config = tmp_path / "benchmark.yaml"
    config.write_text(yaml.safe_dump({"per_genre": 1, "generate": {"models": ["writer"]},
                                      "judge": {"judges": ["judge"]}, "drift": None}),
                      encoding="utf-8")
    store = tmp_path / "store"
    with run_fake_server() as server:  # the writer echoes the prompt; judges follow schemas
        models = {m: {"provider": "fake", "base_url": server.base_url, "model_id": m,
                      "family": "fake", "structured_output": "json_schema",
                      "max_concurrency": 4, "timeout_s": 10, "max_retries": 0}
                  for m in ("writer", "judge")}
        (tmp_path / "models.yaml").write_text(yaml.safe_dump({"models": models}),
                                              encoding="utf-8")
        monkeypatch.setenv("ESSAYBENCH_MODELS", str(tmp_path / "models.yaml"))
        out = pipeline_flow(str(config), str(_curate_config(tmp_path)), str(store))
        first = server.stats().totals.received
        rerun = pipeline_flow(str(config), str(_curate_config(tmp_path)), str(store), False,
                              "judge", out["run_id"])
        assert server.stats().totals.received == first  # the genre calls too: nothing new

    essays = _snapshot(store, "generate", Store(store).get_snapshot(out["judge"])
                       .upstream_snapshot_ids[0])
    choice = essays.filter(pl.col("genre").is_null())
    # per_genre 1: one prompt of each genre and one that leaves the genre to the essay
    assert (essays.height, choice.height) == (5, 1)
    assert choice["essay_text"].to_list() == choice["prompt_text"].to_list()  # verbatim
    allowed = choice["allowed_genres"].to_list()[0]
    # 5 essays, 5 judgments, 1 genre call
    assert first == 5 + 5 + 1

    for run in (out, rerun):
        judged = _snapshot(store, "judge", run["judge"])
        assert judged["status"].to_list() == ["ok"] * 5
        row = judged.filter(pl.col("genre_source") == "judge").row(0, named=True)
        assert row["prompt_id"] == choice["prompt_id"][0]
        assert row["genre"] == row["essay_genre"] and row["genre"] is not None
        assert "any" in allowed or row["genre"] in allowed
        assert json.loads(row["allowed_genres"]) == allowed
        assert row["genre_call_status"] == "ok" and row["genre_call_key"]
        assert judged.filter(pl.col("genre_source") == "prompt").height == 4

    reports = Path(out["reports"])
    t5 = pl.read_parquet(reports / "table5_weighted.parquet").row(0, named=True)
    cell = f"{row['genre']}/{row['prompt_set']}"
    assert t5[f"{cell}:chosen"] == 1 and t5["overall:chosen"] == 1
    assert "[1 chosen]" in (reports / "table5_weighted.md").read_text("utf-8")
    counts = pl.read_csv(reports / "stats" / "genre_choice.csv")
    assert counts.filter(pl.col("cell") == cell)["chosen"].to_list() == [1]
    assert "genre_choice" in (reports / "stats" / "stats.md").read_text("utf-8")
    page = Path(out["report"]).read_text("utf-8")
    assert "1 chosen" in page and "the essay chooses" in page
    assert "the essay&#39;s choice as this judge saw it" in page or \
        "the essay's choice as this judge saw it" in page
