"""Adaptive sampling in the weekly run (``sampling: mode: adaptive``; issue 26 item 3).

The generate stage's computation becomes a loop (:class:`AdaptiveSampler`, handed to
``generate_stage``): the selected prompts in their seeded order
(:func:`~essaybench.bench.adaptive_order.adaptive_order`), one round at a time, each round's
essays written (only that round's prompts: writers are never called for prompts not
sampled) and every essay so far judged (the judge calls of earlier rounds are served from
the session, failures included, so nothing is paid twice and a failed judgment stays a
failure); the round's per-prompt leaderboard scores
(:func:`~essaybench.bench.adaptive_scores.prompt_scores`) go to
:func:`~essaybench.bench.adaptive_run.run_adaptive`, which decides and says when to stop.
The generate snapshot holds the sampled prompts' essays; the judge stage that follows
judges them as in a full run (every call served), so its scores are the ones the
decisions were made on. The ``adaptive`` snapshot (:func:`adaptive_stage`) records each
question, its outcome, the sample size it was decided at, the stop reason and the
prompts used.

Each writer's change is asked against the last comparable run
(:func:`essaybench.runs.comparable.last_comparable_of`, found with the first round's
judgments, written and judged before the loop, which is then served them), on the prompts
both have. When that run was adaptive too, it holds only a prefix of the same order (same
seed): past its last prompt no change question can move, so the changes are decided on
that prefix (a loop capped there) and, if pairs remain open, a second loop asks the pairs
alone (its first rounds served, so nothing is paid twice); the record joins the two.
Everything the loop reads is deterministic (a seeded order, scores served from the
ledger on a rerun, planned calls rather than paid ones for ``max_calls``): a rerun reaches
the same sample and pays nothing twice. A sharded run cannot sample adaptively (its
shards are planned before any score exists): ``stages.pipeline`` refuses it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import polars as pl

from essaybench.bench.adaptive import FloatArray, QuestionKind
from essaybench.bench.adaptive_order import AdaptiveOrder, SamplingParams, adaptive_order
from essaybench.bench.adaptive_run import AdaptiveRecord, StopReason, run_adaptive
from essaybench.bench.adaptive_scores import (
    calls_per_prompt,
    max_prompts_of,
    prompt_scores,
    strata_of,
)
from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.generate import run_generate, status_counts
from essaybench.bench.health import call_counts
from essaybench.bench.judge.prefetch import JudgePrefetch
from essaybench.core.contracts import StageOutput
from essaybench.core.errors import UserError
from essaybench.llm.session import GatewaySession
from essaybench.llm.types import ChatRequest
from essaybench.runs.comparable import Baseline, last_comparable_of
from essaybench.stages.judge import generate_start, judge_output
from essaybench.store import Snapshot, Store
from essaybench.store.run_stage import run_stage

STAGE = "adaptive"
FIXED_N_NOTE = (
    "The leaderboard's intervals are fixed-n intervals computed on an adaptively stopped "
    "sample: they are not anytime-valid. The decisions above are (confidence sequences: "
    "stopping when they separate does not raise the error rate above alpha).")


@dataclass
class AdaptiveSampler:
    """The generate stage's computation in adaptive mode; after it, ``record`` and
    ``baseline`` say what was decided and against which run."""

    store: Store
    run_id: str
    config: BenchmarkConfig
    session: GatewaySession
    early: Sequence[ChatRequest] = ()  # calls sent with the first round (drift anchors)
    record: AdaptiveRecord | None = None
    baseline: Baseline | None = None
    candidates: int = 0  # prompts the run could have sampled
    changes_until: int | None = None  # prompts the change questions were decided on
    _rounds: list[StageOutput] = field(default_factory=list)
    _errors: list[str] = field(default_factory=list)

    def essays(self, selected: pl.DataFrame, version: str) -> StageOutput:
        """Sample ``selected`` round by round; the essays of the sampled prompts."""
        params = self.config.sampling
        order = adaptive_order(strata_of(selected), params)
        writers = list(self.config.generate.models)
        # Failures since the run's first generate entry are the run's: served, not re-sent
        # (a run entered again after waiting for batches replays its rounds).
        since = generate_start(self.store, self.run_id) or datetime.now(UTC)
        self.candidates = selected.height
        rule = self.config.flagged_essays
        asking = [params.ask]  # the questions of the loop under way
        most = max_prompts_of(order, self.config)
        if most < 1:
            raise UserError(f"sampling.max_calls {params.max_calls} is less than one prompt's "
                            f"planned calls ({calls_per_prompt(self.config)}): nothing to ask")
        # the first round as the loop will ask for it (max_prompts, max_calls may cut it)
        first = order.prompt_ids[:min(order.round_size, most)]
        self.baseline = self._probe(selected.filter(pl.col("prompt_id").is_in(first)),
                                    version, since)
        last = self.baseline.judged.read() if self.baseline.judged is not None else None

        def score_models(ids: tuple[str, ...], active: tuple[str, ...]
                         ) -> tuple[FloatArray, FloatArray | None]:
            """The round's scores, written and judged for the ``active`` writers only
            (``stop_per_model``: the others' questions are decided): NaN for the rest."""
            with self.session.reusing_failures_since(since):
                judged = self._round(selected.filter(pl.col("prompt_id").is_in(ids)),
                                     version, active)
            now = prompt_scores(judged, ids, writers, rule)
            if asking[0] == "pairs":
                return now, None
            if last is not None:
                return now, prompt_scores(last, ids, writers, rule)
            # No comparable run: no change questions, unless they are all the run asks
            # (then they stay undecided and the run samples on to its limits).
            return now, (np.full(now.shape, np.nan) if asking[0] == "changes" else None)

        # stop_per_model (when the library has it): the loop asks for the live writers only
        extra: dict[str, Any] = ({"score_models": score_models}
                                 if getattr(params, "stop_per_model", False) else {})

        def loop(phase: SamplingParams) -> AdaptiveRecord:
            self._rounds.clear()  # a loop starts from the first round (served: no new call)
            asking[0] = phase.ask
            return run_adaptive(order, phase, writers,
                                lambda ids: score_models(ids, tuple(writers)),
                                calls_per_prompt=calls_per_prompt(self.config), **extra)

        reach = baseline_reach(order, last)
        if last is None or params.ask == "pairs" or reach >= most:
            self.record = loop(params)
            return self._output()
        # The last comparable run has none of the order's prompts past ``reach`` (it was
        # adaptive too): a change question cannot move after that. Decide the changes on
        # that prefix, then (if the pairs are not all decided) the pairs alone on.
        self.changes_until = reach
        changes = loop(params.model_copy(update={"max_prompts": reach}))
        if params.ask == "changes" or changes.stop is not StopReason.MAX_PROMPTS:
            self.record = changes
            return self._output()
        n_pairs = sum(s.question.kind is QuestionKind.PAIR for s in changes.statuses)
        share = n_pairs / len(changes.statuses) if params.alpha_per == "run" else 1.0
        pairs = loop(params.model_copy(update={"ask": "pairs", "alpha": params.alpha * share}))
        self.record = AdaptiveRecord(
            params=params, rounds=pairs.rounds, stop=pairs.stop, sampled=pairs.sampled,
            statuses=(*pairs.statuses, *(s for s in changes.statuses
                                         if s.question.kind is QuestionKind.CHANGE)))
        return self._output()

    def _probe(self, prompts: pl.DataFrame, version: str, since: datetime) -> Baseline:
        """The last comparable run, found with the first round's judgments (written and
        judged here; the loop asks for them again and is served)."""
        with self.session.reusing_failures_since(since):
            judged = self._round(prompts, version, self.config.generate.models)
        essays = pl.concat([r.table for r in self._rounds], how="diagonal_relaxed")
        self._rounds.clear()
        return last_comparable_of(self.store, self.run_id, judged, essays)

    def _round(self, prompts: pl.DataFrame, version: str,
               active: Sequence[str]) -> pl.DataFrame:
        """Write one round's essays (by the ``active`` writers); judge every essay so far
        (earlier rounds' calls are served); the judgments."""
        config = self.config
        generate = (config.generate if list(active) == list(config.generate.models)
                    else config.generate.model_copy(update={"models": tuple(active)}))
        prefetch = JudgePrefetch.for_prompts(prompts, config.judge,
                                             config.generate.min_chinese_share)
        if prefetch is not None and not self._rounds:
            prefetch.early = list(self.early)
        self._rounds.append(run_generate(prompts, generate, self.session, version,
                                         follow_up=prefetch))
        if prefetch is not None:
            self._errors.extend(prefetch.errors)
        essays = pl.concat([r.table for r in self._rounds], how="diagonal_relaxed")
        return judge_output(essays, config, self.session).table

    def _output(self) -> StageOutput:
        """The rounds' essays as one generate output (the meta run_generate writes)."""
        table = pl.concat([r.table for r in self._rounds], how="diagonal_relaxed")
        calls = {model: c.model_dump() for model, c in call_counts(table, "model").items()}
        meta: dict[str, Any] = {
            **self._rounds[0].meta,  # the first round asks every writer
            "n_prompts": sum(r.meta["n_prompts"] for r in self._rounds),
            "n_rows": table.height,
            "from_ledger": int(table["from_ledger"].sum()),
            "counts": status_counts(table),
            "off_language": {str(m): int(n) for m, n in table.filter(pl.col("off_language"))
                             .group_by("model").len().iter_rows()},
            "calls": calls}
        meta.pop("follow_ups", None)  # per round; not the run's
        if self._errors:
            meta["follow_ups"] = {"errors": list(dict.fromkeys(self._errors))[:5]}
        assert self.record is not None
        meta["adaptive"] = self.summary()
        return StageOutput(table, meta=meta, run_meta={"calls": calls})

    def summary(self) -> dict[str, Any]:
        """The run's sampling in a few numbers (the catalog rows' meta, the CLI's line)."""
        assert self.record is not None
        record = self.record
        return {"stop": record.stop.value, "sampled": len(record.sampled),
                "of": self.candidates, "rounds": len(record.rounds),
                "planned_calls": record.calls,
                "decided": len(record.statuses) - len(record.undecided),
                "questions": len(record.statuses),
                "baseline": self.baseline.run_id if self.baseline is not None else None,
                "changes_until": self.changes_until}


def baseline_reach(order: AdaptiveOrder, last: pl.DataFrame | None) -> int:
    """How many prompts of ``order`` it takes to pass the last of ``last``'s (the last
    comparable run's judgments): after that, no change question gets a pair (≥ 1)."""
    if last is None:
        return len(order.prompt_ids)
    have = set(last["prompt_id"].to_list())
    return max((i + 1 for i, p in enumerate(order.prompt_ids) if p in have), default=1)


def decisions_table(record: AdaptiveRecord) -> pl.DataFrame:
    """One row per question (``AdaptiveRecord.to_frame``) with the run's stop reason and
    sample size on every row."""
    return record.to_frame().with_columns(
        pl.lit(record.stop.value).alias("stop"),
        pl.lit(len(record.sampled), dtype=pl.Int64).alias("n_sampled"))


def adaptive_stage(store: Store, run_id: str, sampler: AdaptiveSampler,
                   upstream: Snapshot) -> Snapshot:
    """The ``adaptive`` snapshot of what ``sampler`` decided; ``upstream``: the judge
    snapshot whose scores the decisions were made on."""
    record = sampler.record
    if record is None:
        raise ValueError("the adaptive sampler has not run")

    def compute() -> StageOutput:
        summary = sampler.summary()
        meta = {**summary, "sampled_prompts": list(record.sampled),
                "rounds": [{"index": r.index, "n_prompts": r.n_prompts, "calls": r.calls,
                            "decided": r.decided} for r in record.rounds],
                "baseline_reason": (sampler.baseline.line(run_id)
                                    if sampler.baseline is not None else None),
                "note": FIXED_N_NOTE}
        return StageOutput(decisions_table(record), meta, run_meta={"adaptive": summary})

    return run_stage(store, run_id=run_id, stage=STAGE, upstream=[upstream],
                     params=sampler.config.sampling, rows_in=len(record.statuses),
                     compute=compute)
