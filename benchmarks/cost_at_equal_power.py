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
* Questions (``--ask``): the 36 pairwise differences and the 9 changes (all), or one kind.
* Adaptive: the library's decisions (betting confidence sequences on the paired
  per-prompt differences, ``bench.adaptive``) read after every round of ``--round-size``
  in the library's seeded order; the run stops when every asked question is decided and
  each stratum has its floor, or at ``--max-prompts``; with ``--per-model`` each model
  stops once its own questions are decided. Checked once per design and invocation
  against the library's own loop (``run_adaptive``): prompts, paid calls, decisions.
* Full factorial, two readings of its decisions on all ``--prompts`` prompts: **F-t**,
  the report's paired cluster t-intervals at 1 − alpha (a fixed-n test: what an analyst
  reads off a full run; the PASS/FAIL comparator), and **F-cs**, the same confidence
  sequences read once at the end (what ``sampling: full`` decides in the product). A
  decision: excludes 0 → separated (that direction), inside ±min_effect → equivalent /
  no change, else undecided. alpha is per question, or split over the run's questions
  with ``--alpha-per run`` (then F-t uses the same Bonferroni level).
* Naive: the t-interval looked at after every round, stopping at the first separation:
  what optional stopping does without confidence sequences.

"The same decisions" in a week: the adaptive run's decision equals the full factorial's
on every asked question — where the full factorial decides, the same decision; where it
does not, adaptive does not either (so adaptive never claims what the full factorial
does not). A week **meets the target** (strict reading, the PASS/FAIL line) when in that
week calls are cut ≥ 50%, cost (batch + cache) ≥ 70% and the decisions are the same;
the target asks this of ≥ 95% of weeks. The average reading (supplementary): mean cuts
and the share of (week, question) decisions that are the same.

Why the strict target cannot be met for pairs (``--oracle``): the full factorial's
decision on a pair whose true gap is within a couple of its standard errors of a
decision boundary depends on the prompts a run that stops at half never sees. For each
week the oracle draws the unseen half again (R times, from the week's true model) and
counts how often F-t's decisions equal their most frequent value given the seen half: an
upper bound, for ANY procedure that stops every model by half the prompts (even one that
knows the truth), on the chance of making F-t's decisions. (A design that stops models
one by one, ``--per-model``, may go past half for some models; the table of designs
shows what that buys.)

Cost: per prompt, each model writes once and each judge scores each essay once (rubric
system message, cacheable, plus the essay). Prices are the registry's examples
(``configs/models.examples.yaml``): writer ``gpt-4o-mini``, judge ``deepseek-chat``;
batch: the entry's ``batch_price_factor`` (else its off-peak factor: a weekly run can be
sent in the window); cache: the rubric tokens at ``price_cached_input_per_mtok``
(assumption: the provider applies its cache discount inside batches too; each genre's
first call is a cache miss, ignored here). The full factorial pays list price.

    .venv/bin/python benchmarks/cost_at_equal_power.py [--weeks 120] [--ask changes]
    .venv/bin/python benchmarks/cost_at_equal_power.py --variants --weeks 40  # the table
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root
from benchmarks import heavy_tail_sim as hts
from essaybench.bench.adaptive import AdaptiveOutcome
from essaybench.bench.adaptive_order import AdaptiveOrder, SamplingParams, adaptive_order
from essaybench.bench.adaptive_run import StopReason, run_adaptive
from essaybench.stats.cluster_t import cluster_t_differences
from essaybench.stats.confseq_betting import betting_difference_confseq, betting_mean_confseq

FloatArray = hts.FloatArray
Codes = NDArray[np.int8]
CLONE_OF = 3  # the clone copies the 4th weakest model
N_STRATA = 8
CODES = {AdaptiveOutcome.UNDECIDED: 0, AdaptiveOutcome.FIRST_BETTER: 1,
         AdaptiveOutcome.SECOND_BETTER: 2, AdaptiveOutcome.WITHIN_EFFECT: 3}
REGISTRY = Path(__file__).resolve().parents[1] / "configs" / "models.examples.yaml"
WRITER, JUDGE = "gpt-4o-mini", "deepseek-chat"
NEVER = 10**9


@dataclass(frozen=True)
class Week:
    """One week's true model: prompt-row levels of the 9 models, off-task rates, the
    change since last week."""

    base: FloatArray  # (n_rows, 9)
    off: FloatArray  # (9,)
    shift: FloatArray  # (9,)

    def draw(self, rng: np.random.Generator, n: int) -> tuple[FloatArray, FloatArray]:
        """(this week, last week) scores of ``n`` fresh prompts, NaN = failed judgment."""
        rows = rng.integers(0, self.base.shape[0], size=n)
        return (_sample(rng, self.base[rows] + self.shift, self.off),
                _sample(rng, self.base[rows], self.off))

    def truths(self) -> tuple[FloatArray, FloatArray]:
        now, before = _true_means(self.base + self.shift, self.off), _true_means(
            self.base, self.off)
        a, b = np.triu_indices(self.base.shape[1], 1)
        return now[a] - now[b], now - before


def _sample(rng: np.random.Generator, levels: FloatArray, off: FloatArray) -> FloatArray:
    on = levels + rng.normal(0.0, hts.JUDGE_SD, size=levels.shape)
    miss = rng.random(levels.shape) < off[None, :]
    low = rng.normal(hts.OFF_TASK_MEAN, hts.OFF_TASK_SD, size=levels.shape)
    scores = np.clip(np.where(miss, low, on), *hts.BOUNDS)
    return np.where(rng.random(levels.shape) < hts.FAIL_RATE, np.nan, scores)


def _true_means(levels: FloatArray, off: FloatArray) -> FloatArray:
    on = hts.clipped_normal_mean(levels, hts.JUDGE_SD).mean(axis=0)
    return np.asarray((1 - off) * on + off * float(hts.clipped_normal_mean(
        hts.OFF_TASK_MEAN, hts.OFF_TASK_SD)), dtype=np.float64)


def make_week(rng: np.random.Generator, pop: hts.HeavyTailPopulation) -> Week:
    cols = [*range(pop.n_models), CLONE_OF]
    shift = np.zeros(len(cols))
    moved = rng.choice(len(cols), size=2, replace=False)
    shift[moved] = rng.choice([-1.0, 1.0], size=2) * rng.uniform(4.0, 8.0, size=2)
    return Week(base=pop.levels[:, cols], off=pop.off_task[cols], shift=shift)


def simulate_week(rng: np.random.Generator, pop: hts.HeavyTailPopulation, n_prompts: int
                  ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(this week, last week) scores (n_prompts, 9) and the true pair differences and
    changes of every question, in :func:`decide`'s question order."""
    week = make_week(rng, pop)
    this, last = week.draw(rng, n_prompts)
    return (this, last, *week.truths())


def question_columns(this: FloatArray, last: FloatArray) -> tuple[FloatArray, FloatArray]:
    """first and second of the 45 questions (36 pairs, then 9 changes), per prompt."""
    k = this.shape[1]
    a, b = np.triu_indices(k, 1)
    return np.hstack([this[:, a], this]), np.hstack([this[:, b], last])


def _codes(lo: FloatArray, hi: FloatArray, min_effect: float) -> Codes:
    out = np.zeros(lo.shape, dtype=np.int8)
    if min_effect > 0:
        out[(lo >= -min_effect) & (hi <= min_effect)] = CODES[AdaptiveOutcome.WITHIN_EFFECT]
    out[hi < 0] = CODES[AdaptiveOutcome.SECOND_BETTER]
    out[lo > 0] = CODES[AdaptiveOutcome.FIRST_BETTER]
    return out


def full_decisions(this: FloatArray, last: FloatArray, alpha: float,
                   min_effect: float) -> Codes:
    """The full factorial's outcome codes (F-t): paired cluster t over every prompt, for
    the 45 questions; ``alpha`` is the per-question level."""
    k = this.shape[1]
    both = np.hstack([this, last])
    a, b = np.triu_indices(k, 1)
    first = np.r_[a, np.arange(k)]
    second = np.r_[b, np.arange(k) + k]
    ci = cluster_t_differences(np.nan_to_num(both), (~np.isnan(both)).astype(float), first,
                               second, level=1 - alpha)
    return _codes(ci.lo, ci.hi, min_effect)


def naive_claims(diff: FloatArray, ends: NDArray[np.int64], alpha: float) -> NDArray[np.bool_]:
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


@dataclass(frozen=True)
class Design:
    """One adaptive design: which questions, indifference zone, alpha split, the
    sequences' tuning; ``per_model``: each model's writer and judges stop once all of its
    questions are decided (``SamplingParams.stop_per_model``)."""

    name: str
    ask: str = "all"
    min_effect: float = 3.0
    alpha_per: str = "question"
    horizon: int | None = None
    truncation: float = 0.5
    grid: int = 401
    max_prompts: int | None = None
    per_model: bool = False

    def params(self, args: argparse.Namespace, seed: int) -> SamplingParams:
        return SamplingParams(mode="adaptive", seed=seed, round_size=args.round_size,
                              alpha=args.alpha, floor_per_stratum=args.floor,
                              min_effect=self.min_effect, max_prompts=self.max_prompts,
                              ask=self.ask,  # type: ignore[arg-type]
                              alpha_per=self.alpha_per,  # type: ignore[arg-type]
                              horizon=self.horizon, truncation=self.truncation,
                              grid=self.grid, stop_per_model=self.per_model)


def selection(ask: str, k: int) -> slice:
    n_pairs = k * (k - 1) // 2
    return {"all": slice(None), "pairs": slice(0, n_pairs), "changes": slice(n_pairs, None)}[ask]


def question_models(k: int) -> list[tuple[int, int]]:
    a, b = np.triu_indices(k, 1)
    return [*zip(a.tolist(), b.tolist(), strict=True), *((m, m) for m in range(k))]


@dataclass(frozen=True)
class Prices:
    writer_in: float
    writer_out: float
    writer_batch: float
    judge_in: float
    judge_cached_in: float
    judge_out: float
    judge_batch: float


def registry_prices(path: Path = REGISTRY) -> Prices:
    """The example registry's prices of the writer and the judge (USD per Mtok)."""
    from essaybench.llm.registry import ModelSpec, load_registry

    reg = load_registry(path)
    w, j = reg.get(WRITER), reg.get(JUDGE)

    def discount(spec: ModelSpec) -> float:
        if spec.batch_price_factor is not None:
            return float(spec.batch_price_factor)
        return float(min((p.price_factor for p in spec.off_peak), default=1.0))

    return Prices(writer_in=w.price_input_per_mtok or 0.0,
                  writer_out=w.price_output_per_mtok or 0.0, writer_batch=discount(w),
                  judge_in=j.price_input_per_mtok or 0.0,
                  judge_cached_in=(j.price_cached_input_per_mtok
                                   if j.price_cached_input_per_mtok is not None
                                   else j.price_input_per_mtok or 0.0),
                  judge_out=j.price_output_per_mtok or 0.0, judge_batch=discount(j))


def per_prompt_cost(args: argparse.Namespace, n_models: int, *, batch: bool,
                    cache: bool) -> float:
    """USD one sampled prompt costs: every model writes once, every judge scores each essay
    once (prices from ``args``; batch: each side's batch factor, or ``args.batch_factor``
    for both)."""
    wb = getattr(args, "writer_batch", args.batch_factor) if batch else 1.0
    jb = getattr(args, "judge_batch", args.batch_factor) if batch else 1.0
    writer = args.writer_in_tokens * args.writer_in + args.writer_out_tokens * args.writer_out
    rubric = args.judge_rubric_tokens * (args.judge_cached_in if cache else args.judge_in)
    judge = rubric + args.judge_rest_tokens * args.judge_in + (
        args.judge_out_tokens * args.judge_out)
    return float(n_models * (wb * writer + jb * args.judges * judge) / 1e6)


def _check_against_loop(order: AdaptiveOrder, params: SamplingParams, names: list[str],
                        this: FloatArray, last: FloatArray, n_used: int, calls: int,
                        adaptive: Codes, calls_per_prompt: int) -> None:
    """The benchmark's shortcut (one sequence over every prompt, read at round ends) must
    give the library loop's prompts, paid calls and decisions."""
    def scorer(p: tuple[str, ...]) -> tuple[FloatArray, FloatArray]:
        idx = [int(x[1:]) for x in p]
        return this[idx], last[idx]

    def some(p: tuple[str, ...], wanted: tuple[str, ...]) -> tuple[FloatArray, FloatArray]:
        now, before = scorer(p)
        off = [k for k, m in enumerate(names) if m not in wanted]
        now[:, off] = before[:, off] = np.nan
        return now, before

    rec = run_adaptive(order, params, names, scorer, calls_per_prompt=calls_per_prompt,
                       score_models=some)
    got = [CODES[s.outcome] for s in rec.statuses]
    if (len(rec.sampled) != n_used or rec.calls != calls or got != adaptive.tolist()
            or rec.stop is StopReason.BUDGET):
        raise AssertionError("the benchmark's shortcut disagrees with run_adaptive")


@dataclass
class Tally:
    rows: list[dict[str, float]]
    wrong: int = 0
    wrong_full_t: int = 0
    wrong_naive: int = 0
    zero: int = 0
    checked: bool = False


def evaluate(design: Design, args: argparse.Namespace, tally: Tally, week_no: int,
             this: FloatArray, last: FloatArray, truth: FloatArray,
             order: AdaptiveOrder, names: list[str], calls_per_prompt: int) -> None:
    """One design on one simulated week: append its row to ``tally``."""
    k = this.shape[1]
    sel = selection(design.ask, k)
    perm = np.array([int(p[1:]) for p in order.prompt_ids])
    first, second = question_columns(this[perm], last[perm])
    first, second, truth = first[:, sel], second[:, sel], truth[sel]
    n_q = first.shape[1]
    level = args.alpha / n_q if design.alpha_per == "run" else args.alpha
    cs = betting_difference_confseq(first, second, alpha=level, horizon=design.horizon,
                                    truncation=design.truncation, grid=design.grid)
    n_all = args.prompts
    cap = min(design.max_prompts or n_all, n_all)
    ends = np.unique(np.minimum(np.arange(1, order.n_rounds + 1) * args.round_size, cap))
    per_round = _codes(cs.lo[ends - 1], cs.hi[ends - 1], design.min_effect)
    hit = per_round != 0
    first_round = np.where(hit.any(axis=0), hit.argmax(axis=0), NEVER)  # 0-based
    decided_code = per_round[np.minimum(first_round, ends.size - 1), np.arange(n_q)]
    floor_ok = np.array([order.floor_met(int(e), args.floor) for e in ends])
    if design.per_model:
        qm = question_models(k)[sel]
        done_at = np.where(first_round < NEVER, ends[np.minimum(first_round, ends.size - 1)],
                           cap)
        floor_n = int(ends[floor_ok.argmax()]) if floor_ok.any() else cap
        used = np.full(k, floor_n)
        for (a, b), at in zip(qm, done_at, strict=True):
            used[a], used[b] = max(used[a], at), max(used[b], at)
        calls_share = float(used.mean() / n_all)
        adaptive = np.where(first_round < NEVER, decided_code, 0).astype(np.int8)
        n_used = int(used.max())
    else:
        last_needed = int(first_round.max())  # NEVER when some question stays open
        stop = next((r for r in range(ends.size)
                     if last_needed <= r and floor_ok[r]), ends.size - 1)
        n_used = int(ends[stop])
        calls_share = n_used / n_all
        adaptive = np.where(first_round <= stop, decided_code, 0).astype(np.int8)

    if not tally.checked:  # the shortcut above is the library's loop: check once
        _check_against_loop(order, design.params(args, args.seed + week_no), names, this,
                            last, n_used, round(calls_share * n_all * calls_per_prompt),
                            adaptive, calls_per_prompt)
        tally.checked = True
    full_t = full_decisions(this, last, level, design.min_effect)[sel]
    full_cs = _codes(cs.lo[-1], cs.hi[-1], design.min_effect)
    naive = naive_claims(first - second, ends, args.alpha)
    zero = truth == 0

    def wrong(codes: Codes) -> int:
        sep = (codes == 1) | (codes == 2)
        return int((sep & zero).sum() + ((codes == 1) & (truth < 0)).sum()
                   + ((codes == 2) & (truth > 0)).sum())

    tally.zero += int(zero.sum())
    tally.wrong += wrong(adaptive)
    tally.wrong_full_t += wrong(full_t)
    tally.wrong_naive += int((naive & zero).sum())
    decided_n = np.where(first_round < NEVER, ends[np.minimum(first_round, ends.size - 1)],
                         NEVER)
    tally.rows.append({
        "calls_share": calls_share, "n_used": n_used,
        "same_t": float((adaptive == full_t).all()),
        "same_cs": float((adaptive == full_cs).all()),
        "q_same_t": float((adaptive == full_t).mean()),
        "q_same_cs": float((adaptive == full_cs).mean()),
        "contradict": float(((adaptive != 0) & (full_t != 0) & (adaptive != full_t)).any()),
        "decided": float((adaptive != 0).mean()), "full_decided": float((full_t != 0).mean()),
        "full_t_false": float(((full_t == 1) | (full_t == 2))[zero].any()),
        "early": float((decided_n <= n_used).all()),
    })


def oracle_bound(rng: np.random.Generator, week: Week, this: FloatArray, last: FloatArray,
                 seen: int, args: argparse.Namespace, design: Design, reps: int,
                 comparator: str = "t") -> float:
    """max over decision vectors of P(the full factorial's decisions = that vector | the
    first ``seen`` prompts), by redrawing the unseen prompts ``reps`` times from the week's
    truth; ``comparator`` t: F-t, cs: F-cs (the design's sequences, in that order)."""
    k = this.shape[1]
    sel = selection(design.ask, k)
    n_q = len(range(45)[sel])
    level = args.alpha / n_q if design.alpha_per == "run" else args.alpha
    counts: dict[bytes, int] = {}
    for _ in range(reps):
        more_this, more_last = week.draw(rng, args.prompts - seen)
        now = np.vstack([this[:seen], more_this])
        before = np.vstack([last[:seen], more_last])
        if comparator == "t":
            codes = full_decisions(now, before, level, design.min_effect)[sel]
        else:
            first, second = question_columns(now, before)
            cs = betting_difference_confseq(first[:, sel], second[:, sel], alpha=level,
                                            horizon=design.horizon,
                                            truncation=design.truncation, grid=design.grid)
            codes = _codes(cs.lo[-1], cs.hi[-1], design.min_effect)
        key = codes.tobytes()
        counts[key] = counts.get(key, 0) + 1
    return max(counts.values()) / reps


def run_designs(args: argparse.Namespace, designs: list[Design]) -> dict[str, Tally]:
    pop = hts.load_population()
    rng = np.random.default_rng(args.seed)
    oracle_rng = np.random.default_rng(args.seed + 1)
    names = [*pop.models, f"{pop.models[CLONE_OF]} (clone)"]
    calls_per_prompt = len(names) * (1 + args.judges)
    tallies = {d.name: Tally(rows=[]) for d in designs}
    oracle: dict[str, list[float]] = {"all": [], "pairs": [], "changes": []}
    for week_no in range(args.weeks):
        week = make_week(rng, pop)
        this, last = week.draw(rng, args.prompts)
        truth = np.r_[week.truths()]
        ids = [f"w{i:04d}" for i in range(args.prompts)]
        strata = dict(zip(ids, rng.integers(0, N_STRATA, size=args.prompts).astype(str),
                          strict=True))
        order = adaptive_order(strata, SamplingParams(mode="adaptive", seed=args.seed + week_no,
                                                      round_size=args.round_size))
        for d in designs:
            evaluate(d, args, tallies[d.name], week_no, this, last, truth, order, names,
                     calls_per_prompt)
    oracle_cs: dict[str, list[float]] = {"all": [], "pairs": [], "changes": []}
    for _ in range(args.oracle_weeks if args.oracle or args.oracle_cs else 0):  # own weeks
        week = make_week(oracle_rng, pop)
        this, last = week.draw(oracle_rng, args.prompts)
        for ask in oracle:
            design = replace(designs[0], ask=ask)
            if args.oracle:
                oracle[ask].append(oracle_bound(oracle_rng, week, this, last,
                                                args.prompts // 2, args, design, args.oracle))
            if args.oracle_cs:
                oracle_cs[ask].append(oracle_bound(oracle_rng, week, this, last,
                                                   args.prompts // 2, args, design,
                                                   args.oracle_cs, comparator="cs"))
    args.oracle_result = {a: float(np.mean(v)) for a, v in oracle.items() if v}
    args.oracle_cs_result = {a: float(np.mean(v)) for a, v in oracle_cs.items() if v}
    return tallies


def null_rate(args: argparse.Namespace, design: Design, reps: int) -> float:
    """Share of ``reps`` fresh weeks (nobody changed) in which the design's sequence for
    the clone pair (equal true means) excludes 0 at some round end: the per-question
    false-claim rate with enough repetitions to read it (the weeks above hold one clone
    pair each)."""
    pop = hts.load_population()
    rng = np.random.default_rng(args.seed + 2)
    diffs = []
    for _ in range(reps):
        week = make_week(rng, pop)
        this, _ = replace(week, shift=np.zeros_like(week.shift)).draw(rng, args.prompts)
        diffs.append(this[:, CLONE_OF] - this[:, -1])
    d = np.array(diffs).T
    level = args.alpha / len(range(45)[selection(design.ask, 9)]) \
        if design.alpha_per == "run" else args.alpha
    cs = betting_mean_confseq(d, alpha=level, lower=-100.0, upper=100.0,
                              horizon=design.horizon, truncation=design.truncation,
                              grid=design.grid)  # the paired differences' honest range
    ends = np.unique(np.minimum(np.arange(args.round_size, args.prompts + args.round_size,
                                          args.round_size), args.prompts)) - 1
    return float(((cs.lo[ends] > 0) | (cs.hi[ends] < 0)).any(axis=0).mean())


@dataclass(frozen=True)
class Summary:
    name: str
    calls_cut_median: float
    calls_cut_mean: float
    cost_cut_median: float
    cost_cut_mean: float
    strict_t: float  # share of weeks meeting the target, F-t comparator
    strict_cs: float
    same_t: float
    same_cs: float
    q_same_t: float
    q_same_cs: float
    wrong: float
    wrong_full_t: float
    wrong_naive: float
    decided: float
    contradict: float
    full_t_false: float


def summarise(name: str, tally: Tally, args: argparse.Namespace) -> Summary:
    col = {key: np.array([r[key] for r in tally.rows]) for key in tally.rows[0]}
    share = col["calls_share"]
    cost_factor = args.cost_batch_cache / args.cost_list  # adaptive price per sampled call
    calls_cut = 1 - share
    cost_cut = 1 - share * cost_factor
    base = (calls_cut >= 0.5) & (cost_cut >= 0.7)
    z = max(tally.zero, 1)
    return Summary(
        name=name, calls_cut_median=float(np.median(calls_cut)),
        calls_cut_mean=float(calls_cut.mean()), cost_cut_median=float(np.median(cost_cut)),
        cost_cut_mean=float(cost_cut.mean()),
        strict_t=float((base & (col["same_t"] == 1)).mean()),
        strict_cs=float((base & (col["same_cs"] == 1)).mean()),
        same_t=float(col["same_t"].mean()), same_cs=float(col["same_cs"].mean()),
        q_same_t=float(col["q_same_t"].mean()), q_same_cs=float(col["q_same_cs"].mean()),
        wrong=tally.wrong / z, wrong_full_t=tally.wrong_full_t / z,
        wrong_naive=tally.wrong_naive / z, decided=float(col["decided"].mean()),
        contradict=float(col["contradict"].mean()), full_t_false=float(col["full_t_false"].mean()))


def describe(d: Design) -> str:
    bets = "anytime bets" if d.horizon is None else f"bets tuned to {d.horizon}"
    extra = (f", stop at {d.max_prompts}" if d.max_prompts else "") + (
        ", stop per model" if d.per_model else "")
    return (f"ask {d.ask}, min_effect {d.min_effect:g}, alpha per {d.alpha_per}, {bets}, "
            f"cap c {d.truncation:g}, grid {d.grid}{extra}")


def report(args: argparse.Namespace, design: Design, s: Summary, cpu: float) -> int:
    print(f"{args.weeks} simulated weeks × {args.prompts} prompts × 9 models × "
          f"{args.judges} judge(s); seed {args.seed}; alpha {args.alpha}; round "
          f"{args.round_size}, floor {args.floor}/stratum; CPU {cpu:.1f} s")
    print(f"  design: {describe(design)}")
    print(f"  full factorial: {args.prompts * args.calls_per_prompt:,} paid calls, "
          f"${args.prompts * args.cost_list:,.2f} at list price; adaptive per sampled call "
          f"at batch {args.cost_batch / args.cost_list:.2f}, batch+cache "
          f"{args.cost_batch_cache / args.cost_list:.2f} of list")
    print(f"  paid calls cut: median {s.calls_cut_median:.0%}, mean {s.calls_cut_mean:.0%}; "
          f"cost cut (batch+cache): median {s.cost_cut_median:.0%}, mean "
          f"{s.cost_cut_mean:.0%}")
    print(f"  same decisions as F-t (cluster t) in {s.same_t:.0%} of weeks, per question "
          f"{s.q_same_t:.1%}; as F-cs (same sequences at the end) in {s.same_cs:.0%} of "
          f"weeks, per question {s.q_same_cs:.1%}; adaptive decided {s.decided:.0%}; "
          f"a decision other than F-t's where both decide in {s.contradict:.0%} of weeks")
    print(f"  F-t itself claims a no-difference question separated in {s.full_t_false:.0%} "
          f"of weeks")
    print(f"  wrong separated claims per no-difference question: adaptive {s.wrong:.2%} "
          f"(incl. sign errors), naive t under optional stopping {s.wrong_naive:.2%}, "
          f"F-t {s.wrong_full_t:.2%}")
    if args.null_reps:
        print(f"  clone pair (equal means) over {args.null_reps} null weeks: claimed "
              f"separated at some round end in {null_rate(args, design, args.null_reps):.2%}"
              f" (per-question guarantee ≤ {args.alpha:.0%})")
    for ask, bound in getattr(args, "oracle_result", {}).items():
        print(f"  oracle bound ({ask}, {args.oracle_weeks} weeks × {args.oracle} redraws): "
              f"any design stopping every model by half the prompts makes F-t's decisions in "
              f"at most {bound:.0%} of weeks")
    for ask, bound in getattr(args, "oracle_cs_result", {}).items():
        print(f"  oracle bound against F-cs ({ask}, {args.oracle_weeks} weeks × "
              f"{args.oracle_cs} redraws): at most {bound:.0%} of weeks")
    ok1 = s.strict_t >= 0.95
    ok2 = s.wrong <= 0.05
    print(f"{'PASS' if ok1 else 'FAIL'}: ≥ 50% fewer calls and ≥ 70% lower cost (batch + "
          f"cache) at the same decisions in {s.strict_t:.0%} of weeks (target ≥ 95%)")
    print(f"{'PASS' if ok2 else 'FAIL'}: wrong separated claims {s.wrong:.2%} "
          f"(target ≤ 5%)")
    avg = (s.calls_cut_mean >= 0.5 and s.cost_cut_mean >= 0.7 and s.q_same_t >= 0.95)
    print(f"  supplementary, strict reading against F-cs: {s.strict_cs:.0%} of weeks; "
          f"average reading (mean cuts, share of same decisions per question vs F-t): "
          f"{'met' if avg else 'not met'}")
    return 0 if ok1 and ok2 else 1


CLOSEST = "closest"


def designs(args: argparse.Namespace) -> list[Design]:
    half = args.prompts // 2
    tuned = Design("tuned", ask=args.ask, min_effect=args.min_effect,
                   alpha_per=args.alpha_per, horizon=args.horizon or half,
                   truncation=args.truncation, grid=args.grid, max_prompts=args.max_prompts,
                   per_model=args.per_model)
    closest = Design(CLOSEST, ask="changes", min_effect=4.0, horizon=half, truncation=0.9,
                     grid=args.grid, per_model=True)
    if not args.variants:
        return [tuned, closest] if args.closest else [tuned]
    base = Design("baseline (previous)", ask="all", min_effect=3.0)
    t_all = replace(tuned, ask="all", min_effect=3.0, alpha_per="question", max_prompts=None)
    ch = replace(t_all, ask="changes")
    return [
        base,
        replace(t_all, name="tuned"),
        replace(t_all, name="tuned, M 5", min_effect=5.0),
        replace(t_all, name="tuned, family-wise", alpha_per="run"),
        replace(t_all, name="tuned, stop at half", max_prompts=half),
        replace(t_all, name="tuned, per-model stop", per_model=True),
        replace(t_all, name="pairs, tuned", ask="pairs"),
        replace(base, name="changes, baseline M 5", ask="changes", min_effect=5.0),
        replace(ch, name="changes, tuned M 3"),
        replace(ch, name="changes, tuned M 4", min_effect=4.0),
        replace(ch, name="changes, tuned M 5", min_effect=5.0),
        replace(ch, name="changes, tuned M 4, fw", min_effect=4.0, alpha_per="run"),
        replace(ch, name="changes, tuned M 3, per-model", per_model=True),
        replace(ch, name="changes, tuned M 4, per-model", min_effect=4.0, per_model=True),
        replace(ch, name="changes, tuned M 5, per-model", min_effect=5.0, per_model=True),
        replace(ch, name="changes, tuned M 4, fw, per-model", min_effect=4.0,
                alpha_per="run", per_model=True),
    ]


def variants_table(args: argparse.Namespace, rows: list[tuple[Design, Summary]]) -> None:
    print(f"{args.weeks} weeks × {args.prompts} prompts, seed {args.seed}, alpha "
          f"{args.alpha}, round {args.round_size}; cuts: median (mean); same: share of "
          "weeks (per question); strict: weeks meeting all three")
    print("| design | calls cut | cost cut | same F-t | same F-cs | strict F-t | "
          "strict F-cs | wrong sep. |")
    print("|---|---|---|---|---|---|---|---|")
    for d, s in rows:
        print(f"| {d.name}: {describe(d)} | {s.calls_cut_median:.0%} ({s.calls_cut_mean:.0%})"
              f" | {s.cost_cut_median:.0%} ({s.cost_cut_mean:.0%}) | {s.same_t:.0%} "
              f"({s.q_same_t:.1%}) | {s.same_cs:.0%} ({s.q_same_cs:.1%}) | {s.strict_t:.0%} "
              f"| {s.strict_cs:.0%} | {s.wrong:.2%} |")


def e2e(argv: list[str], path: Path | None = None) -> int:
    """The fake-server end-to-end half (helper-adaptive-wire's benchmarks/_cost_e2e.py,
    its ``main(argv) -> int``); exit 2 when it is not there."""
    path = path or Path(__file__).resolve().with_name("_cost_e2e.py")
    if not path.is_file():
        print("--e2e: not available (benchmarks/_cost_e2e.py does not exist yet)")
        return 2
    spec = importlib.util.spec_from_file_location("benchmarks._cost_e2e", path)
    if spec is None or spec.loader is None:
        print("--e2e: not available (benchmarks/_cost_e2e.py cannot be loaded)")
        return 2
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    entry = getattr(module, "main", None)
    if entry is None:
        print("--e2e: not available (benchmarks/_cost_e2e.py has no main(argv))")
        return 2
    return int(entry(argv))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    p.add_argument("--weeks", type=int, default=120)
    p.add_argument("--prompts", type=int, default=728)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--round-size", type=int, default=40)
    p.add_argument("--floor", type=int, default=5, help="prompts per stratum before a stop")
    p.add_argument("--max-prompts", type=int, default=None)
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--alpha-per", choices=("question", "run"), default="question")
    p.add_argument("--min-effect", type=float, default=3.0, help="points on 0–100")
    p.add_argument("--horizon", type=int, default=None,
                   help="bets tuned to this many prompts (default: half the prompts)")
    p.add_argument("--truncation", type=float, default=0.9, help="cap c on each bet")
    p.add_argument("--grid", type=int, default=801, help="candidate means on −100…100")
    p.add_argument("--judges", type=int, default=1)
    p.add_argument("--ask", choices=("all", "pairs", "changes"), default="all",
                   help="which questions the run decides and waits for")
    p.add_argument("--per-model", action="store_true",
                   help="each model stops once its questions are decided")
    p.add_argument("--no-closest", dest="closest", action="store_false",
                   help="skip the closest honest design (changes, per model)")
    p.add_argument("--variants", action="store_true",
                   help="every design tried, as a table (same simulated weeks for all)")
    p.add_argument("--oracle", type=int, default=100, metavar="R",
                   help="the oracle bound with R redraws of the unseen half (0: off)")
    p.add_argument("--oracle-cs", type=int, default=0, metavar="R",
                   help="the same bound against F-cs (slow: a sequence per redraw)")
    p.add_argument("--oracle-weeks", type=int, default=30)
    p.add_argument("--null-reps", type=int, default=400, metavar="N",
                   help="false-claim rate on the clone pair over N null weeks (0: off)")
    p.add_argument("--e2e", action="store_true",
                   help="the fake-server end-to-end comparison (benchmarks/_cost_e2e.py; "
                   "the other options go to it)")
    p.add_argument("--registry", type=Path, default=REGISTRY,
                   help="prices: writer gpt-4o-mini, judge deepseek-chat")
    for flag in ("writer-in", "writer-out", "judge-in", "judge-cached-in", "judge-out",
                 "batch-factor"):
        p.add_argument(f"--{flag}", type=float, default=None,
                       help="override the registry (USD per Mtok; batch-factor: both sides)")
    p.add_argument("--writer-in-tokens", type=int, default=200)
    p.add_argument("--writer-out-tokens", type=int, default=1300)
    p.add_argument("--judge-rubric-tokens", type=int, default=2000)
    p.add_argument("--judge-rest-tokens", type=int, default=1500)
    p.add_argument("--judge-out-tokens", type=int, default=700)
    return p


def settle_prices(args: argparse.Namespace) -> None:
    prices = registry_prices(args.registry)
    for name in ("writer_in", "writer_out", "judge_in", "judge_cached_in", "judge_out"):
        if getattr(args, name) is None:
            setattr(args, name, getattr(prices, name))
    if args.batch_factor is None:
        args.writer_batch, args.judge_batch = prices.writer_batch, prices.judge_batch
        args.batch_factor = prices.writer_batch
    else:
        args.writer_batch = args.judge_batch = args.batch_factor
    k = 9
    args.calls_per_prompt = k * (1 + args.judges)
    args.cost_list = per_prompt_cost(args, k, batch=False, cache=False)
    args.cost_batch = per_prompt_cost(args, k, batch=True, cache=False)
    args.cost_batch_cache = per_prompt_cost(args, k, batch=True, cache=True)


def main(argv: list[str] | None = None) -> int:
    given = list(argv if argv is not None else sys.argv[1:])
    if "--e2e" in given:  # the e2e module parses the other options itself
        return e2e([a for a in given if a != "--e2e"])
    args = parser().parse_args(given)
    reason = hts.missing_reason()
    if reason:
        print(f"SKIP: {reason}")
        return 0
    settle_prices(args)
    chosen = designs(args)
    t0 = time.process_time()
    tallies = run_designs(args, chosen)
    cpu = time.process_time() - t0
    if args.variants:
        variants_table(args, [(d, summarise(d.name, tallies[d.name], args)) for d in chosen])
        return 0
    d = chosen[0]
    code = report(args, d, summarise(d.name, tallies[d.name], args), cpu)
    if args.closest:
        c = summarise(CLOSEST, tallies[CLOSEST], args)
        print(f"  closest honest design ({describe(chosen[1])}): calls cut median "
              f"{c.calls_cut_median:.0%} (mean {c.calls_cut_mean:.0%}), cost cut median "
              f"{c.cost_cut_median:.0%} (mean {c.cost_cut_mean:.0%}); weeks meeting all "
              f"three: {c.strict_t:.0%} against F-t, {c.strict_cs:.0%} against F-cs; same "
              f"decisions as F-t in {c.same_t:.0%}, F-t claims an unchanged model changed in "
              f"{c.full_t_false:.0%} of weeks; wrong separated claims {c.wrong:.2%}")
    return code


if __name__ == "__main__":
    sys.exit(main())
