"""The alerts stage's judge-free signals: output drift against the comparable run and
relevance of this run's essays (``bench/signals``), as alerts and as the stage's meta.

A model's drift history is read from the chain of comparable runs: the baseline's own
alerts stage recorded its weekly median against *its* baseline, and so on back
(``history_weeks`` at most). The meta (``signals``) is what the report shows and what the
next week's band reads.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import polars as pl

from essaybench.bench.alerts import Alert
from essaybench.bench.gold import load_gold
from essaybench.bench.signals.drift import DriftSummary, drift_pairs, summarise
from essaybench.bench.signals.params import SignalParams
from essaybench.bench.signals.reference import (
    gold_essays,
    reference_table,
    summarise_reference,
)
from essaybench.bench.signals.relevance import (
    RelevanceSummary,
    relevance_table,
    summarise_relevance,
)
from essaybench.core.contracts import OK
from essaybench.stages.alerts_embeddings import embedding_meta, embedding_similarity
from essaybench.stages.gold import AttachedGold, attach_gold_file, run_gold
from essaybench.store import Snapshot, Store

STAGE = "alerts"


def _alerts_meta(store: Store, run_id: str) -> dict[str, Any] | None:
    for stage_run in store.stage_runs(run_id, 1000):  # newest first
        if stage_run.stage == STAGE and stage_run.status == OK:
            return dict(stage_run.meta or {})
    return None


def drift_history(store: Store, base_run: str | None, weeks: int) -> dict[str, list[float]]:
    """Per model, the weekly drift medians the chain of comparable runs starting at
    ``base_run`` recorded, newest first (a run without a figure for a model ends nothing:
    the model simply has no value that week)."""
    history: dict[str, list[float]] = {}
    seen: set[str] = set()
    run = base_run
    for _ in range(weeks):
        if run is None or run in seen:
            break
        seen.add(run)
        meta = _alerts_meta(store, run)
        if meta is None:
            break
        for model, fig in (meta.get("signals") or {}).get("drift", {}).items():
            if fig.get("median") is not None:
                history.setdefault(model, []).append(float(fig["median"]))
        run = meta.get("base_run")
    return history


def drift_alert(s: DriftSummary, params: SignalParams) -> Alert:
    return Alert(s.model, None, "output_drift", "warning", s.median,
                 (sum(s.history) / len(s.history)) if s.history else None, s.band_low,
                 f"{s.model}: median {params.drift_measure} with last comparable week's "
                 f"essays {s.median:.3f} over {s.n_pairs} prompts, below its band "
                 f"({s.reason(params)}): the model's output changed more than its own "
                 "week-to-week sampling does")


def off_topic_alert(s: RelevanceSummary, params: SignalParams) -> Alert:
    return Alert(s.model, None, "off_topic", "warning", s.off_topic_rate, None,
                 params.off_topic_rate,
                 f"{s.model}: {s.n_off_topic} of {s.n_checked} essays share under "
                 f"{params.relevance_threshold:.0%} of their prompt's topic bigrams "
                 "(answered a different question?)")


def signals(store: Store, essays_now: pl.DataFrame, base_run: str | None,
            base_essays: Snapshot | None, params: SignalParams, run_id: str | None = None
            ) -> tuple[list[Alert], dict[str, Any]]:
    """This run's signal alerts and the ``signals`` meta the stage records (``run_id``:
    whose gold set to use when none is named, see :func:`reference_meta`)."""
    if not params.enabled:
        return [], {"enabled": False}
    found: list[Alert] = []
    rel = summarise_relevance(relevance_table(essays_now, params.relevance_threshold))
    for r in rel:
        rate = r.off_topic_rate
        if rate is not None and r.n_off_topic and rate >= params.off_topic_rate:
            found.append(off_topic_alert(r, params))
    drift: list[DriftSummary] = []
    if base_essays is not None:
        pairs = drift_pairs(essays_now, base_essays.read(), params.ngram)
        drift = summarise(pairs, drift_history(store, base_run, params.history_weeks),
                          params)
        found += [drift_alert(s, params) for s in drift if s.verdict == "below"]
    meta = {"enabled": True, "drift_measure": params.drift_measure,
            "drift": {s.model: {**asdict(s), "history": list(s.history),
                                "reason": s.reason(params)} for s in drift},
            "relevance": {r.model: {**asdict(r), "off_topic_rate": r.off_topic_rate}
                          for r in rel}}
    if params.embedding_model is not None:
        meta["embedding"] = embedding_meta(
            params.embedding_model, essays_now,
            base_essays.read() if base_essays is not None else None)
    reference = reference_meta(store, run_id, essays_now, params)
    if reference is not None:
        meta["reference"] = reference
    return found, meta


def _run_versions(essays: pl.DataFrame) -> list[str]:
    return (sorted({str(v) for v in essays["prompt_set_version"].drop_nulls().to_list()})
            if "prompt_set_version" in essays.columns else [])


def run_gold_set(store: Store, run_id: str | None, essays: pl.DataFrame,
                 params: SignalParams) -> AttachedGold | None:
    """The gold set the reference figures use: ``gold_file`` attached to the run's prompt
    set (its ids checked against it), else the set the run uses (``stages/gold.py``)."""
    versions = _run_versions(essays)
    if not versions:
        return None
    if params.gold_file is not None:
        return attach_gold_file(store, params.gold_file, versions[0])[0]
    return run_gold(store, run_id, versions[0]) if run_id is not None else None


def reference_meta(store: Store, run_id: str | None, essays: pl.DataFrame,
                   params: SignalParams) -> dict[str, Any] | None:
    """The gold set's identity and, per model, the median reference-based metrics (None:
    no gold set). A run without a prompt-set version (older essays) reads ``gold_file``
    as it is, unattached."""
    attached = run_gold_set(store, run_id, essays, params)
    versions = _run_versions(essays)
    if attached is not None:
        loaded, bound = attached.loaded, attached.record.prompt_set_version
        source = "store" if params.gold_file is None else params.gold_file
    elif params.gold_file is not None:
        loaded, bound, source = load_gold(params.gold_file), None, params.gold_file
    else:
        return None
    gold = loaded.gold
    similarity, embedding_error = None, None
    if params.embedding_model is not None:
        texts = [*(t or "" for t in gold_essays(essays, gold)["essay_text"]),
                 *(i.reference for i in gold.items)]
        similarity, embedding_error = embedding_similarity(params.embedding_model, texts)
    table = reference_table(essays, gold, similarity)
    return {"prompt_set": bound or gold.prompt_set or "", "prompt_set_version": bound,
            "version": gold.version, "fingerprint": loaded.fingerprint,
            "sha256": loaded.fingerprint, "source": source, "n_items": len(gold.items),
            "n_criteria": len(gold.criteria()),
            "matches_prompt_set": bound is not None and bound in versions,
            "prompt_set_versions": versions,
            "embedding_model": params.embedding_model, "embedding_error": embedding_error,
            "models": {r.model: asdict(r) for r in summarise_reference(table)}}
