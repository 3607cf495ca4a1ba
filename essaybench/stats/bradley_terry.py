"""Bradley–Terry ratings with ties (Davidson 1970) and cluster-robust t-intervals.

Model. Each model i has a strength θ_i (natural-log scale) and ties share one
parameter ν = exp(δ) ≥ 0. For a comparison of i and j, with
D = e^θ_i + e^θ_j + ν·e^{(θ_i+θ_j)/2}:

    P(i wins) = e^θ_i / D,  P(j wins) = e^θ_j / D,  P(tie) = ν·e^{(θ_i+θ_j)/2} / D.

A tie therefore counts as half a win for each side in the strength equations,
and ν = 0 is the plain Bradley–Terry model (used when the data hold no tie).

Estimator (issue 25 item 9). The posterior mode under a stated weakly informative prior:
the mean-zero strengths are independent N(0, :data:`PRIOR_SD`²) — sd 3 natural-log
units, ≈ 520 rating points, so a model 2 sd from the average beats it at odds of
e^6 ≈ 400:1 — i.e. the penalty ``ridge``/2·Σθ² with ``ridge`` = 1/PRIOR_SD² (ν is not
shrunk). It is finite under separation and near separation (a model winning 149 of 150
comparisons gets a finite rating and bounds set by its one loss and this prior, not by an
arbitrary ridge); ``ridge=0`` gives the exact maximum-likelihood estimate, which exists
only without separation. Only differences of θ are identified: the fit works in an
orthonormal basis of {Σθ = 0}.

Scale and reference. rating = 1000 + 400·log10(e)·(θ − θ_ref): 400 points = 10:1 odds
of a win (Elo-like), and the reference model sits at exactly 1000 with the interval
[1000, 1000] (the others' intervals are for their difference to it). The reference is
the ``anchor`` model when one is named, else the median model of the point fit (models
in order of rating, best first, ties by name: the ⌈k/2⌉-th; :attr:`BradleyTerry.reference`):
a model far above or below the rest does not move it, whereas centring on the mean of
all ratings made every interval carry the outlier's uncertainty (350–395 points wide
instead of 93–130 in the issue's example).

Intervals. Prompts are clusters: the sandwich H⁻¹·M·H⁻¹ with H the penalised
information at the estimate and M = n/(n−1)·Σ_p g_p g_pᵀ over the n prompts' score
vectors g_p (centred), and t quantiles with n − 1 degrees of freedom — the same
construction as the cluster t-interval of the score means
(:mod:`essaybench.stats.cluster_t`); with ``ridge=0`` it equals statsmodels' clustered
logistic regression (tested). No resampling, so no replicate can separate. ``n_boot``
and ``seed`` are accepted for old callers and not used.

Separation (:mod:`essaybench.stats.bt_separation`). When the "beat or tied" digraph is
not strongly connected, only the reference component is rated — the anchor's, else the
largest, on equal sizes the one holding the alphabetically first model — on the
comparisons among its members (reference: its median model), and every other model is
reported with null rating and bounds, ``estimable = False`` and a note saying whether its
rating is unbounded above or below. Ranks still follow the prior's fit of all models,
which orders separated groups correctly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl
from numpy.typing import NDArray
from scipy import stats

from essaybench.stats.bootstrap import check_level, check_n_boot
from essaybench.stats.bt_separation import (
    NOTE_ABOVE,
    NOTE_APART,
    NOTE_BELOW,
    NOTE_NONE,
    separation_notes,
    subset,
)
from essaybench.stats.outcomes import EncodedOutcomes, encode

FloatArray = NDArray[np.float64]

BASE = 1000.0
SCALE = 400.0 / math.log(10.0)  # rating points per natural-log unit of strength
_MAX_STEP = 2.0
PRIOR_SD = 3.0  # natural-log units of strength: the stated weakly informative prior
PRIOR_RIDGE = 1.0 / PRIOR_SD**2
__all__ = ["NOTE_ABOVE", "NOTE_APART", "NOTE_BELOW", "NOTE_NONE", "PRIOR_RIDGE", "PRIOR_SD",
           "BradleyTerry", "DavidsonFit", "bradley_terry", "bradley_terry_encoded",
           "fit_davidson", "ranking_table", "separation_notes", "sum_zero_basis", "to_rating"]

RANKING_SCHEMA: dict[str, type[pl.DataType] | pl.DataType] = {
    "rank": pl.Int64, "model": pl.Utf8, "rating": pl.Float64, "ci_lo": pl.Float64,
    "ci_hi": pl.Float64, "wins": pl.Int64, "losses": pl.Int64, "ties": pl.Int64,
    "n": pl.Int64, "estimable": pl.Boolean, "note": pl.Utf8,
}


def sum_zero_basis(k: int) -> FloatArray:
    """(k, k−1) orthonormal basis of {θ ∈ R^k : Σθ = 0}."""
    centred = np.eye(k) - 1.0 / k
    u, _, _ = np.linalg.svd(centred)
    return np.asarray(u[:, : k - 1], dtype=np.float64)


@dataclass(frozen=True)
class _Design:
    basis: FloatArray  # (k, k−1)
    features: FloatArray  # (n_pairs, 3, dim): outcome utilities are features @ φ
    offset: FloatArray  # (3,): −inf on the tie outcome when ties are not modelled
    ties: bool

    @property
    def dim(self) -> int:
        return int(self.features.shape[2])


def _design(n_models: int, pairs: NDArray[np.int64], ties: bool) -> _Design:
    basis = sum_zero_basis(n_models)
    dim = n_models - 1 + (1 if ties else 0)
    feats = np.zeros((len(pairs), 3, dim))
    for k, (i, j) in enumerate(pairs):
        feats[k, 0, : n_models - 1] = basis[i]
        feats[k, 1, : n_models - 1] = basis[j]
        feats[k, 2, : n_models - 1] = 0.5 * (basis[i] + basis[j])
        if ties:
            feats[k, 2, n_models - 1] = 1.0
    offset = np.array([0.0, 0.0, 0.0 if ties else -np.inf])
    return _Design(basis=basis, features=feats, offset=offset, ties=ties)


def _newton(counts: FloatArray, design: _Design, start: FloatArray, ridge: float,
            max_iter: int = 100, tol: float = 1e-9) -> tuple[FloatArray, NDArray[np.bool_]]:
    """Maximise the penalised log-likelihood for each row of ``counts`` (B, pairs·3)."""
    n_rep = counts.shape[0]
    n_pairs, _, dim = design.features.shape
    x = design.features.reshape(n_pairs * 3, dim)
    xx = (x[:, :, None] * x[:, None, :]).reshape(n_pairs * 3, dim * dim)
    n = counts.reshape(n_rep, n_pairs, 3).sum(axis=2)
    observed = counts @ x
    penalty = np.full(dim, ridge)
    if design.ties:
        penalty[-1] = 0.0  # the tie parameter is not shrunk
    phi = start.copy()
    done = np.zeros(n_rep, dtype=bool)
    jitter = 1e-10 * np.eye(dim)
    for _ in range(max_iter):
        active = ~done
        if not active.any():
            break
        p_act = phi[active]
        util = (p_act @ x.T).reshape(-1, n_pairs, 3) + design.offset
        util -= util.max(axis=2, keepdims=True)
        prob = np.exp(util)
        prob /= prob.sum(axis=2, keepdims=True)
        n_act = n[active]
        w = (n_act[:, :, None] * prob).reshape(-1, n_pairs * 3)
        grad = observed[active] - w @ x - penalty * p_act
        mean_x = np.einsum("bpo,pod->bpd", prob, design.features)
        root = mean_x * np.sqrt(n_act)[:, :, None]
        info = ((w @ xx).reshape(-1, dim, dim) - root.transpose(0, 2, 1) @ root
                + np.diag(penalty) + jitter)
        step = np.linalg.solve(info, grad[:, :, None])[:, :, 0]
        size = np.abs(step).max(axis=1)
        step *= np.minimum(1.0, _MAX_STEP / np.maximum(size, 1e-300))[:, None]
        phi[active] = p_act + step
        done[np.flatnonzero(active)[size < tol]] = True
    return phi, done


@dataclass(frozen=True)
class DavidsonFit:
    """Point fit: mean-zero natural-log strengths θ and the tie parameter ν."""

    models: tuple[str, ...]
    theta: FloatArray
    nu: float
    converged: bool


def _split(phi: FloatArray, design: _Design) -> tuple[FloatArray, FloatArray]:
    k1 = design.basis.shape[1]
    theta = phi[:, :k1] @ design.basis.T
    log_nu = phi[:, k1] if design.ties else np.full(phi.shape[0], -np.inf)
    return np.asarray(theta, dtype=np.float64), np.asarray(log_nu, dtype=np.float64)


def _fit_encoded(enc: EncodedOutcomes, ridge: float) -> tuple[DavidsonFit, _Design,
                                                                FloatArray]:
    if len(enc.models) < 2 or not len(enc.pairs):
        raise ValueError("Bradley–Terry needs ok comparisons between at least two models")
    if ridge < 0:
        raise ValueError(f"ridge must be >= 0, got {ridge}")
    totals = enc.totals()
    design = _design(len(enc.models), enc.pairs, ties=bool(totals[:, 2].sum() > 0))
    if ridge == 0:
        _check_connected(enc)
    phi, done = _newton(totals.reshape(1, -1), design, np.zeros((1, design.dim)), ridge,
                        max_iter=200)
    if not done[0] and ridge == 0:
        raise ValueError("Bradley–Terry did not converge: some model wins or loses every "
                         "comparison, so its maximum-likelihood rating is infinite; pass "
                         "ridge > 0")
    theta, log_nu = _split(phi, design)
    fit = DavidsonFit(models=enc.models, theta=theta[0], nu=float(np.exp(log_nu[0])),
                      converged=bool(done[0]))
    return fit, design, phi[0]


def _check_connected(enc: EncodedOutcomes) -> None:
    parent = list(range(len(enc.models)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i, j in enc.pairs:
        parent[root(int(i))] = root(int(j))
    if len({root(i) for i in range(len(enc.models))}) > 1:
        raise ValueError("the comparison graph is disconnected: ratings of separate groups "
                         "are not comparable; pass ridge > 0 or add comparisons")


def fit_davidson(outcomes: pl.DataFrame, ridge: float = PRIOR_RIDGE) -> DavidsonFit:
    """Point fit of the Davidson model on the ok rows of one judge's outcomes."""
    return _fit_encoded(encode(outcomes), ridge)[0]


def to_rating(theta: FloatArray, anchor_index: int | None = None) -> FloatArray:
    """Natural-log strengths → 1000 + 400·log10(e)·θ (shifted so the anchor is 1000)."""
    shift = 0.0 if anchor_index is None else theta[..., anchor_index : anchor_index + 1]
    return np.asarray(BASE + SCALE * (theta - shift), dtype=np.float64)


@dataclass(frozen=True)
class BradleyTerry:
    """Point ratings and cluster-robust t-intervals; NaN for a model whose rating the data
    cannot estimate (``notes[i]`` says why, "" when rated). ``reference`` is the model at
    1000 (the anchor, else the rated models' median)."""

    models: tuple[str, ...]
    theta: FloatArray
    nu: float
    rating: FloatArray
    lo: FloatArray
    hi: FloatArray
    se: FloatArray  # standard error of rating − reference's rating (points)
    record: dict[str, NDArray[np.int64]]
    n_failed: int
    level: float
    anchor: str | None
    reference: str | None
    notes: tuple[str, ...] = ()
    order: FloatArray | None = None  # ranking key (the prior's fit when some are not rated)

    def table(self) -> pl.DataFrame:
        """Ranking: rank, model, rating, ci_lo, ci_hi, wins, losses, ties, n, estimable,
        note (null rating and bounds for a model that is not estimable)."""
        key = self.rating if self.order is None else self.order
        notes = self.notes or ("",) * len(self.models)
        order = sorted(range(len(self.models)), key=lambda i: (-key[i], self.models[i]))
        rows = [{"rank": r + 1, "model": self.models[i], "rating": _opt(self.rating[i]),
                 "ci_lo": _opt(self.lo[i]), "ci_hi": _opt(self.hi[i]),
                 **{key: int(values[i]) for key, values in self.record.items()},
                 "estimable": not notes[i], "note": notes[i] or None}
                for r, i in enumerate(order)]
        return pl.DataFrame(rows, schema=RANKING_SCHEMA)


def _opt(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def median_model(theta: FloatArray, models: tuple[str, ...]) -> int:
    """Index of the median model: in order of strength, best first, ties by name, the
    ⌈k/2⌉-th."""
    order = sorted(range(len(models)), key=lambda i: (-theta[i], models[i]))
    return order[(len(models) - 1) // 2]


def cluster_covariance(enc: EncodedOutcomes, design: _Design, phi: FloatArray,
                       ridge: float) -> tuple[FloatArray, int]:
    """(sandwich covariance of φ̂ with prompts as clusters, number of prompts)."""
    n_pairs, _, dim = design.features.shape
    x = design.features.reshape(n_pairs * 3, dim)
    util = (phi @ x.T).reshape(n_pairs, 3) + design.offset
    util -= util.max(axis=1, keepdims=True)
    prob = np.exp(util)
    prob /= prob.sum(axis=1, keepdims=True)
    counts = enc.counts  # (n_prompts, n_pairs, 3)
    used = counts.sum(axis=(1, 2)) > 0
    counts = counts[used]
    n = int(used.sum())
    per_pair = counts.sum(axis=2)
    g = (counts - per_pair[:, :, None] * prob[None]).reshape(n, n_pairs * 3) @ x
    g -= g.mean(axis=0)
    totals = per_pair.sum(axis=0)
    mean_x = np.einsum("po,pod->pd", prob, design.features)
    info = (np.einsum("p,po,pod,poe->de", totals, prob, design.features, design.features)
            - np.einsum("p,pd,pe->de", totals, mean_x, mean_x))
    penalty = np.full(dim, ridge)
    if design.ties:
        penalty[-1] = 0.0
    h_inv = np.linalg.pinv(info + np.diag(penalty))
    meat = g.T @ g * (n / (n - 1.0)) if n > 1 else np.full((dim, dim), np.nan)
    return np.asarray(h_inv @ meat @ h_inv, dtype=np.float64), n


def _rate(enc: EncodedOutcomes, ridge: float, level: float, anchor: str | None
          ) -> tuple[DavidsonFit, int, FloatArray, FloatArray, FloatArray, FloatArray]:
    """(fit, reference index, rating, lo, hi, se) of a connected set of models."""
    fit, design, phi = _fit_encoded(enc, ridge)
    ref = enc.models.index(anchor) if anchor is not None else median_model(fit.theta,
                                                                           enc.models)
    cov, n = cluster_covariance(enc, design, phi, ridge)
    k1 = design.basis.shape[1]
    contrast = np.zeros((len(enc.models), design.dim))
    contrast[:, :k1] = design.basis - design.basis[ref]
    se = SCALE * np.sqrt(np.maximum(np.einsum("id,de,ie->i", contrast, cov, contrast), 0.0))
    rating = to_rating(fit.theta, ref)
    q = float(stats.t.ppf(0.5 + level / 2.0, max(n - 1, 1)))
    return fit, ref, rating, rating - q * se, rating + q * se, se


def bradley_terry(outcomes: pl.DataFrame, *, n_boot: int = 2000, level: float = 0.95,
                  seed: int | np.random.Generator = 0, anchor: str | None = None,
                  ridge: float = PRIOR_RIDGE) -> BradleyTerry:
    """Davidson–Bradley–Terry ratings of one judge's outcomes with cluster-robust
    t-intervals (``n_boot`` and ``seed`` are not used)."""
    level, n_boot = check_level(level), check_n_boot(n_boot)
    if "judge" in outcomes.columns and outcomes["judge"].n_unique() > 1:
        raise ValueError("outcomes hold several judges: fit one judge at a time "
                         "(see ranking_table)")
    return bradley_terry_encoded(encode(outcomes), level=level, anchor=anchor, ridge=ridge)


def bradley_terry_encoded(enc: EncodedOutcomes, *, n_boot: int = 2000, level: float = 0.95,
                          seed: int | np.random.Generator = 0, anchor: str | None = None,
                          ridge: float = PRIOR_RIDGE) -> BradleyTerry:
    """:func:`bradley_terry` on already-encoded counts (what simulations build directly)."""
    level = check_level(level)
    if anchor is not None and anchor not in enc.models:
        raise ValueError(f"anchor {anchor!r} is not among the models {list(enc.models)}")
    a_idx = None if anchor is None else enc.models.index(anchor)
    if len(enc.models) < 2 or not len(enc.pairs):
        raise ValueError("Bradley–Terry needs ok comparisons between at least two models")
    notes = separation_notes(enc, a_idx)
    rated = np.array([not note for note in notes])
    common = {"record": enc.record(), "n_failed": enc.n_failed, "level": level,
              "anchor": anchor, "notes": tuple(notes)}
    if rated.all():
        fit, ref, rating, lo, hi, se = _rate(enc, ridge, level, anchor)
        return BradleyTerry(models=enc.models, theta=fit.theta, nu=fit.nu, rating=rating,
                            lo=lo, hi=hi, se=se, reference=enc.models[ref],
                            **common)  # type: ignore[arg-type]
    # Separation: the prior's fit of everyone only orders the groups; ratings and
    # intervals come from the reference component alone.
    ordering = _fit_encoded(enc, max(ridge, PRIOR_RIDGE))[0]
    k = len(enc.models)
    theta, rating, lo, hi, se = (np.full(k, np.nan) for _ in range(5))
    nu, reference = ordering.nu, None
    if rated.any():
        sub = subset(enc, rated)
        fit, ref, rating[rated], lo[rated], hi[rated], se[rated] = _rate(sub, ridge, level,
                                                                         anchor)
        theta[rated], nu, reference = fit.theta, fit.nu, sub.models[ref]
    ref_i = None if reference is None else enc.models.index(reference)
    return BradleyTerry(models=enc.models, theta=theta, nu=nu, rating=rating, lo=lo, hi=hi,
                        se=se, reference=reference,
                        order=to_rating(ordering.theta, ref_i),
                        **common)  # type: ignore[arg-type]


def ranking_table(outcomes: pl.DataFrame, *, n_boot: int = 2000, level: float = 0.95,
                  seed: int | np.random.Generator = 0, anchor: str | None = None,
                  ridge: float = PRIOR_RIDGE) -> pl.DataFrame:
    """One ranking per judge (judges in sorted order), with a ``judge`` column first; a
    table without ``judge`` is treated as one judge ""."""
    if "judge" not in outcomes.columns:
        outcomes = outcomes.with_columns(pl.lit("").alias("judge"))
    frames = []
    for judge in sorted({str(j) for j in outcomes["judge"].to_list()}):
        res = bradley_terry(outcomes.filter(pl.col("judge") == judge), level=level,
                            anchor=anchor, ridge=ridge)
        frames.append(res.table().select(pl.lit(judge).alias("judge"), pl.all()))
    if not frames:
        return pl.DataFrame(schema={"judge": pl.Utf8, **RANKING_SCHEMA})
    return pl.concat(frames)
