"""The end-to-end half of ``benchmarks/cost_at_equal_power.py`` (``--e2e``; issue 26 item 4):
the real pipeline stages (``stages.pipeline.run_stages``: generate → judge → aggregate, the
same library calls the Prefect pipeline's task makes) on the project's fake OpenAI-
compatible server, full factorial against ``sampling: mode: adaptive``.

Week 1 runs in full (the baseline). Week 2 runs twice on copies of that store, in full and
adaptive, with one writer scored lower (a real change). The fake judge's scores are
scripted per writer and genre (the writers really differ; the genre spread gives each
prompt its own level), so both modes see the same truth. Printed per mode: prompts
sampled, paid calls and dollars from the ledger (each ledger row is one paid logical call;
``cost_usd`` at the registry prices of ``configs/models.examples.yaml``: writers at
gpt-4o-mini's, the judge at deepseek-chat's), and each question's decision — the full
factorial's from fixed-n paired t-intervals over all prompts (direction when the interval
excludes 0, "no change"/"equivalent" when it lies inside ±min_effect), the adaptive run's
from its ``adaptive`` snapshot — and whether they agree.

Run: ``.venv/bin/python benchmarks/cost_at_equal_power.py --e2e`` (about a minute).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any, NamedTuple

import duckdb
import numpy as np
from scipy import stats as sps

from essaybench.bench.adaptive_scores import prompt_scores
from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.rubrics import load_rubric, rubrics_dir
from essaybench.core.paths import PROJECT_ROOT
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.registry import ModelSpec, Registry, load_registry
from essaybench.stages.pipeline import run_stages
from essaybench.store import Snapshot, Store

GENRES = ("argumentative", "narrative", "descriptive", "expository")
MARKS = {"writer-a": "【甲】", "writer-b": "【乙】", "writer-c": "【丙】", "writer-d": "【丁】"}
# sub-question level (1–10) per writer and genre; week 2 lowers writer-d by CHANGE
LEVELS = {"writer-a": (9, 8, 9, 8), "writer-b": (7, 6, 7, 6), "writer-c": (5, 5, 4, 6),
          "writer-d": (4, 3, 4, 3)}
CHANGE = ("writer-d", 2)
CHOSEN = "narrative"  # the genre every open-genre essay chose, as the judge says
GENRE_QUESTION = "待判断的作文"
EXAMPLES = PROJECT_ROOT / "configs" / "models.examples.yaml"
WRITER_PRICES, JUDGE_PRICES = "gpt-4o-mini", "deepseek-chat"


def _rules(levels: Mapping[str, Sequence[int]]) -> list[dict[str, object]]:
    rubric = load_rubric()
    rules: list[dict[str, object]] = [
        {"contains": [mark, GENRE_QUESTION], "reply": json.dumps({"genre": CHOSEN}),
         "echo_constants": True} for mark in MARKS.values()]
    for g, genre in enumerate(GENRES):
        ids = rubric.question_ids(genre)
        for writer, mark in MARKS.items():
            scores = {q: max(1, min(10, levels[writer][g] + (i % 3) - 1))
                      for i, q in enumerate(ids)}
            rules.append({"contains": [mark, ids[0] + "："], "reply": json.dumps(
                {"analysis": "结构清楚。", "scores": scores}, ensure_ascii=False)})
    return rules


def scenario(levels: Mapping[str, Sequence[int]]) -> FakeScenario:
    writers = {w: {"reply": "template", "template": mark + "{prompt}"}
               for w, mark in MARKS.items()}
    return FakeScenario.model_validate({"models": {
        **writers, "judge": {"rules": _rules(levels), "enforce_max_tokens": False}}})


def registry(base_url: str) -> Registry:
    """The fake models at the example registry's prices."""
    examples = load_registry(EXAMPLES)
    common: dict[str, Any] = {
        "provider": "fake", "family": "fake", "structured_output": "json_schema",
        "max_concurrency": 8, "timeout_s": 10, "max_retries": 0, "max_reasks": 1,
        "base_url": base_url}

    def spec(name: str, priced: str) -> ModelSpec:
        p = examples.get(priced)
        return ModelSpec(name=name, model_id=name, price_input_per_mtok=p.price_input_per_mtok,
                         price_output_per_mtok=p.price_output_per_mtok, **common)

    return Registry(models={**{w: spec(w, WRITER_PRICES) for w in MARKS},
                            "judge": spec("judge", JUDGE_PRICES)})


def config(sampling: Mapping[str, Any]) -> BenchmarkConfig:
    return BenchmarkConfig.model_validate({
        "generate": {"models": list(MARKS)}, "drift": None, "sampling": dict(sampling),
        "judge": {"judges": ["judge"],
                  "judge_prompt": str(rubrics_dir() / "judge_prompt.v1.yaml")}})


class Paid(NamedTuple):
    # (a NamedTuple, not a dataclass: the main script loads this file without putting it
    # in sys.modules, where a dataclass looks its module up)
    calls: int
    usd: float


def paid(store: Store, run_id: str) -> Paid:
    with duckdb.connect(str(store.root / "ledger.duckdb"), read_only=True) as con:
        row = con.execute("SELECT count(*), coalesce(sum(cost_usd), 0) FROM llm_calls "
                          "WHERE run_id = ?", [run_id]).fetchone()
    assert row is not None
    return Paid(int(row[0]), float(row[1]))


def fixed_n(diff: np.ndarray, alpha: float, min_effect: float) -> tuple[str, float, float]:
    """The full factorial's call on paired differences: a t-interval over the prompts."""
    d = diff[~np.isnan(diff)]
    half = float(sps.t.ppf(1 - alpha / 2, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size)) \
        if d.size > 1 else float("inf")
    lo, hi = float(d.mean()) - half, float(d.mean()) + half
    if lo > 0:
        return "first_better", lo, hi
    if hi < 0:
        return "second_better", lo, hi
    if min_effect > 0 and lo >= -min_effect and hi <= min_effect:
        return "within_effect", lo, hi
    return "undecided", lo, hi


def full_decisions(judged: Snapshot, before: Snapshot, alpha: float,
                   min_effect: float) -> dict[tuple[str, str, str], str]:
    table, last = judged.read(), before.read()
    prompts = sorted(set(table["prompt_id"].to_list()))
    writers = list(MARKS)
    now = prompt_scores(table, prompts, writers, "second_opinion")
    then = prompt_scores(last, prompts, writers, "second_opinion")
    out = {("pair", a, b): fixed_n(now[:, i] - now[:, j], alpha, min_effect)[0]
           for (i, a), (j, b) in combinations(enumerate(writers), 2)}
    out.update({("change", w, w): fixed_n(now[:, i] - then[:, i], alpha, min_effect)[0]
                for i, w in enumerate(writers)})
    return out


def curated_store(root: Path) -> Store:
    from essaybench.curate.config import load_curate_config
    from essaybench.curate.funnel import CURATE_STAGES
    from essaybench.stages.curate import publish_prompt_set, run_curation_stage

    store = Store(root)
    snap = None
    for stage in CURATE_STAGES:
        snap = run_curation_stage(store, "curate", stage,
                                  load_curate_config(PROJECT_ROOT / "configs" / "curate.yaml"),
                                  snap)
    assert snap is not None
    publish_prompt_set(store, "curate", snap)
    return store


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cost_at_equal_power.py --e2e")
    p.add_argument("--round-size", type=int, default=10)
    p.add_argument("--floor", type=int, default=2, help="prompts per stratum before a stop")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--min-effect", type=float, default=5.0, help="points on 0–100")
    p.add_argument("--ask", choices=("all", "pairs", "changes"), default="all")
    p.add_argument("--workdir", type=Path, default=None, help="keep the stores here")
    return p


def main(argv: list[str] | None = None) -> int:
    # The main script's other options may come along: only ours are read.
    args, _ = parser().parse_known_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="cost-e2e-"))
    base = curated_store(work / "week1")
    sampling = {"mode": "adaptive", "round_size": args.round_size,
                "floor_per_stratum": args.floor, "alpha": args.alpha,
                "min_effect": args.min_effect, "ask": args.ask}
    changed = {**LEVELS, CHANGE[0]: tuple(v - CHANGE[1] for v in LEVELS[CHANGE[0]])}
    stages = ["generate", "judge", "aggregate"]
    with run_fake_server(scenario(LEVELS)) as server:
        week1 = run_stages(base, "w1", config({"mode": "full"}), stages, None,
                           registry=registry(server.base_url))
    results: dict[str, tuple[Store, dict[str, Snapshot]]] = {}
    for mode in ("full", "adaptive"):
        store = Store(shutil.copytree(base.root, work / f"week2-{mode}"))
        with run_fake_server(scenario(changed)) as server:
            results[mode] = store, run_stages(store, "w2", config({**sampling, "mode": mode}),
                                              stages, None, registry=registry(server.base_url))
    (full_store, full), (ad_store, ad) = results["full"], results["adaptive"]
    truth = full_decisions(full["judge"], week1["judge"], args.alpha, args.min_effect)
    rows = {(r["kind"], r["first"], r["second"]): r
            for r in ad["adaptive"].read().iter_rows(named=True)}
    decided = {k: r["outcome"] for k, r in rows.items()}
    meta = ad["adaptive"].meta or {}
    pf, pa = paid(full_store, "w2"), paid(ad_store, "w2")
    print(f"fake-server end to end ({len(MARKS)} writers, 1 judge; week 2 lowers "
          f"{CHANGE[0]} by {CHANGE[1]} per sub-question); stores in {work}")
    print(f"{'mode':<9}{'prompts':>8}{'paid calls':>12}{'USD':>11}")
    print(f"{'full':<9}{full['generate'].read()['prompt_id'].n_unique():>8}{pf.calls:>12}"
          f"{pf.usd:>11.4f}")
    print(f"{'adaptive':<9}{meta.get('sampled', 0):>8}{pa.calls:>12}{pa.usd:>11.4f}"
          f"   stop: {meta.get('stop')}, baseline {meta.get('baseline')}")
    print(f"saved: {1 - pa.calls / pf.calls:.0%} of paid calls, {1 - pa.usd / pf.usd:.0%} "
          "of dollars")
    agree = 0
    for key, full_call in truth.items():
        got = decided.get(key, "not asked")
        agree += got == full_call
        kind, first, second = key
        name = f"{first} − {second}" if kind == "pair" else f"{first}: week 2 − week 1"
        at = rows[key]["decided_at_prompts"] if key in rows else None
        verdict = "" if key not in rows else "agree" if got == full_call else "DIFFER"
        print(f"  {name:<26} full: {full_call:<14} adaptive: {got:<14}"
              f"{f'at {at:>3}' if at is not None else '      '}  {verdict}")
    print(f"decisions agree: {agree} of {len(rows)} asked (ask: {args.ask})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
