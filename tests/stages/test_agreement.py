"""The agreement stage over the session's judged run: human annotations against the judge."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import polars as pl
import pytest
from scipy.stats import kendalltau, mannwhitneyu, spearmanr

from essaybench.bench.agreement_tables import AgreementParams, Tiers
from essaybench.human.annotations import AnnotationFileError
from essaybench.stages.agreement import agreement_stage
from essaybench.store import Snapshot, Store


def _judge_means(judged: Snapshot) -> dict[str, float]:
    ok = judged.read().filter(pl.col("status") == "ok")
    return {str(m): float(s) for m, s in ok.group_by("model").agg(
        pl.col("score_weighted").mean()).iter_rows()}


def test_agreement_stage_pairwise_annotations(judged_copy: tuple[Store, Snapshot, Snapshot],
                                              tmp_path: Path) -> None:
    store, judged, _ = judged_copy
    # One genre per prompt, as the annotators' sheet has it: none for a prompt that leaves
    # the genre to the essay (its essays' genres are each judge's reading of each essay).
    essays = judged.read().select("prompt_id", pl.when(pl.col("genre_source") == "prompt")
                                  .then(pl.col("genre")).alias("genre")).unique()
    assert essays["prompt_id"].is_unique().all()
    assert essays["genre"].null_count() == 3  # the bundled set's open-genre prompts
    # Three annotators prefer models in a fixed human order, one of them dissenting on
    # the first pair of every prompt: the majority keeps the order.
    order = ["gpt-writer", "qwen-writer", "deepseek-writer"]  # best first
    rows = []
    for prompt, genre in essays.iter_rows():
        for i, a in enumerate(order):
            for b in order[i + 1:]:
                for who in ("zhang", "li", "wang"):
                    dissent = who == "wang" and (a, b) == (order[0], order[1])
                    rows.append({"prompt_id": prompt, "model_a": a, "model_b": b,
                                 "annotator": who, "verdict": "B" if dissent else "A",
                                 "genre": genre})
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), "utf-8")
    snap, folder = agreement_stage(store, "r1", AgreementParams(annotations=str(path),
                                                                kind="pairwise"), judged)
    table = pl.read_parquet(folder / "judge_human.parquet")
    overall = table.filter((pl.col("scope") == "overall") & (pl.col("variant") == "weighted")
                           & (pl.col("method") == "model means")).row(0, named=True)
    # Every essay of the three models is annotated here, so all of them are compared.
    assert overall["n_essays"] == judged.read().filter(
        (pl.col("status") == "ok") & pl.col("score_weighted").is_not_null()).height
    # independent: human voting score = wins/comparisons in the fixed order (2, 1, 0 wins)
    human = {m: (len(order) - 1 - i) for i, m in enumerate(order)}
    judge = _judge_means(judged)
    models = sorted(human)
    assert overall["spearman"] == pytest.approx(
        spearmanr([human[m] for m in models], [judge[m] for m in models]).statistic)
    assert overall["kendall"] == pytest.approx(
        kendalltau([human[m] for m in models], [judge[m] for m in models]).statistic)
    kappa = pl.read_parquet(folder / "annotators.parquet").row(0, named=True)
    assert kappa["n_raters"] == 3 and kappa["value"] < 1  # one annotator dissents
    assert json.loads(json.dumps(snap.meta))["tables"]
    assert (folder / "agreement.md").is_file()


def test_agreement_stage_absolute_with_tiers(judged_copy: tuple[Store, Snapshot, Snapshot],
                                             tmp_path: Path) -> None:
    store, judged, _ = judged_copy
    ok = judged.read().filter(pl.col("status") == "ok")
    # Humans give 3 to the essays the judge scored highest, 2 to the middle, 1 to the rest.
    ranked = ok.sort("score_weighted").with_row_index("i")
    third = ranked.height / 3
    lines = ["prompt_id,model,annotator,score"]
    for row in ranked.iter_rows(named=True):
        score = 1 if row["i"] < third else 2 if row["i"] < 2 * third else 3
        lines += [f"{row['prompt_id']},{row['model']},{who},{score}" for who in ("a", "b")]
    path = tmp_path / "scores.csv"
    path.write_text("\n".join(lines) + "\n", "utf-8")
    params = AgreementParams(annotations=str(path), kind="absolute",
                             tiers=Tiers(high=(3,), medium=(2,), low=(1,)))
    _, folder = agreement_stage(store, "r1", params, judged)
    sens = pl.read_parquet(folder / "sensitivity.parquet").filter(
        pl.col("variant") == "weighted")
    # Tiers cut by the judge's own scores: every higher-tier essay scores higher.
    assert set(sens["u_share"].to_list()) == {1.0}
    pairs = pl.read_parquet(folder / "annotator_pairs.parquet")
    assert pairs["exact"].to_list() == [1.0]


def test_agreement_stage_pairwise_with_tiers(judged_copy: tuple[Store, Snapshot, Snapshot],
                                             tmp_path: Path) -> None:
    """Issue 16: tiers from pairwise annotations (top/median/bottom by voting score) give
    the Mann–Whitney table; checked against scipy on the essays picked here."""
    store, judged, _ = judged_copy
    ok = judged.read().filter(pl.col("status") == "ok")
    order = ["deepseek-writer", "gpt-writer", "qwen-writer"]  # humans: best first
    rows = [{"prompt_id": p, "model_a": a, "model_b": b, "annotator": who, "verdict": "A"}
            for p in ok["prompt_id"].unique().sort().to_list()
            for i, a in enumerate(order) for b in order[i + 1:] for who in ("x", "y", "z")]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    params = AgreementParams(annotations=str(path), kind="pairwise", tiers="top/median/bottom")
    _, folder = agreement_stage(store, "r1", params, judged)
    sens = pl.read_parquet(folder / "sensitivity.parquet").filter(
        pl.col("variant") == "weighted")
    score = {m: ok.filter(pl.col("model") == m)["score_weighted"].to_list() for m in order}
    got = sens.filter((pl.col("higher") == "high") & (pl.col("lower") == "low")).row(
        0, named=True)
    expected = mannwhitneyu(score[order[0]], score[order[2]], alternative="greater")
    assert got["u_statistic"] == pytest.approx(expected.statistic)
    assert got["p_value"] == pytest.approx(expected.pvalue)
    assert "Tiers: top/median/bottom" in (folder / "agreement.md").read_text("utf-8")


def test_agreement_params_are_checked() -> None:
    with pytest.raises(ValueError, match="pairwise annotations only"):
        AgreementParams(annotations="x.csv", kind="absolute", tiers="top/median/bottom")
    with pytest.raises(ValueError, match="within-prompt ranks"):
        AgreementParams(annotations="x.jsonl", kind="pairwise",
                        tiers=Tiers(high=(0,), medium=(2,), low=(3,)))


def _pairs(judged: Snapshot, path: Path, models: tuple[str, ...]) -> Path:
    """Three annotators prefer gpt-writer to each of ``models`` on every prompt."""
    rows = [{"prompt_id": p, "model_a": "gpt-writer", "model_b": b, "annotator": who,
             "verdict": "A"}
            for p in judged.read()["prompt_id"].unique().sort().to_list()
            for b in models for who in ("x", "y", "z")]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return path


def test_the_stage_itself_checks_the_annotations_against_the_run(
        judged_copy: tuple[Store, Snapshot, Snapshot], tmp_path: Path) -> None:
    """Called directly (as a deployment's task does), not only behind the CLI's check: rows
    naming what the run lacks stop it with file and line, or are left out and counted with
    ignore_unknown; a score off the declared scale stops it."""
    store, judged, _ = judged_copy
    path = _pairs(judged, tmp_path / "pairs.jsonl", ("qwen-writer", "ghost-writer"))
    params = AgreementParams(annotations=str(path), kind="pairwise")
    with pytest.raises(AnnotationFileError, match=r"pairs\.jsonl:4: .* run r1 does not have: "
                                                  r"unknown models 'ghost-writer'"):
        agreement_stage(store, "r1", params, judged)
    assert not any(r.stage == "agreement" for r in store.stage_runs("r1"))  # nothing ran

    snap, _ = agreement_stage(store, "r1", params.model_copy(update={"ignore_unknown": True}),
                              judged)
    ghosts = 3 * judged.read()["prompt_id"].n_unique()
    assert snap.meta["dropped"] == ghosts
    assert snap.meta["note"].startswith(f"{path}: ignored {ghosts} annotation row(s) name what "
                                        "run r1 does not have: unknown models 'ghost-writer'")
    (row,) = [r for r in store.stage_runs("r1") if r.stage == "agreement"]
    assert row.status == "ok" and row.meta is not None and row.meta["dropped"] == ghosts
    with duckdb.connect(str(store.catalog_path), read_only=True) as con:
        (recorded,) = con.execute("select params from stage_runs where stage = 'agreement'"
                                  ).fetchone() or (None,)
    assert json.loads(recorded)["annotations"] == str(path)  # the user's file, no stopgap copy
    assert json.loads(recorded)["ignore_unknown"] is True

    prompt = str(judged.read()["prompt_id"][0])
    scores = tmp_path / "scores.csv"
    scores.write_text("prompt_id,model,annotator,score\n"
                      f"{prompt},gpt-writer,x,4\n{prompt},qwen-writer,x,7\n", "utf-8")
    absolute = AgreementParams(annotations=str(scores), kind="absolute", scale=(1, 5))
    with pytest.raises(AnnotationFileError, match=r"scores\.csv:3: field 'score': 7 is outside "
                                                  "the scale 1–5"):
        agreement_stage(store, "r1", absolute, judged)
    with pytest.raises(AnnotationFileError, match=r"scores\.csv:3: field 'score': 7 is outside "
                                                  "the scale 0–5"):  # the default is 0–10
        agreement_stage(store, "r1", absolute.model_copy(update={"scale": (0, 5)}), judged)


def test_a_scale_is_checked_with_the_params() -> None:
    with pytest.raises(ValueError, match="a scale applies to absolute annotations only"):
        AgreementParams(annotations="x.jsonl", kind="pairwise", scale=(0, 3))
    with pytest.raises(ValueError, match="finite low < high"):
        AgreementParams(annotations="x.csv", kind="absolute", scale=(5, 1))
    assert AgreementParams(annotations="x.csv", kind="absolute", scale=(1, 5)).scale == (1, 5)
