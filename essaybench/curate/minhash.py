"""MinHash LSH: dedup's first, streaming near-duplicate pass (before the K-means blocks).

Each prompt is the set of its character k-grams ("shingles"; Chinese needs no word
segmentation this way). Rows are visited in input order, one at a time:

1. its MinHash (datasketch, ``num_perm`` permutations, CRC-32 of each shingle's UTF-8
   bytes: deterministic across processes) queries a MinHash LSH index (datasketch) that
   holds only the rows kept so far; the index proposes candidates and never decides;
2. the row is a near duplicate of the candidate with the highest *exact* Jaccard
   similarity of the two shingle sets, if that reaches ``jaccard_threshold`` (ties: the
   earlier row), unless the quoted-topic guard sets the pair aside;
3. otherwise it is kept and inserted into the index.

So the pass costs one sketch, one index query and a few exact set comparisons per row,
whatever the corpus size; its memory is the index of the kept rows. The index is built
for ``lsh_threshold``, below the decision threshold, so that a pair at the decision
threshold is proposed with near certainty: with 128 permutations datasketch chooses 25
bands of 5 rows for 0.5, and a pair of Jaccard 0.7 collides in some band with
probability 1 − (1 − 0.7⁵)²⁵ = 0.990 (0.8: 0.99998). A missed pair is not lost: the
K-means pass that follows compares what this pass kept.

What it catches and what it leaves: close copies — a polite prefix, a synonym, a
dropped clause in a long prompt — have 3-shingle Jaccard 0.7 and more; rewordings of a
short prompt (the dedup calibration set: 0.28–0.50) and prompts that share only
boilerplate (two exam prompts with different material: up to 0.42) stay below it, so
the first are left to the TF-IDF cosine of the K-means pass and the second kept.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from datasketch import MinHash, MinHashLSH
from numpy.typing import NDArray


def shingles(text: str, k: int) -> frozenset[str]:
    """The character k-grams of ``text``; a text shorter than k is its own one shingle."""
    if len(text) <= k:
        return frozenset((text,))
    return frozenset(text[i:i + k] for i in range(len(text) - k + 1))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 1.0


def _crc32(data: bytes) -> int:
    return zlib.crc32(data)


@dataclass(frozen=True)
class MinhashResult:
    """Per row: the kept row it duplicates (-1: kept) and their exact Jaccard similarity."""

    dup_of: NDArray[np.int64]
    jaccard: NDArray[np.float64]
    candidates: int  # pairs the index proposed (each compared exactly)
    vetoed: int  # proposed pairs at or above the threshold that the topic guard set aside


def minhash_pass(
    texts: Sequence[str],
    *,
    k: int,
    num_perm: int,
    lsh_threshold: float,
    jaccard_threshold: float,
    seed: int,
    spans: Sequence[frozenset[str]] | None = None,
) -> MinhashResult:
    """Greedy near-duplicate removal in row order (see the module docstring). With
    ``spans`` (each row's quoted spans), a pair whose rows both quote something and share
    no quoted span is never a duplicate."""
    n = len(texts)
    dup_of = np.full(n, -1, dtype=np.int64)
    sims = np.zeros(n, dtype=np.float64)
    lsh = MinHashLSH(threshold=lsh_threshold, num_perm=num_perm)
    template = MinHash(num_perm=num_perm, seed=seed, hashfunc=_crc32)
    kept_shingles: dict[int, frozenset[str]] = {}
    n_candidates = n_vetoed = 0
    for i, text in enumerate(texts):
        own = shingles(text, k)
        sketch = template.copy()
        sketch.update_batch([s.encode("utf-8") for s in own])
        best, best_sim = -1, 0.0
        for j in sorted(lsh.query(sketch)):
            n_candidates += 1
            sim = jaccard(own, kept_shingles[j])
            if sim < jaccard_threshold:
                continue
            if spans is not None and spans[i] and spans[j] and not spans[i] & spans[j]:
                n_vetoed += 1
            elif sim > best_sim:  # ascending j: an equal similarity stays with the earlier row
                best, best_sim = j, sim
        if best >= 0:
            dup_of[i], sims[i] = best, best_sim
        else:
            lsh.insert(i, sketch, check_duplication=False)
            kept_shingles[i] = own
    return MinhashResult(dup_of, sims, n_candidates, n_vetoed)
