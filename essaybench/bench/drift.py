"""Judge drift: is a judge still scoring the anchor set as it did when calibrated?

Pure. A judge's *identity* is everything that decides its scores: the registry entry's
provider, model id and default parameters (not its base URL: the same model behind another
address is the same judge), the judge settings (mode, temperature, token
and analysis limits), the rubric and judge-prompt fingerprints, and the anchor set.
A *calibration* is that identity's scores on the anchor set, stored once; each run
re-scores the anchors and :func:`assess_drift` compares, over the anchors both scored:

* the mean shift (now − reference, points of 0–100) with the paired t-interval over
  anchors (:func:`essaybench.stats.cluster_t.cluster_t_differences`; a shift that is the
  same on every anchor is decided, [d, d]; the percentile bootstrap it replaces covers
  ≈ 92% at 15 units, issue 25 item 11): drift when ``|shift| >= max_mean_shift`` and the
  CI excludes 0;
* Spearman's ρ (and Kendall's τ, reported) between reference and now: drift when
  ``ρ < min_rank_correlation``;
* fewer than ``min_anchors`` scored both times: ``unverified`` — not trusted either.

A judge whose verdict is not ``stable`` (or that has just been calibrated by force after
a change) is *not comparable* with earlier weeks: its week-over-week quality comparisons
are skipped and said so.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict, Field
from scipy.stats import kendalltau, spearmanr

from essaybench.core.contracts import OK
from essaybench.core.hashing import content_hash
from essaybench.stats.cluster_t import cluster_t_differences

Verdict = Literal["stable", "drifted", "unverified", "calibrated", "recalibrated"]
# calibrated: first use of this judge — this run's anchor scores became its reference;
# recalibrated: the judge changed and the run was forced — new reference, not comparable.
COMPARABLE_VERDICTS = ("stable", "calibrated")


class DriftParams(BaseModel):
    """``drift:`` in the benchmark config (absent: the default; ``drift: null``: off)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    anchor_set: str | None = Field(default=None, description="Anchor-set file (default: "
                                   "rubrics/anchors/essay_anchors.v1.yaml).")
    anchors: int | None = Field(default=None, ge=2, description="Re-judge this many anchors "
                                "(a genre-stratified seeded sample); None: all.")
    seed: int = Field(default=0, description="Seed of the anchor sample.")
    score: Literal["score_weighted", "score_unweighted", "align_total"] = Field(
        default="score_weighted", description="The judge score compared.")
    max_mean_shift: float = Field(default=5.0, gt=0, description="Least mean shift (points "
                                  "of 0–100) whose CI excludes 0 that counts as drift.")
    min_rank_correlation: float = Field(default=0.6, ge=-1, le=1, description="Spearman ρ "
                                        "between reference and now below this is drift.")
    min_anchors: int = Field(default=8, ge=2, description="Fewer anchors scored both times "
                             "than this: the judge is unverified (not trusted).")
    level: float = Field(default=0.95, gt=0, lt=1, description="Level of the shift's CI.")
    n_boot: int = Field(default=2000, ge=100, description="Unused (the shift's interval is a "
                        "t-interval since issue 25); kept so existing configs load.")


def judge_identity(judge: str, endpoint: dict[str, Any], settings: dict[str, Any],
                   rubric: str, judge_prompt: str | None, anchor_set: str) -> dict[str, Any]:
    """The parts of a judge's identity, and its hash under ``id``. ``endpoint``: the
    registry fields that decide the model (provider, model_id, default_params)."""
    parts: dict[str, Any] = {"judge": judge, "endpoint": endpoint, "settings": settings,
                             "rubric": rubric, "judge_prompt": judge_prompt,
                             "anchor_set": anchor_set}
    return {**parts, "id": content_hash(parts)}


def identity_changes(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What differs between two identities of one judge, as ``part: old → new``."""
    changes = []
    for part in ("endpoint", "settings", "rubric", "judge_prompt", "anchor_set"):
        if before.get(part) != now.get(part):
            changes.append(f"{part}: {_short(before.get(part))} → {_short(now.get(part))}")
    return changes


def _short(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={_short(v)}" for k, v in sorted(value.items()))
    return str(value)


@dataclass(frozen=True)
class JudgeDrift:
    """One judge's anchor re-scoring against its reference."""

    judge: str
    verdict: Verdict
    n_anchors: int  # anchors sent
    n_ok: int  # scored now
    n_paired: int  # scored now and in the reference
    mean_now: float | None
    mean_reference: float | None
    shift: float | None
    shift_lo: float | None
    shift_hi: float | None
    spearman: float | None
    kendall: float | None
    reason: str

    @property
    def comparable(self) -> bool:
        return self.verdict in COMPARABLE_VERDICTS

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "comparable": self.comparable}

    def line(self) -> str:
        return f"judge {self.judge}: {self.verdict} — {self.reason}"


def _ok_scores(table: pl.DataFrame, judge: str, score: str) -> dict[str, float]:
    rows = table.filter((pl.col("judge") == judge) & (pl.col("status") == OK)
                        & pl.col(score).is_not_null())
    return {str(a): float(s) for a, s in rows.select("prompt_id", score).iter_rows()}


def _finite(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def assess_drift(judge: str, now: pl.DataFrame, reference: pl.DataFrame,
                 params: DriftParams) -> JudgeDrift:
    """``judge``'s anchor judgments ``now`` against its calibration ``reference`` (both
    judge-stage tables with prompt_id = anchor id)."""
    sent = now.filter(pl.col("judge") == judge).height
    scored, ref = _ok_scores(now, judge, params.score), _ok_scores(reference, judge,
                                                                   params.score)
    common = sorted(set(scored) & set(ref))
    x = np.array([ref[a] for a in common])
    y = np.array([scored[a] for a in common])
    base: dict[str, Any] = {
        "judge": judge, "n_anchors": sent, "n_ok": len(scored), "n_paired": len(common),
        "mean_now": float(y.mean()) if common else None,
        "mean_reference": float(x.mean()) if common else None}
    if len(common) < params.min_anchors:
        return JudgeDrift(**base, verdict="unverified", shift=None, shift_lo=None,
                          shift_hi=None, spearman=None, kendall=None,
                          reason=f"only {len(common)} of {sent} anchors scored now and in "
                          f"the reference (at least {params.min_anchors} needed)")
    pair = np.column_stack([y, x])
    ci = cluster_t_differences(pair, np.ones_like(pair), np.array([0]), np.array([1]),
                               level=params.level, min_prompts=2)
    shift, lo, hi = float((y - x).mean()), float(ci.lo[0]), float(ci.hi[0])
    constant = np.ptp(x) == 0 or np.ptp(y) == 0
    rho = None if constant else _finite(float(spearmanr(x, y).statistic))
    tau = None if constant else _finite(float(kendalltau(x, y).statistic))
    why = []
    if abs(shift) >= params.max_mean_shift and (lo > 0 or hi < 0):
        why.append(f"mean shift {shift:+.1f} ({params.level:.0%} CI [{lo:+.1f}, {hi:+.1f}]; "
                   f"tolerance ±{params.max_mean_shift:g})")
    if rho is None and not np.array_equal(x, y):
        why.append("scores constant on the anchors in one of the two scorings: no ranking")
    elif rho is not None and rho < params.min_rank_correlation:
        why.append(f"rank correlation ρ {rho:.2f} < {params.min_rank_correlation:g}")
    stats = (f"shift {shift:+.1f} [{lo:+.1f}, {hi:+.1f}], ρ "
             f"{'—' if rho is None else f'{rho:.2f}'} over {len(common)} anchors")
    return JudgeDrift(**base, verdict="drifted" if why else "stable", shift=shift,
                      shift_lo=lo, shift_hi=hi, spearman=rho, kendall=tau,
                      reason="; ".join(why) + f" ({stats})" if why else stats)


def first_calibration(judge: str, now: pl.DataFrame, params: DriftParams,
                      forced_changes: list[str] | None) -> JudgeDrift:
    """The verdict of a run whose anchor scores become ``judge``'s reference: its first
    use (``forced_changes`` None), or a change forced through (the changes listed)."""
    scored = _ok_scores(now, judge, params.score)
    mean = float(np.mean(list(scored.values()))) if scored else None
    sent = now.filter(pl.col("judge") == judge).height
    if forced_changes is None:
        verdict: Verdict = "calibrated"
        reason = f"first use: {len(scored)} of {sent} anchors scored became its reference"
    else:
        verdict = "recalibrated"
        reason = ("changed without calibration (forced): " + "; ".join(forced_changes)
                  + " — not comparable with earlier weeks")
    return JudgeDrift(judge, verdict, sent, len(scored), 0, mean, None, None, None, None,
                      None, None, reason)
