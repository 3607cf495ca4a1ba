"""Pairwise outcome tables → per-prompt, per-pair outcome counts.

Input (one row per judged comparison after order-swap merging): ``prompt_id``,
``model_a``, ``model_b``, ``verdict`` in {"A", "B", "tie"} ("A" = model_a won),
optionally ``status`` (rows whose status is not "ok" are excluded and counted,
never turned into a verdict) and ``judge`` (callers split by judge first).

Models are indexed in sorted order and each unordered pair is stored once,
first model = the lower index, so "A"/"B" are re-expressed as first/second.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
from numpy.typing import NDArray

OK = "ok"
VERDICTS = ("A", "B", "tie")
REQUIRED = ("prompt_id", "model_a", "model_b", "verdict")
FIRST, SECOND, TIE = 0, 1, 2


@dataclass(frozen=True)
class EncodedOutcomes:
    """``counts[p, k]`` = (first wins, second wins, ties) on prompt p for pair k,
    where pair k is (models[pairs[k, 0]], models[pairs[k, 1]])."""

    models: tuple[str, ...]
    prompts: tuple[str, ...]
    pairs: NDArray[np.int64]  # (n_pairs, 2), first < second
    counts: NDArray[np.float64]  # (n_prompts, n_pairs, 3)
    n_failed: int

    def totals(self) -> NDArray[np.float64]:
        """(n_pairs, 3) counts summed over prompts."""
        return np.asarray(self.counts.sum(axis=0), dtype=np.float64)

    def record(self) -> dict[str, NDArray[np.int64]]:
        """Per model: wins, losses, ties and n (comparisons) over all prompts."""
        totals = self.totals()
        k = len(self.models)
        wins, losses, ties = (np.zeros(k, dtype=np.int64) for _ in range(3))
        for (i, j), (w, lo, t) in zip(self.pairs, totals, strict=True):
            wins[i] += int(w)
            wins[j] += int(lo)
            losses[i] += int(lo)
            losses[j] += int(w)
            ties[i] += int(t)
            ties[j] += int(t)
        return {"wins": wins, "losses": losses, "ties": ties, "n": wins + losses + ties}


def split_ok(outcomes: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Validated ok rows and the number of failed (status != ok) rows."""
    missing = [c for c in REQUIRED if c not in outcomes.columns]
    if missing:
        raise ValueError(f"pairwise outcomes lack column(s) {missing}; need {list(REQUIRED)}")
    if "status" in outcomes.columns:
        is_ok = (pl.col("status") == OK).fill_null(False)
        ok, n_failed = outcomes.filter(is_ok), outcomes.filter(~is_ok).height
    else:
        ok, n_failed = outcomes, 0
    bad = ok.filter(pl.col("verdict").is_null()
                    | ~pl.col("verdict").is_in(list(VERDICTS)).fill_null(False))
    if bad.height:
        raise ValueError(f"{bad.height} ok row(s) have a verdict outside {VERDICTS}, e.g. "
                         f"{bad['verdict'][0]!r}")
    same = ok.filter(pl.col("model_a") == pl.col("model_b"))
    if same.height:
        raise ValueError(f"a model compared with itself: {same['model_a'][0]!r}")
    if ok.select(pl.col("prompt_id", "model_a", "model_b").is_null().any()).row(0) != (
            False, False, False):
        raise ValueError("prompt_id, model_a and model_b must not be null")
    return ok, n_failed


def encode(outcomes: pl.DataFrame, models: Sequence[str] | None = None) -> EncodedOutcomes:
    """Count outcomes per prompt and unordered model pair (ok rows only)."""
    ok, n_failed = split_ok(outcomes)
    seen = sorted({str(m) for m in ok["model_a"].to_list() + ok["model_b"].to_list()})
    names = tuple(sorted(set(models))) if models is not None else tuple(seen)
    unknown = set(seen) - set(names)
    if unknown:
        raise ValueError(f"outcomes name models not in the model list: {sorted(unknown)}")
    m_index = {m: i for i, m in enumerate(names)}
    pair_list = sorted({tuple(sorted((m_index[str(a)], m_index[str(b)])))
                        for a, b in ok.select("model_a", "model_b").iter_rows()})
    pairs = np.array(pair_list, dtype=np.int64).reshape(-1, 2)
    k_index = {(int(i), int(j)): k for k, (i, j) in enumerate(pairs)}
    prompts = tuple(sorted({str(p) for p in ok["prompt_id"].to_list()}))
    p_index = {p: i for i, p in enumerate(prompts)}
    counts = np.zeros((len(prompts), len(pairs), 3))
    for prompt, a, b, verdict in ok.select(*REQUIRED).iter_rows():
        i, j = m_index[str(a)], m_index[str(b)]
        k = k_index[(min(i, j), max(i, j))]
        if verdict == "tie":
            slot = TIE
        else:
            a_won = verdict == "A"
            slot = FIRST if a_won == (i < j) else SECOND
        counts[p_index[str(prompt)], k, slot] += 1.0
    return EncodedOutcomes(models=names, prompts=prompts, pairs=pairs, counts=counts,
                           n_failed=n_failed)
