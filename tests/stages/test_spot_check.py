"""Weekly spot checks end to end: two runs on the fake server (r1 from the ``judged_run``
fixture, r2 judged here), a blind pack each, filled programmatically, imported through the
CLI, agreement per week checked against an independent computation, the trend, the gold
promotion, and bad packs refused in one line (exit 2)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats
from typer.testing import CliRunner

from essaybench.bench.rubrics import load_rubric
from essaybench.cli import app
from essaybench.store import Snapshot, Store
from tests.helpers import JUDGED_FAMILIES, JUDGED_WRITERS

RUBRIC = load_rubric()
JUDGE = "qwen-judge"


@pytest.fixture(autouse=True)
def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """A wide console whatever runs the tests (CI: COLUMNS=80): rich read the width once,
    when the console was made, so $COLUMNS set here would change nothing."""
    from essaybench.cli.common import console

    monkeypatch.setattr(console, "_width", 250)


def _cli(*args: str) -> tuple[int, str]:
    out = CliRunner().invoke(app, list(args))
    return out.exit_code, " ".join(out.output.replace("│", " ").split())


def _second_run(store: Store) -> Snapshot:
    """Run "r2" on ``store``: the same writers and judge, another fake reply per writer."""
    from essaybench.bench.config import BenchmarkConfig
    from essaybench.bench.generate import GenerateParams
    from essaybench.bench.judge.request import JudgeParams
    from essaybench.llm.fake.scenario import FakeScenario
    from essaybench.llm.fake.server import run_fake_server
    from essaybench.llm.session import open_gateway
    from essaybench.stages.generate import generate_stage
    from essaybench.stages.judge import judge_stage
    from tests.llm.conftest import fake_spec, registry_of

    config = BenchmarkConfig(per_genre=4, generate=GenerateParams(models=JUDGED_WRITERS),
                             judge=JudgeParams(judges=[JUDGE]))
    models = [*JUDGED_WRITERS, JUDGE]
    registry = registry_of(*(fake_spec(m, model_id=m, family=JUDGED_FAMILIES[m])
                             for m in models))
    scenario = FakeScenario.model_validate({"models": {"*": {
        "reply": "template", "template": "第二周 {model}：{prompt}"}}})
    with run_fake_server(scenario) as server, open_gateway(
            registry, store.root, models, base_urls=dict.fromkeys(models, server.base_url)
    ) as session:
        gen = generate_stage(store, "r2", config, session)
        return judge_stage(store, "r2", config, gen, session)


def _judge_scores(judged: pl.DataFrame) -> dict[tuple[str, str, int], dict[str, int]]:
    return {(p, m, int(s)): json.loads(q) for p, m, s, q, st in judged.select(
        "prompt_id", "model", "sample_index", "scores", "status").iter_rows() if st == "ok"}


def _fill(store: Store, run: str, judged: pl.DataFrame, out: Path, seed: int,
          accept: int = 0) -> Path:
    """Two annotators score every item: the judge's score plus seeded noise, clipped."""
    pack = store.root / "spotcheck" / run / "pack" / "pack.csv"
    key = json.loads((store.root / "spotcheck" / run / "key.json").read_text("utf-8"))
    judge = _judge_scores(judged)
    rng = np.random.default_rng(seed)
    with pack.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        header, rows = list(reader.fieldnames or []), list(reader)
    filled = []
    for who in ("zhang", "li"):
        for i, row in enumerate(rows):
            item = key["items"][row["item_id"]]
            q = judge[(item["prompt_id"], item["model"], item["sample_index"])]
            filled.append({**row, "annotator": who, "accept": "yes" if i < accept else "",
                           **{k: str(int(np.clip(v + rng.integers(-2, 3), 1, 10)))
                              for k, v in q.items()}})
    with out.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=header)
        writer.writeheader()
        writer.writerows(filled)
    return out


def _essay_score(scores: dict[str, int], genre: str) -> float:
    """The rubric's 0–100 weighted score, written out here (α^depth, max all 10s)."""
    traits = RUBRIC.genre(genre).traits
    alpha = RUBRIC.alpha_default
    got = sum(alpha ** t.depth * sum(scores[q.id] for q in t.questions) for t in traits)
    best = sum(alpha ** t.depth * 10 * len(t.questions) for t in traits)
    return 100 * got / best


def _quadratic_kappa(a: np.ndarray, b: np.ndarray) -> float:
    cats = np.arange(min(a.min(), b.min()), max(a.max(), b.max()) + 1)
    k = len(cats)
    observed = np.zeros((k, k))
    for x, y in zip(a, b, strict=True):
        observed[x - cats[0], y - cats[0]] += 1
    expected = np.outer(observed.sum(1), observed.sum(0)) / observed.sum()
    i, j = np.meshgrid(range(k), range(k), indexing="ij")
    w = (i - j) ** 2 / (k - 1) ** 2
    return float(1 - (w * observed).sum() / (w * expected).sum())


def _expected(filled: Path, store: Store, run: str, judged: pl.DataFrame) -> dict[str, float]:
    key = json.loads((store.root / "spotcheck" / run / "key.json").read_text("utf-8"))
    judge = _judge_scores(judged)
    weighted = {(p, m, int(s)): w for p, m, s, w in judged.select(
        "prompt_id", "model", "sample_index", "score_weighted").iter_rows()}
    human: dict[tuple[str, str, int], list[float]] = {}
    pairs: list[tuple[int, int]] = []
    for row in csv.DictReader(filled.open(encoding="utf-8", newline="")):
        item = key["items"][row["item_id"]]
        essay = (item["prompt_id"], item["model"], item["sample_index"])
        mine = {q: int(row[q]) for q in RUBRIC.question_ids(item["genre"])}
        human.setdefault(essay, []).append(_essay_score(mine, item["genre"]))
        pairs += [(mine[q], judge[essay][q]) for q in mine]
        # the formula written here is the judge's own
        assert _essay_score(judge[essay], item["genre"]) == pytest.approx(weighted[essay])
    essays = sorted(human)
    h = np.array([np.mean(human[e]) for e in essays])
    j = np.array([weighted[e] for e in essays])
    a, b = (np.array(x) for x in zip(*pairs, strict=True))
    return {"n_essays": len(essays), "spearman": stats.spearmanr(h, j)[0],
            "kendall": stats.kendalltau(h, j)[0], "mean_abs_diff": float(np.abs(h - j).mean()),
            "question_exact": float(np.mean(a == b)),
            "question_within_one": float(np.mean(np.abs(a - b) <= 1)),
            "question_kappa_quadratic": _quadratic_kappa(a, b)}


def _scan_blind(store: Store, run: str, judged: pl.DataFrame) -> None:
    folder = store.root / "spotcheck" / run / "pack"
    assert sorted(p.name for p in folder.iterdir()) == ["form.html", "pack.csv"]
    names = {*JUDGED_WRITERS, JUDGE, *judged["judge_returned_model"].drop_nulls().to_list()}
    scores = set()
    for column in ("score_weighted", "score_unweighted"):
        for v in judged[column].drop_nulls().to_list():
            scores |= {repr(v), f"{v:.1f}", f"{v:.2f}", f"{v:.3f}"}
    for path in folder.iterdir():
        text = path.read_text(encoding="utf-8")
        for name in names:
            assert name.lower() not in text.lower(), (path.name, name)
        for score in scores:
            assert score not in text, (path.name, score)
        assert "〈模型〉" in text  # the fake essays name their writer: masked


def _check_report(store: Store, runs: dict[str, tuple[pl.DataFrame, str]]) -> None:
    """The report of r2 shows both weeks (table and chart); r1's shows only its own."""
    from essaybench.report.data import load_run
    from essaybench.report.page import render_report

    page = render_report(load_run(store, "r2"))
    section = page[page.index('<section id="spot-checks">'):]
    section = section[:section.index("</section>")]
    assert "<svg" in section
    rows = [pl.read_parquet(store.root / "spotcheck" / r / "agreement.parquet").row(
        0, named=True) for r in runs]
    for row in rows:
        assert f"<td>{row['week']}</td><td><code>{row['run_id']}</code></td>" in section
        assert f"{row['spearman']:.3f}" in section
    assert section.index("2026-W48") < section.index("2026-W49")
    early = render_report(load_run(store, "r1"))
    early = early[early.index('<section id="spot-checks">'):]
    early = early[:early.index("</section>")]
    assert "2026-W48" in early and "2026-W49" not in early and "<svg" not in early


@pytest.mark.slow
def test_weekly_spot_check_two_weeks(judged_copy: tuple[Store, Snapshot, Snapshot],
                                     tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, judged1, _ = judged_copy
    judged2 = _second_run(store)
    root = str(store.root)
    runs = {"r1": (judged1.read(), "2026-W48"), "r2": (judged2.read(), "2026-W49")}
    for seed, (run, (judged, week)) in enumerate(runs.items()):
        code, out = _cli("spot-check", "--run", run, "--n", "9", "--seed", "5",
                         "--store", root)
        assert code == 0, out
        pack = (store.root / "spotcheck" / run / "pack" / "pack.csv").read_bytes()
        assert _cli("spot-check", "--run", run, "--n", "9", "--seed", "5",
                    "--store", root)[0] == 0
        assert (store.root / "spotcheck" / run / "pack" / "pack.csv").read_bytes() == pack
        genres = pl.read_csv(store.root / "spotcheck" / run / "pack" / "pack.csv")
        assert genres.height == 9 and genres["writer"].n_unique() == 3
        _scan_blind(store, run, judged)
        filled = _fill(store, run, judged, tmp_path / f"{run}.csv", seed, accept=2)
        code, out = _cli("spot-check-import", "--run", run, "--filled", str(filled),
                         "--week", week, "--store", root)
        assert code == 0, out
        row = pl.read_parquet(store.root / "spotcheck" / run / "agreement.parquet").row(
            0, named=True)
        expected = _expected(filled, store, run, judged)
        assert row["week"] == week and row["n_annotators"] == 2
        for name, value in expected.items():
            assert row[name] == pytest.approx(value, abs=1e-9), name
        # the mapped-back file is an absolute annotation file `essaybench agreement` reads
        mapped = [json.loads(x) for x in (store.root / "spotcheck" / run
                                          / "annotations.jsonl").read_text("utf-8").split("\n")
                  if x]
        assert {m["model"] for m in mapped} <= set(JUDGED_WRITERS) and len(mapped) == 18
    code, out = _cli("spot-check-trend", "--store", root)
    assert code == 0, out
    assert out.index("2026-W48") < out.index("2026-W49")
    assert "r1" in out and "r2" in out
    _check_report(store, runs)
    gold = tmp_path / "gold"
    code, out = _cli("spot-check-promote", "--run", "r1", "--gold", str(gold), "--store", root)
    assert code == 0, out
    code, out = _cli("spot-check-promote", "--run", "r2", "--gold", str(gold), "--store", root)
    assert code == 0, out
    v1 = (gold / "spot_gold.v1.jsonl").read_text("utf-8").splitlines()
    v2 = [json.loads(x) for x in (gold / "spot_gold.v2.jsonl").read_text("utf-8").splitlines()]
    added = int(out.split(": ")[-1].split()[0])
    assert len(v1) == 2 and len(v2) == 2 + added and [json.loads(x) for x in v1] == v2[:2]
    # r2 accepted two items; an essay already in v1 (same text) is not added twice
    accepted_r2 = {str(x) for x in pl.read_parquet(
        store.root / "spotcheck" / "r2" / "questions.parquet").filter(
        pl.col("accept"))["item_id"].unique()}
    shas = [item["essay_sha256"] for item in v2]
    assert len(set(shas)) == len(shas) and len(accepted_r2) == 2
    assert added == len({i["essay_sha256"] for i in v2 if i["item_id"] in accepted_r2})
    questions = pl.concat([pl.read_parquet(store.root / "spotcheck" / r / "questions.parquet")
                           for r in runs])
    for item in v2:
        assert set(item) == {"prompt_id", "genre", "prompt_text", "essay_text", "human_scores",
                             "human_score", "annotators", "source_run", "item_id",
                             "essay_sha256"}
        assert item["annotators"] == ["li", "zhang"]
        mine = questions.filter(pl.col("item_id") == item["item_id"])
        per_annotator = [_essay_score(dict(zip(g["question"], g["human"], strict=True)),
                                      item["genre"])
                         for _, g in mine.group_by("annotator")]
        assert len(per_annotator) == 2
        assert item["human_score"] == pytest.approx(np.mean(per_annotator))
        means = mine.group_by("question").agg(pl.col("human").mean())
        assert item["human_scores"] == pytest.approx(
            dict(zip(means["question"], means["human"], strict=True)))
    # the promoted version is a gold set of the run's prompt set: per prompt its best
    # human-scored essay is the reference
    from essaybench.stages.gold import attach_gold_file

    version = str(store.require_ok_snapshot("generate", "r1", "test").read()[
        "prompt_set_version"][0])
    attached, _ = attach_gold_file(store, gold / "spot_gold.v2.jsonl", version)
    assert attached.record.version == "spot-v2" and attached.record.format == "spot_jsonl"
    for ref in attached.loaded.gold.items:
        best = max(i["human_score"] for i in v2 if i["prompt_id"] == ref.prompt_id)
        assert ref.human_score == best and ref.reference in {
            i["essay_text"] for i in v2 if i["human_score"] == best}


@pytest.mark.parametrize(("column", "value", "message"), [
    ("item_id", "I00000000", "column 'item_id': unknown item 'I00000000'"),
    ("score", "11", "is not an integer from 1 to 10"),
    ("score", "", "missing score"),
])
def test_bad_pack_is_one_line_exit_2(judged_copy: tuple[Store, Snapshot, Snapshot],
                                     tmp_path: Path, column: str, value: str,
                                     message: str) -> None:
    store, judged, _ = judged_copy
    root = str(store.root)
    assert _cli("spot-check", "--run", "r1", "--n", "4", "--store", root)[0] == 0
    filled = _fill(store, "r1", judged.read(), tmp_path / "f.csv", 0)
    rows = list(csv.DictReader(filled.open(encoding="utf-8", newline="")))
    item = json.loads((store.root / "spotcheck" / "r1" / "key.json").read_text("utf-8"))[
        "items"][rows[1]["item_id"]]
    target = RUBRIC.question_ids(item["genre"])[0] if column == "score" else column
    rows[1][target] = value
    with filled.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    code, out = _cli("spot-check-import", "--run", "r1", "--filled", str(filled),
                     "--store", root)
    assert code == 2, out
    assert f"f.csv:3: {message}" in out or (f"f.csv:3: column '{target}': " in out
                                             and message in out), out
    assert "Traceback" not in out
    assert not (store.root / "spotcheck" / "r1" / "agreement.parquet").exists()


def test_an_older_pack_stays_importable(judged_copy: tuple[Store, Snapshot, Snapshot],
                                        tmp_path: Path) -> None:
    store, judged, _ = judged_copy
    root = str(store.root)
    assert _cli("spot-check", "--run", "r1", "--n", "4", "--seed", "1", "--store", root)[0] == 0
    first = _fill(store, "r1", judged.read(), tmp_path / "first.csv", 0)
    assert _cli("spot-check", "--run", "r1", "--n", "6", "--seed", "2", "--store", root)[0] == 0
    code, out = _cli("spot-check-import", "--run", "r1", "--filled", str(first),
                     "--store", root)
    assert code == 0, out
    assert pl.read_parquet(store.root / "spotcheck" / "r1" / "agreement.parquet")[
        "n_essays"][0] == 4


@pytest.mark.parametrize(("args", "message"), [
    (["spot-check", "--run", "nope", "--n", "3"], "no successful 'judge' snapshot in run nope"),
    (["spot-check-import", "--run", "r1", "--filled", "x.csv"],
     "no pack was made for run r1"),
    (["spot-check-promote", "--run", "r1", "--gold", "g"], "nothing imported for run r1"),
])
def test_user_mistakes_are_one_line(judged_copy: tuple[Store, Snapshot, Snapshot],
                                    args: list[str], message: str) -> None:
    store, _, _ = judged_copy
    code, out = _cli(*args, "--store", str(store.root))
    assert code == 2, out
    assert message in out and "Traceback" not in out
