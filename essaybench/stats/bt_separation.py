"""Separation in Bradley–Terry data: which models the maximum likelihood can rate.

The maximum-likelihood ratings are finite only when the "beat or tied" digraph (an edge
i → j when i beat or tied j at least once) is strongly connected (Zermelo 1929; Hunter
2004, condition A; a tie is half a win for each side). Otherwise some group of models
never loses to (or never beats) the rest and their rating difference is infinite.

Rule choosing the rated group (the reference component): the strongly connected
component of the anchor model when one is named; otherwise the largest component; on
equal sizes, the component holding the model that comes first in the models' order
(models are sorted by name, so: the alphabetically first). Every other model is reported
without a rating, with a note saying whether it is unbounded above, below, or not linked.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.sparse import csr_array
from scipy.sparse.csgraph import breadth_first_order, connected_components

from essaybench.stats.outcomes import EncodedOutcomes

NOTE_ABOVE = "not estimable: never loses to the rated models (separation), unbounded above"
NOTE_BELOW = "not estimable: never beats the rated models (separation), unbounded below"
NOTE_APART = "not estimable: no comparison links it to the rated models"
NOTE_NONE = "not estimable: no two models the data can rate against each other"


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


def subset(enc: EncodedOutcomes, keep: NDArray[np.bool_]) -> EncodedOutcomes:
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
