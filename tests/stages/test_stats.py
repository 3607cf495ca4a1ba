"""The stats and agreement stages over real generate/judge/pairwise snapshots (fake server)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from scipy.stats import kendalltau, spearmanr

from essaybench.bench.aggregate import table5
from essaybench.bench.agreement_tables import AgreementParams, Tiers
from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.request import JudgeParams
from essaybench.bench.pairwise.design import PairwiseParams
from essaybench.bench.stats_tables import StatsParams
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.session import open_gateway
from essaybench.stages.agreement import agreement_stage
from essaybench.stages.generate import generate_stage
from essaybench.stages.judge import judge_stage
from essaybench.stages.pairwise import pairwise_stage
from essaybench.stages.stats import stats_inputs, stats_stage
from essaybench.store import Snapshot, Store
from tests.llm.conftest import fake_spec, registry_of
from tests.stages.test_pipeline import curated  # noqa: F401  (the module-scoped curated store)

WRITERS = ("qwen-writer", "deepseek-writer", "gpt-writer")
CONFIG = BenchmarkConfig(per_genre=4, generate=GenerateParams(models=WRITERS),
                         judge=JudgeParams(judges=["qwen-judge"]),
                         pairwise=PairwiseParams(judges=["qwen-judge"]))
FAMILIES = {"qwen-writer": "qwen", "deepseek-writer": "deepseek", "gpt-writer": "openai",
            "qwen-judge": "qwen"}
PARAMS = StatsParams(n_boot=300, seed=7)


@pytest.fixture(scope="module")
def judged_run(curated: Store) -> tuple[Store, Snapshot, Snapshot]:  # noqa: F811
    models = [*WRITERS, "qwen-judge"]
    registry = registry_of(*(fake_spec(m, model_id=m, family=FAMILIES[m]) for m in models))
    # Each writer's essays differ ("{model}…"), so the judge's (seeded, random) scores do.
    scenario = FakeScenario.model_validate({"models": {"*": {
        "reply": "template", "template": "{model}：{prompt}"}}})
    with run_fake_server(scenario) as server, open_gateway(
            registry, curated.root, models, base_urls=dict.fromkeys(models, server.base_url)
    ) as session:
        gen = generate_stage(curated, "r1", CONFIG, session)
        judged = judge_stage(curated, "r1", CONFIG, gen, session)
        assert CONFIG.pairwise is not None
        pairs = pairwise_stage(curated, "r1", CONFIG.pairwise, gen, session)
    return curated, judged, pairs


def test_stats_stage_tables_snapshot_and_determinism(
        judged_run: tuple[Store, Snapshot, Snapshot]) -> None:
    store, judged, pairs = judged_run
    found_judge, found_pairs = stats_inputs(store, "r1")
    assert (found_judge.snapshot_id, found_pairs and found_pairs.snapshot_id) == (
        judged.snapshot_id, pairs.snapshot_id)
    snap, folder = stats_stage(store, "r1", PARAMS, judged, pairs, FAMILIES)
    assert snap.stage == "stats"
    assert set(snap.upstream_snapshot_ids) == {judged.snapshot_id, pairs.snapshot_id}
    for name in ("score_ci_weighted", "score_ci_unweighted", "score_diff_weighted",
                 "length_bias", "self_preference", "win_rates", "bradley_terry",
                 "position_bias"):
        assert (folder / f"{name}.parquet").is_file(), name
    assert "## " in (folder / "stats.md").read_text(encoding="utf-8") or \
        "### " in (folder / "stats.md").read_text(encoding="utf-8")
    # The CI's point estimate is Table 5's number, and the interval brackets it.
    cis = pl.read_parquet(folder / "score_ci_weighted.parquet")
    t5 = table5(judged.read())
    for row in t5.iter_rows(named=True):
        mine = cis.filter((pl.col("model") == row["model"]) & (pl.col("cell") == "overall"))
        assert mine["mean"][0] == pytest.approx(row["overall"], abs=1e-9)
        assert mine["ci_lo"][0] <= mine["mean"][0] <= mine["ci_hi"][0]
    bt = pl.read_parquet(folder / "bradley_terry.parquet")
    assert sorted(bt["model"]) == sorted(WRITERS) and bt["rank"].to_list() == [1, 2, 3]
    # 3 writers → 3 pairs; every ok merged pair is counted once
    wins = pl.read_parquet(folder / "win_rates.parquet")
    merged = pairs.read()
    assert wins.height == 3
    assert int(wins["n"].sum()) == merged.filter(pl.col("status") == "ok").height
    # self-preference: the qwen judge's own family is qwen-writer
    sp = pl.read_parquet(folder / "self_preference.parquet")
    assert sp["family"].to_list() == ["qwen"]
    own = judged.read().filter((pl.col("model") == "qwen-writer") & (pl.col("status") == "ok"))
    assert sp["own_mean"][0] == pytest.approx(own["score_weighted"].mean(), abs=1e-9)
    # seeded: the same inputs and params give the same content-addressed snapshot
    again, _ = stats_stage(store, "r1", PARAMS, judged, pairs, FAMILIES)
    assert again.snapshot_id == snap.snapshot_id


def test_stats_stage_refuses_the_wrong_snapshot(judged_run: tuple[Store, Snapshot, Snapshot]
                                                ) -> None:
    store, _, pairs = judged_run
    with pytest.raises(ValueError, match="reads a 'judge' snapshot"):
        stats_stage(store, "r1", PARAMS, pairs)
    with pytest.raises(LookupError, match="no successful 'judge'"):
        stats_inputs(store, "no-such-run")


def _judge_means(judged: Snapshot) -> dict[str, float]:
    ok = judged.read().filter(pl.col("status") == "ok")
    return {str(m): float(s) for m, s in ok.group_by("model").agg(
        pl.col("score_weighted").mean()).iter_rows()}


def test_agreement_stage_pairwise_annotations(judged_run: tuple[Store, Snapshot, Snapshot],
                                              tmp_path: Path) -> None:
    store, judged, _ = judged_run
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


def test_agreement_stage_absolute_with_tiers(judged_run: tuple[Store, Snapshot, Snapshot],
                                             tmp_path: Path) -> None:
    store, judged, _ = judged_run
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
