"""MinHash LSH: dedup's first, streaming near-duplicate pass (before the K-means blocks).

Each prompt is the set of its character k-grams ("shingles"; Chinese needs no word
segmentation this way). Rows are visited in input order, one at a time:

1. its MinHash (``num_perm`` permutations, CRC-32 of each shingle's UTF-8 bytes:
   deterministic across processes) queries a MinHash LSH index that holds only the rows
   kept so far (datasketch's banding for ``lsh_threshold``, its buckets kept in plain
   dicts); the index proposes candidates and never decides;
2. the row is a near duplicate of the candidate with the highest *exact* Jaccard
   similarity of the two shingle sets, if that reaches ``jaccard_threshold`` (ties: the
   earlier row), unless a guard (quoted topics, numbers) sets the pair aside — checked
   before the exact comparison, which most such pairs would otherwise get;
3. otherwise it is kept and inserted into the index.

Candidates whose MinHash estimate (the share of equal signature values) lies more than
``ESTIMATE_MARGIN`` (0.12) below the decision threshold are not compared: with 128
permutations the estimate of a pair at Jaccard 0.7 has a standard deviation of 0.04, so
it falls that low with probability about 0.15% (0.75: 10⁻⁵), and such a pair is still
compared by the K-means pass that follows. On a corpus of exam prompts most candidates
are pairs that share boilerplate at Jaccard 0.4–0.6, whose exact comparison was most of
the pass's time (a margin of 0.2 compared about half of the pairs at 0.5). Nor are
candidates whose shingle counts alone rule the threshold out (Jaccard is at most the
smaller count over the larger: an exact bound).

So the pass costs one sketch, one index query and a few exact set comparisons per row,
whatever the corpus size; its memory is the index of the kept rows (and a bounded cache
of their shingle sets: a candidate's set is rebuilt from its text when it is not there).
The sketches are datasketch's own (scheme ``affine32``: the MurmurHash3 finalizer, then
``a·h + b`` mod 2³² per permutation, the minimum over the shingles), computed for a
batch of rows at once with numpy rather than one ``MinHash.update_batch`` per row; a
test holds them equal to datasketch's. The index is built
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
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from datasketch import MinHash, MinHashLSH
from numpy.typing import NDArray

SCHEME = "affine32"
SKETCH_BATCH = 64  # rows sketched together (small: the permuted hashes stay in cache)
SHINGLE_CACHE = 20_000  # kept rows whose shingle sets stay in memory
# A candidate whose MinHash estimate is this far below the threshold is not compared.
ESTIMATE_MARGIN = 0.12
_FMIX32 = (np.uint32(0x85EBCA6B), np.uint32(0xC2B2AE35))


def shingles(text: str, k: int) -> frozenset[str]:
    """The character k-grams of ``text``; a text shorter than k is its own one shingle."""
    if len(text) <= k:
        return frozenset((text,))
    return frozenset(text[i:i + k] for i in range(len(text) - k + 1))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    shared = len(a & b)
    union = len(a) + len(b) - shared  # the size of a | b, without building it
    return shared / union if union else 1.0


def crc32(data: bytes) -> int:
    """The shingle hash (``hashfunc`` of an equivalent datasketch MinHash)."""
    return zlib.crc32(data)


def _fmix32(h: NDArray[np.uint32]) -> NDArray[np.uint32]:
    """The MurmurHash3 32-bit finalizer (multiplications wrap modulo 2³²)."""
    h = h ^ (h >> np.uint32(16))
    h = h * _FMIX32[0]
    h = h ^ (h >> np.uint32(13))
    h = h * _FMIX32[1]
    return h ^ (h >> np.uint32(16))


def signatures(sets: Sequence[frozenset[str]], num_perm: int, seed: int
               ) -> NDArray[np.uint32]:
    """One MinHash signature per shingle set (rows), equal to datasketch's
    ``MinHash(num_perm, seed, hashfunc=crc32)`` updated with the set's UTF-8 shingles."""
    a, b = MinHash(num_perm=num_perm, seed=seed, scheme=SCHEME).permutations
    sizes = np.array([len(s) for s in sets], dtype=np.int64)
    hv = np.fromiter((zlib.crc32(x.encode("utf-8")) for s in sets for x in s),
                     dtype=np.uint32, count=int(sizes.sum()))
    with np.errstate(over="ignore"):
        permuted = a[:, None] * _fmix32(hv)[None, :] + b[:, None]  # permutation × shingle
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    return np.asarray(np.minimum.reduceat(permuted, starts, axis=1).T, dtype=np.uint32)


@dataclass(frozen=True)
class MinhashResult:
    """Per row: the kept row it duplicates (-1: kept) and their exact Jaccard similarity."""

    dup_of: NDArray[np.int64]
    jaccard: NDArray[np.float64]
    candidates: int  # pairs the index proposed (compared exactly unless far below, by estimate)
    vetoed: int  # proposed pairs close by estimate that a guard set aside (not compared)


def minhash_pass(
    texts: Sequence[str],
    *,
    k: int,
    num_perm: int,
    lsh_threshold: float,
    jaccard_threshold: float,
    seed: int,
    spans: Sequence[frozenset[str]] | None = None,
    numbers: Sequence[str] | None = None,
) -> MinhashResult:
    """Greedy near-duplicate removal in row order (see the module docstring). With
    ``spans`` (each row's quoted spans), a pair whose rows both quote something and share
    no quoted span is never a duplicate; with ``numbers`` (each row's
    ``dedup.number_key``), neither is a pair whose rows both state numbers, not the same."""
    n = len(texts)
    dup_of = np.full(n, -1, dtype=np.int64)
    sims = np.zeros(n, dtype=np.float64)
    # datasketch's banding for this threshold (b bands of r values: two sketches collide
    # when a band's values are equal), kept in plain dicts: datasketch's query and insert
    # (byte swaps, storage layers, a set per bucket) were half of the pass at 200,000 raw
    # records; the candidates are the same. A bucket of one row holds the row itself, not
    # a list (most buckets: 25 bands × the rows kept, ~70 bytes each saved).
    ranges = MinHashLSH(threshold=lsh_threshold, num_perm=num_perm).hashranges
    tables: list[dict[bytes, int | list[int]]] = [{} for _ in ranges]
    cache: OrderedDict[int, frozenset[str]] = OrderedDict()

    def kept_set(j: int) -> frozenset[str]:
        found = cache.get(j)
        if found is not None:
            cache.move_to_end(j)  # least recently used goes first
        else:
            found = cache[j] = shingles(texts[j], k)
            if len(cache) > SHINGLE_CACHE:
                cache.popitem(last=False)
        return found

    n_candidates = n_vetoed = 0
    number_ids: NDArray[np.int64] | None = None
    if numbers is not None:
        ids: dict[str, int] = {"": 0}
        number_ids = np.array([ids.setdefault(key, len(ids)) for key in numbers], dtype=np.int64)
    sketches = np.zeros((n, num_perm), dtype=np.uint32)
    sizes = np.zeros(n, dtype=np.float64)
    floor = (jaccard_threshold - ESTIMATE_MARGIN) * num_perm
    size_floor = jaccard_threshold * (1 - 1e-9)  # loosened: rounding only lets pairs through
    for start in range(0, n, SKETCH_BATCH):
        own_sets = [shingles(t, k) for t in texts[start:start + SKETCH_BATCH]]
        sketches[start:start + len(own_sets)] = signatures(own_sets, num_perm, seed)
        sizes[start:start + len(own_sets)] = [len(x) for x in own_sets]
        batch = sketches[start:start + len(own_sets)]
        keys = [np.ascontiguousarray(batch[:, lo:hi]).view(f"V{4 * (hi - lo)}").ravel().tolist()
                for lo, hi in ranges]
        for offset, own in enumerate(own_sets):
            i = start + offset
            proposed: set[int] = set()
            for table, band_keys in zip(tables, keys, strict=True):
                bucket = table.get(band_keys[offset])
                if bucket is None:
                    continue
                if isinstance(bucket, int):
                    proposed.add(bucket)
                else:
                    proposed.update(bucket)
            found = np.array(sorted(proposed), dtype=np.int64)
            n_candidates += found.size
            # the shingle counts, then the MinHash estimate, set aside candidates that
            # cannot reach (or are far below) the threshold
            found = found[np.minimum(sizes[found], sizes[i])
                          >= size_floor * np.maximum(sizes[found], sizes[i])]
            close = found[(sketches[found] == sketches[i]).sum(axis=1) >= floor]
            if number_ids is not None and number_ids[i] and close.size:
                clash = (number_ids[close] > 0) & (number_ids[close] != number_ids[i])
                n_vetoed += int(clash.sum())
                close = close[~clash]
            best, best_sim = -1, 0.0
            for j in close.tolist():
                if spans is not None and spans[i] and spans[j] and not spans[i] & spans[j]:
                    n_vetoed += 1  # the guard first: a vetoed pair needs no exact Jaccard
                    continue
                sim = jaccard(own, kept_set(j))
                if sim >= jaccard_threshold and sim > best_sim:
                    best, best_sim = j, sim  # ascending j: an equal one stays with the earlier
            if best >= 0:
                dup_of[i], sims[i] = best, best_sim
            else:
                for table, band_keys in zip(tables, keys, strict=True):
                    key = band_keys[offset]
                    bucket = table.get(key)
                    if bucket is None:
                        table[key] = i
                    elif isinstance(bucket, int):
                        table[key] = [bucket, i]
                    else:
                        bucket.append(i)
                cache[i] = own
                if len(cache) > SHINGLE_CACHE:
                    cache.popitem(last=False)
    return MinhashResult(dup_of, sims, n_candidates, n_vetoed)
