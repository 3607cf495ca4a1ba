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
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from essaybench.core.paths import PROJECT_ROOT
from essaybench.curate.classify import ClassifyParams
from essaybench.curate.config import load_curate_config
from essaybench.curate.filter import FilterParams
from essaybench.curate.labeler import PromptLabeler
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

EVAL_SET = PROJECT_ROOT / "data" / "eval" / "curation_eval.v1.jsonl"
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
        f"({report.length_correct}/{report.n_essays} essays: (min, max, approx) exact)",
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
    from essaybench.curate.llm_labeler import GatewayLabeler
    from essaybench.llm.registry import load_registry
    from essaybench.llm.session import open_gateway

    params = base.model_copy(update={"mode": "rules+llm", "llm_model": args.labeler_model})
    with tempfile.TemporaryDirectory() as tmp, open_gateway(
            load_registry(args.registry), args.store or Path(tmp),
            [args.labeler_model]) as session:
        labeler: PromptLabeler = GatewayLabeler(session.gateway, args.labeler_model)
        return evaluate(items, filter_params, params, labeler)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval-set", type=Path, default=EVAL_SET)
    parser.add_argument("--skip-writingbench", action="store_true",
                        help="Only the --eval-set, not the labelled WritingBench sample.")
    parser.add_argument("--labeler-model", help="Registry model for the rules+llm run.")
    parser.add_argument("--registry", type=Path,
                        help="Model registry (default: $ESSAYBENCH_MODELS or configs/models.yaml).")
    parser.add_argument("--store", type=Path, help="Ledger folder (default: a temporary one).")
    parser.add_argument("--overrides", help="Override file named in the review hints.")
    parser.add_argument("--list-undecided", type=int, default=15, metavar="N")
    args = parser.parse_args(argv)
    config = load_curate_config(PROJECT_ROOT / "configs" / "curate.yaml")
    items = _items(args)
    base = ClassifyParams(overrides_path=args.overrides,
                          keep_genre_choice=config.classify.keep_genre_choice)
    started = time.perf_counter()
    rules = evaluate(items, config.filter, base).outcomes
    report = quality_report(rules)
    print(format_report("rules only", report, rules, args.list_undecided))
    print(f"({time.perf_counter() - started:.1f} s)")
    met = targets_met(report)
    print("\nrules-only targets: " + "; ".join(
        f"{name} {'MET' if ok else 'NOT MET'}" for name, ok in met.items()))
    if args.labeler_model:
        started = time.perf_counter()
        run = _with_llm(items, args, base, config.filter)
        llm, calls = run.outcomes, run.classify_meta["llm"]
        print()
        print(format_report(f"rules + {args.labeler_model}", quality_report(llm), llm,
                            args.list_undecided))
        changed = sum(a.pred_class != b.pred_class for a, b in zip(rules, llm, strict=True))
        rejected = sum("in the material, not the task" in o.detail for o in llm)
        print(f"labeler: {calls['requests']} requests, statuses {calls['status']}, "
              f"{calls['incomplete']} without every label asked ({rejected} genres rejected: "
              "evidence only in the material)")
        print(f"({time.perf_counter() - started:.1f} s; {changed} predictions differ from "
              "rules only)")
    return 0 if all(met.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
