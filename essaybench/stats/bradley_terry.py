"""Bradley–Terry ratings with ties (Davidson 1970), seeded prompt-bootstrap CIs.

Model. Each model i has a strength θ_i (natural-log scale) and ties share one
parameter ν = exp(δ) ≥ 0. For a comparison of i and j, with
D = e^θ_i + e^θ_j + ν·e^{(θ_i+θ_j)/2}:

    P(i wins) = e^θ_i / D,  P(j wins) = e^θ_j / D,  P(tie) = ν·e^{(θ_i+θ_j)/2} / D.

A tie therefore counts as half a win for each side in the strength equations,
and ν = 0 is the plain Bradley–Terry model (used when the data hold no tie).

Identifiability. Only differences of θ are identified: the fit imposes Σθ = 0
(mean-zero strengths) by working in an orthonormal basis of that subspace.
A weak Gaussian penalty ``ridge``/2·Σθ² (a N(0, 1/ridge) prior; the default
1e-3 means sd ≈ 32 log units ≈ 5,500 rating points) keeps ratings finite when
a model wins or loses every comparison (e.g. in a bootstrap replicate); it
moves realistic estimates by far less than their standard error. ``ridge=0``
gives the exact maximum-likelihood estimate.

Scale. rating = 1000 + 400·log10(e)·θ, so 400 points = 10:1 odds of a win
(Elo-like) and the models' mean rating is 1000. With ``anchor=<model>`` the
ratings are shifted so that model sits at exactly 1000 (its CI is then [1000,
1000] and the others' CIs are relative to it).

Fitting. Davidson's model is a 3-outcome multinomial logit with utilities
linear in (θ, δ), so the log-likelihood is concave; the fit is Newton's
method with a capped step, vectorised over bootstrap replicates (each
replicate is warm-started at the point estimate).

Intervals. A replicate resamples prompts with replacement (all comparisons of
a prompt, both orders included, stay together) and refits; bounds are
percentiles of the replicate ratings.

Separation. The maximum-likelihood ratings are finite only when the "beat or tied"
digraph (an edge i → j when i beat or tied j at least once) is strongly connected
(Zermelo 1929; Hunter 2004, condition A; a tie is half a win for each side). Otherwise
some group of models never loses to (or never beats) the rest: their rating difference
is infinite, and the ridge would print a finite number with a narrow interval that only
reflects the prior. :func:`bradley_terry` therefore finds the strongly connected
components (scipy's ``connected_components(connection="strong")``), rates only the
reference component — the anchor's, else the largest — on the comparisons among its
members (their mean rating is 1000 when there is no anchor), and reports every other
model with null rating and bounds, ``estimable = False`` and a note saying whether its
rating is unbounded above or below. Ranks still follow the ridge fit of all models,
which orders separated groups correctly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl
from numpy.typing import NDArray
from scipy.sparse import csr_array
from scipy.sparse.csgraph import breadth_first_order, connected_components

from essaybench.stats.bootstrap import (
    as_generator,
    check_level,
    check_n_boot,
    percentile_bounds,
    resample_counts,
)
from essaybench.stats.outcomes import EncodedOutcomes, encode

FloatArray = NDArray[np.float64]

BASE = 1000.0
SCALE = 400.0 / math.log(10.0)  # rating points per natural-log unit of strength
_BATCH = 256  # replicates per Newton batch: bounds memory at ~B·pairs·3·dim floats
_MAX_STEP = 2.0

RANKING_SCHEMA: dict[str, type[pl.DataType] | pl.DataType] = {
    "rank": pl.Int64, "model": pl.Utf8, "rating": pl.Float64, "ci_lo": pl.Float64,
    "ci_hi": pl.Float64, "wins": pl.Int64, "losses": pl.Int64, "ties": pl.Int64,
    "n": pl.Int64, "estimable": pl.Boolean, "note": pl.Utf8,
}
NOTE_ABOVE = "not estimable: never loses to the rated models (separation), unbounded above"
NOTE_BELOW = "not estimable: never beats the rated models (separation), unbounded below"
NOTE_APART = "not estimable: no comparison links it to the rated models"
NOTE_NONE = "not estimable: no two models the data can rate against each other"


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


def fit_davidson(outcomes: pl.DataFrame, ridge: float = 1e-3) -> DavidsonFit:
    """Point fit of the Davidson model on the ok rows of one judge's outcomes."""
    return _fit_encoded(encode(outcomes), ridge)[0]


def to_rating(theta: FloatArray, anchor_index: int | None = None) -> FloatArray:
    """Natural-log strengths → 1000 + 400·log10(e)·θ (shifted so the anchor is 1000)."""
    shift = 0.0 if anchor_index is None else theta[..., anchor_index : anchor_index + 1]
    return np.asarray(BASE + SCALE * (theta - shift), dtype=np.float64)


@dataclass(frozen=True)
class BradleyTerry:
    """Point ratings, percentile CIs and replicate ratings (n_boot, n_models); NaN for a
    model whose rating the data cannot estimate (``notes[i]`` says why, "" when rated)."""

    models: tuple[str, ...]
    theta: FloatArray
    nu: float
    rating: FloatArray
    lo: FloatArray
    hi: FloatArray
    boot: FloatArray
    record: dict[str, NDArray[np.int64]]
    n_failed: int
    level: float
    n_boot: int
    anchor: str | None
    notes: tuple[str, ...] = ()
    order: FloatArray | None = None  # ranking key (the ridge fit when some are not rated)

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


def _beat_or_tied(enc: EncodedOutcomes) -> csr_array:
    """Digraph with an edge i → j when i beat or tied j at least once."""
    k = len(enc.models)
    adj = np.zeros((k, k), dtype=np.int8)
    for (i, j), (first, second, tie) in zip(enc.pairs, enc.totals(), strict=True):
        adj[i, j] |= int(first > 0 or tie > 0)
        adj[j, i] |= int(second > 0 or tie > 0)
    return csr_array(adj)


def separation_notes(enc: EncodedOutcomes, anchor_index: int | None = None) -> list[str]:
    """Per model: "" when its rating is estimable, else why not (see the module doc)."""
    k = len(enc.models)
    graph = _beat_or_tied(enc)
    n_comp, labels = connected_components(graph, directed=True, connection="strong")
    if n_comp == 1:
        return [""] * k
    sizes = np.bincount(labels)
    ref = labels[anchor_index] if anchor_index is not None else \
        labels[min(range(k), key=lambda i: (-sizes[labels[i]], i))]
    members = labels == ref
    if members.sum() < 2:
        return [NOTE_NONE] * k
    start = int(np.flatnonzero(members)[0])
    beaten_by_rated = set(breadth_first_order(graph, start, return_predecessors=False).tolist())
    beats_rated = set(breadth_first_order(graph.T.tocsr(), start,
                                          return_predecessors=False).tolist())
    return ["" if members[i] else NOTE_ABOVE if i in beats_rated and i not in beaten_by_rated
            else NOTE_BELOW if i in beaten_by_rated and i not in beats_rated else NOTE_APART
            for i in range(k)]


def _subset(enc: EncodedOutcomes, keep: NDArray[np.bool_]) -> EncodedOutcomes:
    """The comparisons among the kept models, on the prompts that hold any of them."""
    index = np.full(len(enc.models), -1, dtype=np.int64)
    index[keep] = np.arange(int(keep.sum()))
    inside = keep[enc.pairs[:, 0]] & keep[enc.pairs[:, 1]]
    counts = enc.counts[:, inside]
    used = counts.sum(axis=(1, 2)) > 0
    return EncodedOutcomes(models=tuple(m for m, k in zip(enc.models, keep, strict=True) if k),
                           prompts=tuple(p for p, u in zip(enc.prompts, used, strict=True) if u),
                           pairs=index[enc.pairs[inside]], counts=counts[used],
                           n_failed=enc.n_failed)


def bradley_terry(outcomes: pl.DataFrame, *, n_boot: int = 2000, level: float = 0.95,
                  seed: int | np.random.Generator = 0, anchor: str | None = None,
                  ridge: float = 1e-3) -> BradleyTerry:
    """Davidson–Bradley–Terry ratings of one judge's outcomes with prompt-bootstrap CIs."""
    level, n_boot = check_level(level), check_n_boot(n_boot)
    if "judge" in outcomes.columns and outcomes["judge"].n_unique() > 1:
        raise ValueError("outcomes hold several judges: fit one judge at a time "
                         "(see ranking_table)")
    return bradley_terry_encoded(encode(outcomes), n_boot=n_boot, level=level, seed=seed,
                                 anchor=anchor, ridge=ridge)


def bradley_terry_encoded(enc: EncodedOutcomes, *, n_boot: int = 2000, level: float = 0.95,
                          seed: int | np.random.Generator = 0, anchor: str | None = None,
                          ridge: float = 1e-3) -> BradleyTerry:
    """:func:`bradley_terry` on already-encoded counts (what simulations build directly)."""
    level, n_boot = check_level(level), check_n_boot(n_boot)
    if anchor is not None and anchor not in enc.models:
        raise ValueError(f"anchor {anchor!r} is not among the models {list(enc.models)}")
    a_idx = None if anchor is None else enc.models.index(anchor)
    if len(enc.models) < 2 or not len(enc.pairs):
        raise ValueError("Bradley–Terry needs ok comparisons between at least two models")
    notes = separation_notes(enc, a_idx)
    rated = np.array([not note for note in notes])
    rng = as_generator(seed)
    if rated.all():
        fit, design, phi = _fit_encoded(enc, ridge)
        boot = to_rating(bootstrap_theta(enc, design, phi, ridge, n_boot, rng), a_idx)
        lo, hi = percentile_bounds(boot, level)
        return BradleyTerry(models=enc.models, theta=fit.theta, nu=fit.nu,
                            rating=to_rating(fit.theta, a_idx), lo=lo, hi=hi, boot=boot,
                            record=enc.record(), n_failed=enc.n_failed, level=level,
                            n_boot=n_boot, anchor=anchor, notes=tuple(notes))
    # Separation: the ridge fit of everyone only orders the groups; ratings and intervals
    # come from the reference component alone.
    ordering = _fit_encoded(enc, max(ridge, 1e-3))[0]
    k = len(enc.models)
    theta, rating = np.full(k, np.nan), np.full(k, np.nan)
    lo, hi, boot = np.full(k, np.nan), np.full(k, np.nan), np.full((n_boot, k), np.nan)
    nu = ordering.nu
    if rated.any():
        sub = _subset(enc, rated)
        sub_anchor = None if anchor is None else sub.models.index(anchor)
        fit, design, phi = _fit_encoded(sub, ridge)
        sub_boot = to_rating(bootstrap_theta(sub, design, phi, ridge, n_boot, rng), sub_anchor)
        theta[rated], rating[rated], nu = fit.theta, to_rating(fit.theta, sub_anchor), fit.nu
        boot[:, rated] = sub_boot
        lo[rated], hi[rated] = percentile_bounds(sub_boot, level)
    return BradleyTerry(models=enc.models, theta=theta, nu=nu, rating=rating, lo=lo, hi=hi,
                        boot=boot, record=enc.record(), n_failed=enc.n_failed, level=level,
                        n_boot=n_boot, anchor=anchor, notes=tuple(notes),
                        order=to_rating(ordering.theta))


def bootstrap_theta(enc: EncodedOutcomes, design: _Design, start: FloatArray, ridge: float,
                    n_boot: int, rng: np.random.Generator) -> FloatArray:
    """(n_boot, n_models) mean-zero strengths refitted on prompt-resampled counts."""
    flat = enc.counts.reshape(len(enc.prompts), -1)
    weights = resample_counts(len(enc.prompts), n_boot, rng)
    out = np.empty((n_boot, len(enc.models)))
    # Replicates that never converge (only if a replicate separates perfectly and
    # ridge is tiny) still hold finite, very large ratings: they fall in the tails.
    for s in range(0, n_boot, _BATCH):
        counts = weights[s : s + _BATCH] @ flat
        phi, _ = _newton(counts, design, np.tile(start, (counts.shape[0], 1)), ridge)
        out[s : s + _BATCH] = _split(phi, design)[0]
    return out


def ranking_table(outcomes: pl.DataFrame, *, n_boot: int = 2000, level: float = 0.95,
                  seed: int | np.random.Generator = 0, anchor: str | None = None,
                  ridge: float = 1e-3) -> pl.DataFrame:
    """One ranking per judge (judges in sorted order from one generator), with a
    ``judge`` column first; a table without ``judge`` is treated as one judge ""."""
    rng = as_generator(seed)
    if "judge" not in outcomes.columns:
        outcomes = outcomes.with_columns(pl.lit("").alias("judge"))
    frames = []
    for judge in sorted({str(j) for j in outcomes["judge"].to_list()}):
        res = bradley_terry(outcomes.filter(pl.col("judge") == judge), n_boot=n_boot,
                            level=level, seed=rng, anchor=anchor, ridge=ridge)
        frames.append(res.table().select(pl.lit(judge).alias("judge"), pl.all()))
    if not frames:
        return pl.DataFrame(schema={"judge": pl.Utf8, **RANKING_SCHEMA})
    return pl.concat(frames)
