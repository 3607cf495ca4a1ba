"""Full factorial vs adaptive sampling on simulated weeks (issue 26 item 4, simulator
part): paid calls, dollars, agreement of the decisions, wrong "separated" claims.

A simulated week is built from real score structure — the Chinese half of
WritingPreferenceBench's human scores (``/work/shared/data/writingpreferencebench``, see
:mod:`benchmarks.heavy_tail_sim`): 8 real models' human scores per prompt mapped onto
0–100 (prompt effects and ceilings from the data), judge noise, off-task essays (heavy
lower tail, 7–11%), 3% failed judgments (excluded, never imputed). Per week:

* ``--prompts`` prompts (728: paper scale) drawn from the 204 real prompt rows, in 8
  strata of equal expected size (WPB has no genre × Open/Constrained labels, so the
  strata are assigned at random); 9 models: the 8 plus a clone of the 4th (equal true
  means, a pair that must never be called separated); 2 of the 9 change since last week
  by ±4–8 points, the others not (changes that must never be claimed); last week's
  scores exist for every prompt (a full run, or an adaptive one with the same seed).
* Full factorial: every prompt; decisions from the report's paired cluster t-intervals
  (``stats.cluster_t``) at 1 − alpha: excludes 0 → separated, inside ±min_effect →
  equivalent / no change.
* Adaptive: ``bench.adaptive`` (betting confidence sequences) read after every round of
  ``--round-size`` in the library's seeded order, stopping when all is decided and each
  stratum has its floor, or at ``--max-prompts``.
* Naive: the t-interval looked at after every round, stopping at the first separation:
  what optional stopping does without confidence sequences.

Cost: per prompt, each model writes once (``--writer-*`` tokens) and each judge scores
each essay once (rubric system message ``--judge-rubric-tokens``, cacheable, plus the
essay). The full factorial pays list price; adaptive is priced at list, with the batch
factor, and with batch + cached rubric input (assumption: the provider applies its cache
discount inside batches too; each genre's first call is a cache miss, ignored here).
Prices are USD per million tokens, defaults from ``configs/models.examples.yaml``.

    .venv/bin/python benchmarks/cost_at_equal_power.py [--weeks 120] [--min-effect 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root
from benchmarks import heavy_tail_sim as hts
from essaybench.bench.adaptive import AdaptiveOutcome, decide
from essaybench.bench.adaptive_order import AdaptiveOrder, SamplingParams, adaptive_order
from essaybench.bench.adaptive_run import StopReason, run_adaptive
from essaybench.stats.cluster_t import cluster_t_differences

FloatArray = hts.FloatArray
CLONE_OF = 3  # the clone copies the 4th weakest model
N_STRATA = 8
CODES = {AdaptiveOutcome.UNDECIDED: 0, AdaptiveOutcome.FIRST_BETTER: 1,
         AdaptiveOutcome.SECOND_BETTER: 2, AdaptiveOutcome.WITHIN_EFFECT: 3}


def _sample(rng: np.random.Generator, pop: hts.HeavyTailPopulation, levels: FloatArray,
            off: FloatArray) -> FloatArray:
    on = levels + rng.normal(0.0, hts.JUDGE_SD, size=levels.shape)
    miss = rng.random(levels.shape) < off[None, :]
    low = rng.normal(hts.OFF_TASK_MEAN, hts.OFF_TASK_SD, size=levels.shape)
    scores = np.clip(np.where(miss, low, on), *hts.BOUNDS)
    return np.where(rng.random(levels.shape) < hts.FAIL_RATE, np.nan, scores)


def _true_means(levels: FloatArray, off: FloatArray) -> FloatArray:
    on = hts.clipped_normal_mean(levels, hts.JUDGE_SD).mean(axis=0)
    return np.asarray((1 - off) * on + off * float(hts.clipped_normal_mean(
        hts.OFF_TASK_MEAN, hts.OFF_TASK_SD)), dtype=np.float64)


def simulate_week(rng: np.random.Generator, pop: hts.HeavyTailPopulation, n_prompts: int
                  ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(this week, last week) scores (n_prompts, 9) and the true pair differences and
    changes of every question, in :func:`decide`'s question order."""
    cols = [*range(pop.n_models), CLONE_OF]
    base = pop.levels[:, cols]
    off = pop.off_task[cols]
    shift = np.zeros(len(cols))
    moved = rng.choice(len(cols), size=2, replace=False)
    shift[moved] = rng.choice([-1.0, 1.0], size=2) * rng.uniform(4.0, 8.0, size=2)
    rows = rng.integers(0, base.shape[0], size=n_prompts)
    this = _sample(rng, pop, base[rows] + shift, off)
    last = _sample(rng, pop, base[rows], off)
    mean_now, mean_before = _true_means(base + shift, off), _true_means(base, off)
    k = len(cols)
    a, b = np.triu_indices(k, 1)
    return this, last, mean_now[a] - mean_now[b], mean_now - mean_before


def full_decisions(this: FloatArray, last: FloatArray, alpha: float,
                   min_effect: float) -> np.ndarray:
    """The full factorial's outcome codes: paired cluster t over every prompt."""
    k = this.shape[1]
    both = np.hstack([this, last])
    a, b = np.triu_indices(k, 1)
    first = np.r_[a, np.arange(k)]
    second = np.r_[b, np.arange(k) + k]
    ci = cluster_t_differences(np.nan_to_num(both), (~np.isnan(both)).astype(float), first,
                               second, level=1 - alpha)
    return _codes(ci.lo, ci.hi, min_effect)


def _codes(lo: np.ndarray, hi: np.ndarray, min_effect: float) -> np.ndarray:
    out = np.zeros(lo.shape, dtype=np.int8)
    if min_effect > 0:
        out[(lo >= -min_effect) & (hi <= min_effect)] = CODES[AdaptiveOutcome.WITHIN_EFFECT]
    out[hi < 0] = CODES[AdaptiveOutcome.SECOND_BETTER]
    out[lo > 0] = CODES[AdaptiveOutcome.FIRST_BETTER]
    return out


def naive_claims(diff: FloatArray, ends: np.ndarray, alpha: float) -> np.ndarray:
    """Per question: did a 1 − alpha t-interval exclude 0 at some round end?"""
    from scipy import stats

    ok = ~np.isnan(diff)
    n = np.cumsum(ok, axis=0)[ends - 1].astype(float)
    s1 = np.cumsum(np.where(ok, diff, 0), axis=0)[ends - 1]
    s2 = np.cumsum(np.where(ok, diff**2, 0), axis=0)[ends - 1]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = s1 / n
        se = np.sqrt(np.maximum(s2 / n - mean**2, 0) * n / (n - 1) / n)
        q = stats.t.ppf(1 - alpha / 2, np.maximum(n - 1, 1))
        hit = (np.abs(mean) > q * se) & (n >= 7)
    return np.asarray(hit.any(axis=0))


def _check_against_loop(order: AdaptiveOrder, params: SamplingParams, names: list[str],
                        this: FloatArray, last: FloatArray, n_used: int,
                        adaptive: np.ndarray, calls_per_prompt: int) -> None:
    def scorer(p: tuple[str, ...]) -> tuple[FloatArray, FloatArray]:
        idx = [int(x[1:]) for x in p]
        return this[idx], last[idx]

    rec = run_adaptive(order, params, names, scorer, calls_per_prompt=calls_per_prompt)
    got = [CODES[s.outcome] for s in rec.statuses]
    if len(rec.sampled) != n_used or got != adaptive.tolist() or rec.stop is StopReason.BUDGET:
        raise AssertionError("the benchmark's shortcut disagrees with run_adaptive")


def per_prompt_cost(args: argparse.Namespace, n_models: int, *, batch: bool,
                    cache: bool) -> float:
    writer = args.writer_in_tokens * args.writer_in + args.writer_out_tokens * args.writer_out
    rubric = args.judge_rubric_tokens * (args.judge_cached_in if cache else args.judge_in)
    judge = rubric + args.judge_rest_tokens * args.judge_in + (
        args.judge_out_tokens * args.judge_out)
    usd = n_models * (writer + args.judges * judge) / 1e6
    return float(usd * (args.batch_factor if batch else 1.0))


def run(args: argparse.Namespace) -> int:
    pop = hts.load_population()
    rng = np.random.default_rng(args.seed)
    names = [*pop.models, f"{pop.models[CLONE_OF]} (clone)"]
    k = len(names)
    calls_per_prompt = k * (1 + args.judges)
    cost_full = args.prompts * per_prompt_cost(args, k, batch=False, cache=False)
    cost = {label: per_prompt_cost(args, k, batch=b, cache=c)
            for label, b, c in (("list", False, False), ("batch", True, False),
                                ("batch+cache", True, True))}
    rows: list[dict[str, float]] = []
    wrong = {"adaptive": 0, "naive": 0, "full": 0}
    zero_questions = 0
    t0 = time.process_time()
    for week in range(args.weeks):
        this, last, pair_truth, change_truth = simulate_week(rng, pop, args.prompts)
        truth = np.r_[pair_truth, change_truth]
        params = SamplingParams(mode="adaptive", seed=args.seed + week,
                                round_size=args.round_size, alpha=args.alpha,
                                floor_per_stratum=args.floor, min_effect=args.min_effect,
                                max_prompts=args.max_prompts, ask=args.ask)
        ids = [f"w{i:04d}" for i in range(args.prompts)]
        strata = dict(zip(ids, rng.integers(0, N_STRATA, size=args.prompts).astype(str),
                          strict=True))
        order = adaptive_order(strata, params)
        perm = np.array([int(p[1:]) for p in order.prompt_ids])
        # Round ends as the loop makes them: the last round is cut at --max-prompts.
        cap = min(args.max_prompts or args.prompts, args.prompts)
        ends = np.unique(np.minimum(np.arange(1, order.n_rounds + 1) * args.round_size, cap))
        statuses = decide(this[perm][:cap], names, round_ends=ends.tolist(), alpha=args.alpha,
                          min_effect=args.min_effect, last=last[perm][:cap], ask=args.ask)
        decided = np.array([s.decided_round or 10**9 for s in statuses])
        stop = next(r for r in range(1, ends.size + 1)
                    if (decided.max() <= r and order.floor_met(ends[r - 1], args.floor))
                    or r == ends.size)
        n_used = int(ends[stop - 1])
        adaptive = np.array([CODES[s.outcome] if s.decided_round and s.decided_round <= stop
                             else 0 for s in statuses])
        if week == 0:  # the shortcut above is the library's own loop: check it once
            _check_against_loop(order, params, names, this, last, n_used, adaptive,
                                calls_per_prompt)
        n_pairs = k * (k - 1) // 2
        sel = {"all": slice(None), "pairs": slice(0, n_pairs),
               "changes": slice(n_pairs, None)}[args.ask]
        full = full_decisions(this, last, args.alpha, args.min_effect)[sel]
        truth = truth[sel]
        a_idx, b_idx = np.triu_indices(k, 1)
        now, before = this[perm], last[perm]
        diff = np.hstack([now[:, a_idx] - now[:, b_idx], now - before])
        naive = naive_claims(diff[:, sel], ends, args.alpha)
        zero = truth == 0
        sep = (adaptive == 1) | (adaptive == 2)
        fsep = (full == 1) | (full == 2)
        zero_questions += int(zero.sum())
        wrong["adaptive"] += int((sep & zero).sum() + ((adaptive == 1) & (truth < 0)).sum()
                                 + ((adaptive == 2) & (truth > 0)).sum())
        wrong["full"] += int((fsep & zero).sum() + ((full == 1) & (truth < 0)).sum()
                             + ((full == 2) & (truth > 0)).sum())
        wrong["naive"] += int((naive & zero).sum())
        at = np.array([s.decided_at_prompts or 10**9 for s in statuses]) / args.prompts
        rows.append({"prompts": n_used, "same": float((adaptive == full).all()),
                     **{f"by_{f}": float(((at <= f / 100) & (adaptive == full)
                                          & (full != 0)).sum() / max((full != 0).sum(), 1))
                        for f in (25, 50, 75, 100)},
                     "contradict": float((np.isin(adaptive, (1, 2)) & np.isin(full, (1, 2))
                                          & (adaptive != full)).any()),
                     "decided": float((adaptive != 0).mean()),
                     "full_decided": float((full != 0).mean()),
                     "early": float(decided.max() <= stop),
                     **{f"cost_{c}": n_used * v for c, v in cost.items()}})
    cpu = time.process_time() - t0
    return report(args, rows, wrong, zero_questions, cost_full, calls_per_prompt, cpu)


def report(args: argparse.Namespace, rows: list[dict[str, float]], wrong: dict[str, int],
           zero_questions: int, cost_full: float, calls_per_prompt: int, cpu: float) -> int:
    col = {key: np.array([r[key] for r in rows]) for key in rows[0]}
    calls_cut = 1 - col["prompts"] / args.prompts
    cost_cut = 1 - col["cost_batch+cache"] / cost_full
    week_ok = (col["same"] == 1) & (calls_cut >= 0.5) & (cost_cut >= 0.7)
    print(f"{args.weeks} simulated weeks × {args.prompts} prompts × 9 models × "
          f"{args.judges} judge(s); questions: {args.ask}; alpha {args.alpha}, min_effect "
          f"{args.min_effect}, round {args.round_size}, floor {args.floor}/stratum; "
          f"CPU {cpu:.1f} s")
    print(f"  full factorial: {args.prompts * calls_per_prompt:,} paid calls, "
          f"${cost_full:,.2f} at list price")
    q = np.percentile(col["prompts"], [10, 50, 90])
    print(f"  adaptive: prompts sampled p10/p50/p90 {q[0]:.0f}/{q[1]:.0f}/{q[2]:.0f}; "
          f"stopped with all decided in {col['early'].mean():.0%} of weeks")
    print(f"  paid calls cut: median {np.median(calls_cut):.0%} (≥ 50% in "
          f"{(calls_cut >= 0.5).mean():.0%} of weeks)")
    for label in ("list", "batch", "batch+cache"):
        cut = 1 - col[f"cost_{label}"] / cost_full
        print(f"  cost cut, adaptive at {label:11s}: median {np.median(cut):.0%} "
              f"(≥ 70% in {(cut >= 0.7).mean():.0%} of weeks)")
    print(f"  decisions: identical to the full factorial in {col['same'].mean():.0%} of "
          f"weeks; opposite directions in {col['contradict'].mean():.1%}; questions decided "
          f"{col['decided'].mean():.0%} adaptive vs {col['full_decided'].mean():.0%} full")
    print("  full-factorial decisions matched by adaptive within 25/50/75/100% of the "
          "prompts: " + "/".join(f"{col[f'by_{f}'].mean():.0%}" for f in (25, 50, 75, 100)))
    rate = {key: v / max(zero_questions, 1) for key, v in wrong.items()}
    print(f"  wrong separated claims per no-difference question ({zero_questions} "
          f"questions): adaptive {rate['adaptive']:.2%} (incl. sign errors), naive "
          f"t-interval under optional stopping {rate['naive']:.2%}, full factorial "
          f"{rate['full']:.2%}")
    share = week_ok.mean()
    ok1 = share >= 0.95
    ok2 = rate["adaptive"] <= 0.05
    print(f"{'PASS' if ok1 else 'FAIL'}: ≥ 50% fewer calls and ≥ 70% lower cost (batch + "
          f"cache) at the same decisions in {share:.0%} of weeks (target ≥ 95%)")
    print(f"{'PASS' if ok2 else 'FAIL'}: wrong separated claims {rate['adaptive']:.2%} "
          f"(target ≤ 5%)")
    return 0 if ok1 and ok2 else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    p.add_argument("--weeks", type=int, default=120)
    p.add_argument("--prompts", type=int, default=728)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--round-size", type=int, default=40)
    p.add_argument("--floor", type=int, default=5, help="prompts per stratum before a stop")
    p.add_argument("--max-prompts", type=int, default=None)
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--min-effect", type=float, default=3.0, help="points on 0–100")
    p.add_argument("--judges", type=int, default=1)
    p.add_argument("--ask", choices=("all", "pairs", "changes"), default="all",
                   help="which questions the run decides and waits for")
    p.add_argument("--writer-in", type=float, default=0.15, help="USD per Mtok")
    p.add_argument("--writer-out", type=float, default=0.60)
    p.add_argument("--judge-in", type=float, default=0.28)
    p.add_argument("--judge-cached-in", type=float, default=0.028)
    p.add_argument("--judge-out", type=float, default=0.42)
    p.add_argument("--batch-factor", type=float, default=0.5)
    p.add_argument("--writer-in-tokens", type=int, default=200)
    p.add_argument("--writer-out-tokens", type=int, default=1300)
    p.add_argument("--judge-rubric-tokens", type=int, default=2000)
    p.add_argument("--judge-rest-tokens", type=int, default=1500)
    p.add_argument("--judge-out-tokens", type=int, default=700)
    args = p.parse_args(argv)
    reason = hts.missing_reason()
    if reason:
        print(f"SKIP: {reason}")
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
