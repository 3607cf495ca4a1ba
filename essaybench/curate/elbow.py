"""Choosing k from a K-means inertia curve: the point farthest below the chord.

Measured on 10k prompts, the inertia curve falls smoothly with no sharp bend,
so "the elbow" has to be a defined rule rather than a judgement by eye. The
rule here is Kneedle-like:

1. normalise k and inertia to [0, 1] (min-max on each axis; a flat inertia
   curve normalises to all zeros);
2. draw the chord from the first point of the curve to the last;
3. pick the k whose point lies farthest *below* the chord (signed
   perpendicular distance, positive on the side of smaller inertia).

Only points below the chord count: a decreasing convex curve bends below its
chord, while a point above it is noise (a K-means run that found a worse
local optimum), not an elbow. The endpoints lie on the chord, so the largest
distance is never negative.

Ties (distances within ``TIE_TOLERANCE`` of the largest) go to the smallest
k. That one rule also covers the degenerate curves: a straight line, a curve
that never dips below its chord, a flat curve and a 2-point curve all have a
largest distance of 0, shared by the first point, so they return the first k.
For near-duplicate blocking the smallest k is the cautious choice: fewer,
larger clusters mean more pairs compared, never fewer.

Because perpendicular distance to a fixed line is proportional to vertical
distance, and min-max scaling is affine per axis, the chosen k does not change
if inertias are scaled or shifted; the normalisation only makes the reported
distances comparable between curves.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Sequence

ELBOW_RULE = "max_distance_below_chord"
TIE_TOLERANCE = 1e-9


def _validate(ks: Sequence[int], inertias: Sequence[float]) -> None:
    if len(ks) == 0:
        raise ValueError("elbow: the curve is empty; need at least one (k, inertia) point")
    if len(ks) != len(inertias):
        raise ValueError(f"elbow: {len(ks)} k values but {len(inertias)} inertias")
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
            raise ValueError(f"elbow: every k must be an integer >= 1, got {k!r}")
    for a, b in itertools.pairwise(ks):
        if b <= a:
            raise ValueError(f"elbow: ks must be strictly increasing, got {a} then {b}")
    for v in inertias:
        if not math.isfinite(v) or v < 0:
            raise ValueError(f"elbow: every inertia must be finite and >= 0, got {v!r}")


def chord_distances(ks: Sequence[int], inertias: Sequence[float]) -> list[float]:
    """Signed distance of each normalised point below the first-to-last chord.

    Positive means below the chord (smaller inertia than the chord at that k);
    the first and last points are 0 by construction.
    """
    _validate(ks, inertias)
    if len(ks) == 1:
        return [0.0]
    k0, k_span = ks[0], ks[-1] - ks[0]
    lo, hi = min(inertias), max(inertias)
    y_span = hi - lo
    xs = [(k - k0) / k_span for k in ks]
    ys = [(v - lo) / y_span if y_span > 0 else 0.0 for v in inertias]
    slope = ys[-1] - ys[0]  # chord runs from (0, ys[0]) to (1, ys[-1])
    norm = math.hypot(1.0, slope)
    return [(ys[0] + slope * x - y) / norm for x, y in zip(xs, ys, strict=True)]


def choose_elbow(ks: Sequence[int], inertias: Sequence[float]) -> int:
    """The k farthest below the chord of the normalised curve; ties → smallest k.

    Raises ValueError for an empty curve, mismatched lengths, k that are not
    strictly increasing integers >= 1, or inertias that are negative or not
    finite. A single point returns its k.
    """
    distances = chord_distances(ks, inertias)
    best = max(distances)
    for k, d in zip(ks, distances, strict=True):
        if d >= best - TIE_TOLERANCE:
            return int(k)
    raise AssertionError("unreachable: the maximum is always within tolerance of itself")
