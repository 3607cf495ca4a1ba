"""A leaderboard adjusted for essay length, as arena-style length (style) control does.
Pure: no store, no IO.

Judges tend to prefer longer essays, and a model that writes longer would then rank
higher for its length alone. The adjustment fits, by ordinary least squares over the
judge's ok scores,

    score_i = α_model(i) + γ_genre(i) + β_genre(i) · (length_i − L̄_genre(i)) + ε_i

(one α per model, one γ per genre but the first, one length slope β per genre; L̄_g the
mean length of genre g's essays). The slopes are fitted jointly with the model terms,
as arena-hard-auto's style control fits its style coefficients beside the models'
strengths: a slope says how the score moves with length for the same model, so a better
model that also writes longer keeps its lead. Each essay's length-controlled score is
its score moved along its genre's slope to the genre's mean length,
score_i − β_g·(length_i − L̄_g), and a model's length-controlled mean is the mean of
those, beside its raw mean over the same essays.

A genre whose essays all have one length (or one essay) has no slope (0). The fit is a
point estimate: no interval is claimed for the adjusted means.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

PER = 100.0  # slopes are reported per this many characters

SLOPE_SCHEMA: dict[str, type[pl.DataType]] = {
    "genre": pl.Utf8, "n": pl.Int64, "mean_length": pl.Float64, "slope_per_100": pl.Float64}
MODEL_SCHEMA: dict[str, type[pl.DataType]] = {
    "model": pl.Utf8, "n": pl.Int64, "mean_length": pl.Float64, "raw_mean": pl.Float64,
    "controlled_mean": pl.Float64, "shift": pl.Float64, "raw_rank": pl.Int64,
    "controlled_rank": pl.Int64}


@dataclass(frozen=True)
class LengthControl:
    """The fit's slopes per genre and the models' raw and length-controlled means (best
    controlled first); ``left_out``: rows with a score but no length."""

    slopes: pl.DataFrame
    models: pl.DataFrame
    left_out: int


def _ranks(values: np.ndarray) -> np.ndarray:
    """1 = highest; ties share the better rank."""
    order = -values
    return np.array([int((order < v).sum()) + 1 for v in order], dtype=np.int64)


def length_controlled(rows: pl.DataFrame, *, score: str = "score", length: str = "length",
                      unit: str = "model", group: str = "genre") -> LengthControl:
    """The length-controlled leaderboard of ``rows`` (one per scored essay: ``unit``,
    ``group``, ``score``, ``length``; null score: not scored, left out; null length: no
    length, left out and counted in ``left_out``)."""
    scored = rows.filter(pl.col(score).is_not_null())
    ok = scored.filter(pl.col(length).is_not_null()).with_columns(
        pl.col(group).cast(pl.Utf8).fill_null("(none)"), pl.col(unit).cast(pl.Utf8),
        pl.col(score).cast(pl.Float64), pl.col(length).cast(pl.Float64))
    left_out = scored.height - ok.height
    if ok.height == 0:
        return LengthControl(pl.DataFrame(schema=SLOPE_SCHEMA),
                             pl.DataFrame(schema=MODEL_SCHEMA), left_out)
    units = sorted(set(ok[unit].to_list()))
    groups = sorted(set(ok[group].to_list()))
    y = ok[score].to_numpy()
    g = ok[group].to_numpy()
    u = ok[unit].to_numpy()
    x = ok[length].to_numpy()
    means = {k: float(x[g == k].mean()) for k in groups}
    centred = x - np.array([means[k] for k in g])
    columns = ([(u == m).astype(float) for m in units]
               + [(g == k).astype(float) for k in groups[1:]]
               + [centred * (g == k) for k in groups])
    design = np.column_stack(columns)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    slopes = dict(zip(groups, coef[len(units) + len(groups) - 1:], strict=True))
    for k in groups:  # no spread in length: no slope (lstsq's min-norm answer is 0 too)
        if not np.any(centred[g == k]):
            slopes[k] = 0.0
    adjusted = y - np.array([slopes[k] for k in g]) * centred
    raw = np.array([y[u == m].mean() for m in units])
    controlled = np.array([adjusted[u == m].mean() for m in units])
    raw_rank, controlled_rank = _ranks(raw), _ranks(controlled)
    models = pl.DataFrame({
        "model": units, "n": [int((u == m).sum()) for m in units],
        "mean_length": [float(x[u == m].mean()) for m in units],
        "raw_mean": raw, "controlled_mean": controlled, "shift": controlled - raw,
        "raw_rank": raw_rank, "controlled_rank": controlled_rank},
        schema=MODEL_SCHEMA).sort(["controlled_rank", "model"])
    slope_rows = pl.DataFrame({
        "genre": groups, "n": [int((g == k).sum()) for k in groups],
        "mean_length": [means[k] for k in groups],
        "slope_per_100": [float(slopes[k]) * PER for k in groups]}, schema=SLOPE_SCHEMA)
    return LengthControl(slope_rows, models, left_out)
