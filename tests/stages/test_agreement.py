"""The agreement stage over the session's judged run: human annotations against the judge."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from scipy.stats import kendalltau, spearmanr

from essaybench.bench.agreement_tables import AgreementParams, Tiers
from essaybench.stages.agreement import agreement_stage
from essaybench.store import Snapshot, Store


def _judge_means(judged: Snapshot) -> dict[str, float]:
    ok = judged.read().filter(pl.col("status") == "ok")
    return {str(m): float(s) for m, s in ok.group_by("model").agg(
        pl.col("score_weighted").mean()).iter_rows()}


def test_agreement_stage_pairwise_annotations(judged_copy: tuple[Store, Snapshot, Snapshot],
                                              tmp_path: Path) -> None:
    store, judged, _ = judged_copy
    essays = judged.read().select("prompt_id", "genre").unique()
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
    overall = table.filter((pl.col("scope") == "overall")
                           & (pl.col("variant") == "weighted")).row(0, named=True)
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


def test_agreement_params_are_checked() -> None:
    with pytest.raises(ValueError, match="absolute annotations only"):
        AgreementParams(annotations="x.jsonl", kind="pairwise",
                        tiers=Tiers(high=(3,), medium=(2,), low=(1,)))
