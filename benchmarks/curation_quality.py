"""Curation quality on the team's labelled evaluation set: rules only, and rules + an LLM.

    python benchmarks/curation_quality.py                           # rules only
    python benchmarks/curation_quality.py --labeler-model smollm2-135m \\
        --registry configs/models.yaml                              # also rules + that model

The set is ``data/eval/curation_eval.v1.jsonl`` plus the labelled sample of
``../shared/data/writingbench_zh_queries`` (``data/eval/writingbench_zh_labels.v1.jsonl``:
line numbers and labels only; the texts are read from ../shared, and that part is
skipped with a message where it is absent). Every prompt goes through the real filter
and classify stages (configs/curate.yaml's filter settings and its ``keep_genre_choice``:
open and multi-genre prompts are published, so a non-essay the rules call open would
leak). Printed per mode: per-class
precision/recall, the genre confusion matrix, Open/Constrained accuracy, body-length
extraction accuracy, the non-essay leak rate, the prompts left for review with their
reason, and whether the rules-only targets are met (genre precision >= 0.95 among the
prompts the rules decide, >= 85% of essays decided, no non-essay published). Exit code
1 when a rules-only target is missed.

The set was written by the people who wrote the rules: its figures guard against
regressions and show what the rules do on the kinds of prompts it holds; they are not
a measure on unseen data.

The held-out public prompts (issue 29 item 5, ``--set public`` alone, both by default):
``data/eval/heldout_public/heldout_public.v1.jsonl``, real prompts from public
repositories (gaokao exam items, public writing-request sets) with their provenance,
labelled before the rules were changed for them. The rules have since been fixed against
them (and against the ../shared held-out prompts below), so both now guard against
regressions like the team set: printed as "public prompts (tuned since)", not as a
measure on unseen prompts. The same report (Open/Constrained and
body length are not labelled there) and issue 29's targets on it, rules only: genre
precision >= 0.97 among decided prompts, >= 90% of essays decided, no non-essay
published (exit code 1 when missed); the adversarial labellers run on it too.

Adversarial labellers (issue 30; ``--skip-adversaries`` leaves them out): the fake server
scripted as labellers that stay inside the answer schema and answer "essay,
argumentative" for everything they are asked, with evidence from the task
(``always_genre``), the template's placeholder (``placeholder``) or the material
(``material``). For the team set and for the held-out real prompts of ../shared/data
(``data/eval/shared_heldout_labels.v1.jsonl``, labelled before the issue-30 rule changes;
skipped with a message where ../shared is absent) it prints the non-essays published and
those the labeller published. Target: 0 published by the ``always_genre`` labeller (exit
code 1 otherwise).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root

from essaybench.core.paths import PROJECT_ROOT
from essaybench.curate.classify import ClassifyParams
from essaybench.curate.config import load_curate_config
from essaybench.curate.filter import FilterParams
from essaybench.curate.labeler import PromptLabeler
from essaybench.curate.llm_labeler import GatewayLabeler
from essaybench.curate.quality import (
    PRED_CLASSES,
    TRUE_CLASSES,
    EvalItem,
    Evaluation,
    Outcome,
    QualityReport,
    evaluate,
    load_eval_set,
    load_writingbench_labels,
    quality_report,
    targets_met,
)
from essaybench.curate.quality_heldout import LabelledText, leak_report, load_shared_heldout
from essaybench.curate.quality_public import load_public_set, public_targets_met
from essaybench.llm.registry import load_registry
from essaybench.llm.session import open_gateway

EVAL_SET = PROJECT_ROOT / "data" / "eval" / "curation_eval.v1.jsonl"
HELDOUT_LABELS = PROJECT_ROOT / "data" / "eval" / "shared_heldout_labels.v1.jsonl"
PUBLIC_SET = PROJECT_ROOT / "data" / "eval" / "heldout_public" / "heldout_public.v1.jsonl"
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"
WB_LABELS = PROJECT_ROOT / "data" / "eval" / "writingbench_zh_labels.v1.jsonl"
WB_QUERIES = (PROJECT_ROOT.parent / "shared" / "data" / "writingbench_zh_queries"
              / "zh_queries.jsonl")


def _pct(x: float | None) -> str:
    return "   n/a" if x is None else f"{100 * x:5.1f}%"


def format_report(title: str, report: QualityReport, outcomes: Sequence[Outcome],
                  list_undecided: int) -> str:
    lines = [f"== {title}: {report.n} prompts ({report.n_essays} essays, "
             f"{report.non_essays} non-essays)", "", "per class      precision  recall  n"]
    for cls, (p, r, n) in report.per_class.items():
        lines.append(f"  {cls:<13} {_pct(p)}  {_pct(r)}  {n}")
    lines += ["", "confusion (rows: label, columns: prediction)",
              "  " + " " * 13 + "".join(f"{c[:8]:>9}" for c in PRED_CLASSES)]
    for cls in TRUE_CLASSES:
        lines.append(f"  {cls:<13}" + "".join(f"{report.confusion[cls][c]:>9}"
                                                for c in PRED_CLASSES))
    lines += [
        "",
        f"genre precision among decided  {_pct(report.genre_precision)} "
        f"({report.decided_correct}/{report.decided}; a non-essay given a genre counts wrong)",
        f"essays decided                 {_pct(report.decided_share)} "
        f"({report.essays_decided}/{report.n_essays}; genre, choice of genres or open genre)",
        f"Open/Constrained accuracy      {_pct(report.set_accuracy)} "
        f"({report.set_correct}/{report.set_checked} essays with a set label)",
        f"body length extraction         {_pct(report.length_accuracy)} "
        f"({report.length_correct}/{report.length_checked} essays with a length label: "
        "(min, max, approx) exact)",
        f"non-essays past the filter     {report.reached_classify}/{report.non_essays}",
        f"non-essay leak (published)     {_pct(report.leak_rate)} "
        f"({len(report.leaked)}/{report.non_essays}{': ' if report.leaked else ''}"
        f"{', '.join(report.leaked)})",
    ]
    review = [o for o in outcomes if o.decision == "unclassified"]
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(
        {r: sum(o.reason == r for o in review) for r in {o.reason for o in review}}.items(),
        key=lambda kv: str(kv[0])))
    lines += ["", f"left for review (override file): {len(review)} prompts ({reasons})"]
    for o in review[:list_undecided]:
        lines.append(f"  {o.item.id} [{o.reason}] {o.detail[:150]}")
    if len(review) > list_undecided:
        lines.append(f"  … {len(review) - list_undecided} more (--list-undecided N)")
    return "\n".join(lines)


def _items(args: argparse.Namespace) -> list[EvalItem]:
    items = load_eval_set(args.eval_set)
    if args.skip_writingbench:
        return items
    if WB_QUERIES.is_file():
        items += load_writingbench_labels(WB_LABELS, WB_QUERIES)
    else:
        print(f"skipping the WritingBench sample: {WB_QUERIES} is absent (../shared/data "
              "is not on this machine)", file=sys.stderr)
    return items


def _with_llm(items: list[EvalItem], args: argparse.Namespace, base: ClassifyParams,
              filter_params: FilterParams) -> Evaluation:
    params = base.model_copy(update={"mode": "rules+llm", "llm_model": args.labeler_model})
    with tempfile.TemporaryDirectory() as tmp, open_gateway(
            load_registry(args.registry), args.store or Path(tmp),
            [args.labeler_model]) as session:
        labeler: PromptLabeler = GatewayLabeler(session.gateway, args.labeler_model)
        return evaluate(items, filter_params, params, labeler)


def heldout_items() -> list[LabelledText] | None:
    """The held-out real prompts, or None (with the reason on stderr) without ../shared."""
    if not SHARED_DATA.is_dir():
        print(f"skipping the held-out real prompts: {SHARED_DATA} is absent (../shared/data "
              "is not on this machine; its texts are never copied into the project)",
              file=sys.stderr)
        return None
    return load_shared_heldout(HELDOUT_LABELS, SHARED_DATA)


def adversary_section(name: str, items: Sequence[LabelledText], filter_params: FilterParams,
                      base: ClassifyParams) -> tuple[list[str], bool]:
    """The leak figures of rules only and of each adversarial labeller; whether the
    always-a-genre labeller published no non-essay."""
    from benchmarks.curation_adversary import MODES, adversary_report

    lines = [f"== {name}: {len(items)} prompts, adversarial labellers (fake server)",
             "-- rules only", *leak_report(items, filter_params, base).lines()]
    met = True
    for mode in MODES:
        report = adversary_report(items, mode, filter_params, base)
        lines += [f"-- rules + {mode} labeller (calls {report.llm_status})", *report.lines()]
        if mode == "always_genre":
            met = not report.published_by_llm
    lines.append(f"target: 0 non-essays published by the always_genre labeller: "
                 f"{'MET' if met else 'NOT MET'}")
    return lines, met


def public_section(path: Path, filter_params: FilterParams, base: ClassifyParams,
                   list_undecided: int) -> tuple[str, dict[str, bool], list[Outcome]]:
    """The rules-only report on the held-out public prompts and issue 29's targets on
    them (precision >= 0.97, >= 90% decided, no non-essay published)."""
    started = time.perf_counter()
    outcomes = evaluate(load_public_set(path), filter_params, base).outcomes
    report = quality_report(outcomes)
    met = {f"public prompts (tuned since): {k}": v
           for k, v in public_targets_met(report).items()}
    text = "\n".join([
        format_report(f"rules only, public prompts labelled first, rules tuned on them since "
                      f"({path.name})", report, outcomes,
                      list_undecided),
        f"({time.perf_counter() - started:.1f} s)",
        "\nrules-only targets on the public prompts (a regression guard now): " + "; ".join(
            f"{name.split(': ', 1)[1]} {'MET' if ok else 'NOT MET'}" for name, ok in met.items())])
    return text, met, outcomes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", dest="which", choices=("team", "public", "all"),
                        default="all", help="Which labelled set: the team set (with the "
                        "WritingBench sample and ../shared held-out prompts), the held-out "
                        "public prompts, or both (default).")
    parser.add_argument("--eval-set", type=Path, default=EVAL_SET)
    parser.add_argument("--public-set", type=Path, default=PUBLIC_SET)
    parser.add_argument("--skip-writingbench", action="store_true",
                        help="Only the --eval-set, not the labelled WritingBench sample nor "
                        "the held-out real prompts.")
    parser.add_argument("--labeler-model", help="Registry model for the rules+llm run.")
    parser.add_argument("--registry", type=Path,
                        help="Model registry (default: $ESSAYBENCH_MODELS or configs/models.yaml).")
    parser.add_argument("--store", type=Path, help="Ledger folder (default: a temporary one).")
    parser.add_argument("--overrides", help="Override file named in the review hints.")
    parser.add_argument("--list-undecided", type=int, default=15, metavar="N")
    parser.add_argument("--skip-adversaries", action="store_true",
                        help="Leave out the adversarial labellers (issue 30).")
    args = parser.parse_args(argv)
    config = load_curate_config(PROJECT_ROOT / "configs" / "curate.yaml")
    base = ClassifyParams(overrides_path=args.overrides,
                          keep_genre_choice=config.classify.keep_genre_choice)
    met: dict[str, bool] = {}
    sets: list[tuple[str, Sequence[LabelledText]]] = []
    if args.which in ("team", "all"):
        met |= _team_set(args, config.filter, base, sets)
    if args.which in ("public", "all"):
        text, public_met, outcomes = public_section(args.public_set, config.filter, base,
                                                    args.list_undecided)
        print(("\n" if met else "") + text)
        met |= public_met
        sets.append(("public prompts (tuned since)",
                     [LabelledText(o.item.id, o.item.text, o.item.is_essay) for o in outcomes]))
    if not args.skip_adversaries:
        for name, subset in sets:
            started = time.perf_counter()
            lines, ok = adversary_section(name, subset, config.filter, base)
            print("\n" + "\n".join(lines) + f"\n({time.perf_counter() - started:.1f} s)")
            met[f"{name}: no non-essay published by an always-a-genre labeller"] = ok
    return 0 if all(met.values()) else 1


def _team_set(args: argparse.Namespace, filter_params: FilterParams, base: ClassifyParams,
              sets: list[tuple[str, Sequence[LabelledText]]]) -> dict[str, bool]:
    """The team set's report (and rules + a labeller when asked); adds the sets whose
    adversarial figures follow."""
    items = _items(args)
    started = time.perf_counter()
    rules = evaluate(items, filter_params, base).outcomes
    report = quality_report(rules)
    print(format_report("rules only", report, rules, args.list_undecided))
    print(f"({time.perf_counter() - started:.1f} s)")
    met = targets_met(report)
    print("\nrules-only targets: " + "; ".join(
        f"{name} {'MET' if ok else 'NOT MET'}" for name, ok in met.items()))
    heldout = None if args.skip_writingbench else heldout_items()
    sets.append(("team set", [LabelledText(i.id, i.text, i.is_essay) for i in items]))
    if heldout is not None:
        sets.append(("../shared held-out prompts (tuned since)", heldout))
    if args.labeler_model:
        started = time.perf_counter()
        run = _with_llm(items, args, base, filter_params)
        llm, calls = run.outcomes, run.classify_meta["llm"]
        print()
        print(format_report(f"rules + {args.labeler_model}", quality_report(llm), llm,
                            args.list_undecided))
        changed = sum(a.pred_class != b.pred_class for a, b in zip(rules, llm, strict=True))
        rejected = sum("llm genre" in o.detail and "rejected:" in o.detail for o in llm)
        print(f"labeler: {calls['requests']} requests, statuses {calls['status']}, "
              f"{calls['incomplete']} without every label asked or accepted ({rejected} "
              "genres refused: evidence or essay-task cue)")
        print(f"({time.perf_counter() - started:.1f} s; {changed} predictions differ from "
              "rules only)")
        if heldout is not None:
            with tempfile.TemporaryDirectory() as tmp, open_gateway(
                    load_registry(args.registry), args.store or Path(tmp),
                    [args.labeler_model]) as session:
                labelled = leak_report(heldout, filter_params, base.model_copy(update={
                    "mode": "rules+llm", "llm_model": args.labeler_model}),
                    GatewayLabeler(session.gateway, args.labeler_model))
            print(f"\n-- held-out real prompts, rules + {args.labeler_model} "
                  f"(calls {labelled.llm_status})\n" + "\n".join(labelled.lines()))
    return met


if __name__ == "__main__":
    raise SystemExit(main())
