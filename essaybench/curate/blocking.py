"""Blocks for dedup's K-means pass: each row joins its nearest clusters, and a block larger
than ``max_block`` rows is split by K-means again, so the pairs compared stay in
proportion to the rows.

The elbow chooses k from a smooth inertia curve, so at the chosen k a block grows with
the input (k = 46 at 16 thousand rows and at 65 thousand): the pairs compared inside
blocks, Σ m², grew 14-fold from 50,000 raw records to 200,000. A large block is split by
K-means on its rows' reduced vectors: each row joins its nearest sub-cluster, and also the
second nearest when that is at most ``BORDER`` times as far (a row on the border between
two sub-clusters is compared in both). Not every row joins two, as at the top level: a
sub-centroid in the middle of the block is every row's second nearest and its block would
be the whole block again. A split stops after ``MAX_DEPTH`` levels. A pair of near
duplicates is close in the reduced space, so it shares a sub-block unless a border falls
between them.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from numpy.typing import NDArray

# scikit-learn is imported where a block is split, not with the module (dedup's reason:
# every benchmark run imports the curate config; tests/flows/test_import_weight.py).

MAX_DEPTH = 3
BORDER = 1.1


def blocks(distances: NDArray[np.float64], per_row: int) -> list[NDArray[np.int64]]:
    """Row indices (ascending) of each cluster, a row joining its ``per_row`` nearest clusters."""
    k = distances.shape[1]
    nearest = np.argsort(distances, axis=1, kind="stable")[:, : min(per_row, k)]
    return [np.flatnonzero((nearest == c).any(axis=1)) for c in range(k)]


def split_large(row_blocks: list[NDArray[np.int64]], reduced: NDArray[np.float64],
                per_row: int, max_block: int, seed: int) -> list[NDArray[np.int64]]:
    """``row_blocks`` with every block of more than ``max_block`` rows replaced by its
    sub-blocks (rows ascending in each, as in the input)."""
    out: list[NDArray[np.int64]] = []
    for members in row_blocks:
        out.extend(_split(members, reduced, per_row, max_block, seed, 0))
    return out


def _split(members: NDArray[np.int64], reduced: NDArray[np.float64], per_row: int,
           max_block: int, seed: int, depth: int) -> list[NDArray[np.int64]]:
    if members.size <= max_block or depth >= MAX_DEPTH:
        return [members]
    from sklearn.cluster import KMeans
    from sklearn.exceptions import ConvergenceWarning

    k = min(members.size, math.ceil(2 * members.size / max_block))  # half max_block a block
    model = KMeans(n_clusters=k, n_init=1, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        distances = model.fit_transform(reduced[members])
    order = np.argsort(distances, axis=1, kind="stable")
    rows = np.arange(members.size)
    first, second = order[:, 0], order[:, 1]
    border = distances[rows, second] <= BORDER * distances[rows, first]
    subs = [np.flatnonzero((first == c) | (border & (second == c))) for c in range(k)]
    return [block for sub in subs if sub.size
            for block in _split(members[sub], reduced, per_row, max_block, seed, depth + 1)]
