"""The judge-free signals (essaybench/bench/signals) calibrated on real answers.

    python benchmarks/signals_calibration.py [--data ../shared/data]

Relevance: the 3,875 answers of 20 LLMs to 204 Chinese writing prompts of
writingpreferencebench. On-topic pairs: each answer with its own prompt; off-topic pairs:
each answer with another prompt drawn at random (seed 0) — an answer to a different
question. Printed: AUC, and per threshold the share of own-prompt answers flagged (false
flags) and of swapped pairs flagged (detection).

Drift: the same data has one answer per model and prompt, so week-to-week resampling of
one model cannot be measured here (that is why the band is the model's own history).
Printed as reference points: the similarity of two *different* models' answers to the
same prompt (what a silent model swap looks like at most) and of answers to different
prompts (the floor).
"""

from __future__ import annotations

import argparse
import bisect
import json
import random
import statistics
from pathlib import Path

from essaybench.bench.signals.lexical import ngram_dice, rouge_l
from essaybench.bench.signals.relevance import relevance

WPB = "writingpreferencebench"


def load(data: Path) -> tuple[dict[str, str], list[dict[str, str]]]:
    prompts = {str(r["question_id"]): str(r["prompt"]) for r in map(
        json.loads, (data / WPB / "prompts.jsonl").open(encoding="utf-8"))}
    answers = [{"qid": str(r["question_id"]), "model": str(r["model_dir"]),
                "text": str(r["predict0"])}
               for r in map(json.loads, (data / WPB / "responses_scores.jsonl").open(
                   encoding="utf-8")) if r["predict0"]]
    return prompts, answers


def auc(pos: list[float], neg: list[float]) -> float:
    """P(a positive scores above a negative), ties half."""
    s = sorted(neg)
    return sum(bisect.bisect_left(s, x) + 0.5 * (bisect.bisect_right(s, x)
                                                  - bisect.bisect_left(s, x))
               for x in pos) / (len(pos) * len(neg))


def relevance_figures(prompts: dict[str, str], answers: list[dict[str, str]],
                      thresholds: tuple[float, ...]) -> dict[str, object]:
    rng = random.Random(0)
    ids = sorted(prompts)
    own: list[float] = []
    swapped: list[float] = []
    unchecked = 0
    for a in answers:
        score = relevance(prompts[a["qid"]], a["text"])
        if score is None:
            unchecked += 1
            continue
        own.append(score)
        other = rng.choice([i for i in ids if i != a["qid"]])
        s2 = relevance(prompts[other], a["text"])
        if s2 is not None:
            swapped.append(s2)
    rows = {f"{t:.2f}": {"false_flags": sum(x < t for x in own) / len(own),
                         "detected": sum(x < t for x in swapped) / len(swapped)}
            for t in thresholds}
    return {"n_own": len(own), "n_swapped": len(swapped), "unchecked": unchecked,
            "auc": auc(own, swapped), "median_own": statistics.median(own),
            "median_swapped": statistics.median(swapped), "thresholds": rows}


def drift_figures(answers: list[dict[str, str]], n_pairs: int) -> dict[str, object]:
    rng = random.Random(0)
    by_prompt: dict[str, list[str]] = {}
    for answer in answers:
        by_prompt.setdefault(answer["qid"], []).append(answer["text"])
    qids = sorted(q for q, texts in by_prompt.items() if len(texts) > 1)
    same, diff = [], []
    for _ in range(n_pairs):
        q = rng.choice(qids)
        a, b = rng.sample(by_prompt[q], 2)
        q2 = rng.choice([x for x in qids if x != q])
        same.append((rouge_l(a, b), ngram_dice(a, b)))
        diff.append((rouge_l(a, rng.choice(by_prompt[q2])),
                     ngram_dice(a, rng.choice(by_prompt[q2]))))

    def med(rows: list[tuple[float | None, float | None]], i: int) -> float:
        return statistics.median([v for r in rows if (v := r[i]) is not None])

    return {"n_pairs": n_pairs,
            "same_prompt_other_model": {"rouge_l": med(same, 0), "ngram_dice": med(same, 1)},
            "other_prompt": {"rouge_l": med(diff, 0), "ngram_dice": med(diff, 1)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--pairs", type=int, default=1000)
    args = parser.parse_args()
    prompts, answers = load(args.data)
    out = {"relevance": relevance_figures(prompts, answers,
                                          (0.02, 0.03, 0.04, 0.05, 0.08, 0.10)),
           "drift": drift_figures(answers, args.pairs)}
    print(json.dumps(out, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
