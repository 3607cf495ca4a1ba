"""Dedup: drop exact duplicates, then close copies by MinHash LSH, then near duplicates
found within K-means blocks.

1. Exact duplicates: a row whose ``prompt_id`` (the hash of its normalised
   text) appeared in an earlier row is dropped, pointing at that id.
1b. MinHash LSH (:mod:`essaybench.curate.minhash`, on unless ``minhash: false``): a
   first occurrence whose character-shingle Jaccard similarity with an earlier kept row
   reaches ``jaccard_threshold`` is dropped (reason ``minhash_duplicate``). One pass,
   one sketch and one index query per row: it removes the close copies a large log is
   full of before the passes below, whose cost grows faster than the row count.
2. The rows left are vectorised as TF-IDF over character n-grams
   (Chinese needs no word segmentation this way; IDF is fitted on this input),
   reduced with TruncatedSVD, row-normalised, and clustered with K-means for
   each k of a sweep; k is chosen from the inertia curve by
   :func:`~essaybench.curate.elbow.choose_elbow`. SVD and sweep are fitted on a seeded
   sample of ``fit_rows`` (20,000) rows when there are more; every row is then projected
   and joins its nearest centroids of the chosen k (fitting on 65 thousand rows took 75
   of dedup's 190 s at 200,000 raw records, and the elbow of a 20-thousand-row sample
   is as well placed: the curve's shape does not depend on the row count).
3. Each row joins the blocks of its ``assign_clusters`` nearest centroids.
   Rows are visited in input order; a row is dropped when its TF-IDF cosine
   with an already-kept row sharing a block reaches ``near_dup_threshold``.
   ``duplicate_of`` is the most similar such kept row (ties → the earlier).
   With ``assign_clusters=1`` this is exactly "within each cluster". A block of more
   than ``max_block`` rows is split by K-means again (:mod:`essaybench.curate.blocking`),
   so the pairs compared grow with the rows, not with their square.

Why K-means: greedy removal over n prompts compares every row with every
kept row, O(n²) dot products. Blocking bounds that to Σ m_c² over block sizes
m_c. Sparse K-means is slow (~31 s at k=160 on 10k prompts), SVD(128) +
K-means is under a second per k, so the sweep runs on the reduced vectors. A
pair split across clusters is never compared: with plain clusters the
benchmark (benchmarks/dedup_kmeans.py, 1k–10k prompts) recalled 85–96% of the
planted near duplicates against 99% without blocking; joining the 2 nearest
clusters recalls 98.5–99.5% while comparing a third of all pairs at 10k.

Why similarity on the full TF-IDF vectors, not the SVD ones: 128 components
blur distinct prompts that share template wording into high cosines, and the
threshold would mean something different for every ``svd_components``. The
SVD only decides which rows are compared, never whether they are duplicates.

Defaults, measured on the hand-written prompts in tests/curate/test_dedup.py:
with character 1–2-grams, rewordings of one prompt score 0.62–0.83 and
distinct prompts (guard applied) ≤ 0.58, hence ``near_dup_threshold=0.6``.
2–4-grams overlap (rewordings from 0.35, distinct up to 0.48); unigrams
separate the test prompts more widely but on data/raw rank a distinct pair
(0.76) above a listed rewording (0.70). On data/raw the same
threshold drops exactly the 5 README-listed near duplicates above 0.61; the
next pairs (0.5997, 0.5945) are distinct prompts. Looser paraphrases (same
topic, other wording, cosine 0.2–0.59) are out of reach of this measure.
Because IDF comes from the input, cosines shift with the corpus: the
《论诚信》 rewording scores 0.64 among the test prompts but 0.57 alone.

Quoted-topic guard: essay prompts often put their topic in 《》 or “”; two
prompts built on one template with different topics (以“责任”为话题… vs
以“梦想”为话题…) reach 0.72–0.86, above most rewordings. So a pair whose texts
both quote something, but nothing in common, is never a near duplicate. A pair
where only one side quotes is left to the cosine, and unquoted template twins
(帮我写一篇关于奋斗/远方的演讲稿…) are still dropped: nothing in a bag of
n-grams tells a swapped topic from a reworded phrase.

Number guard (both passes): a pair whose texts both state Arabic numbers, but not the
same ones, is never a near duplicate: 不少于600字 and 不少于1000字, or 400字以内 and 1200字以内,
ask for different essays, and on the generated benchmark corpus (benchmarks/curate_corpus)
four in five of the distinct prompts the cosine of 0.6 dropped were such pairs (the same
frame with another length and other requirements). A number on one side only (800字 vs
八百字, or a dropped length clause) is left to the similarity. What the guard does not
catch: two prompts on one unquoted frame with another topic word and the same numbers
(关于自信/关于诚信的演讲稿), or with other requirement lists; their cosine is in the
rewordings' range (0.6–0.8), so the cosine rule still drops them.
"""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import polars as pl
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, model_validator
from scipy import sparse

from essaybench.core.contracts import Decision, StageOutput, ensure_columns, require_kept_input
from essaybench.core.memory import release_free_memory
from essaybench.curate.blocking import blocks, split_large
from essaybench.curate.elbow import ELBOW_RULE, choose_elbow
from essaybench.curate.minhash import MinhashResult, minhash_pass
from essaybench.curate.table import DUPLICATE_COLUMNS, RECORD_COLUMNS

if TYPE_CHECKING:
    from sklearn.cluster import KMeans

# scikit-learn is imported where dedup runs, not with this module: the config classes here
# are read by every command (the curate config holds DedupParams), and scikit-learn with
# what it pulls in (pandas) costs ~60 MiB of every benchmark run that never deduplicates.

_QUOTED = re.compile(r"《([^》]+)》|“([^”]+)”|「([^」]+)」|『([^』]+)』|\"([^\"]+)\"")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
# A similarity block of rows × cluster members is computed at most this many floats at a time.
_BLOCK_FLOATS = 4_000_000
# Pair keys gathered from the blocks before their copies are merged away.
_PAIRS_PENDING = 4_000_000


class DedupParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    analyzer: Literal["char", "char_wb"] = Field(
        default="char", description="TfidfVectorizer analyzer (the two agree on unspaced Chinese)")
    ngram_min: int = Field(default=1, ge=1, description="Shortest character n-gram in the TF-IDF")
    ngram_max: int = Field(default=2, ge=1, description="Longest character n-gram in the TF-IDF")
    svd_components: int = Field(
        default=128, ge=1, description="TruncatedSVD size; capped at n_unique-1 and n_features-1")
    k_min: int = Field(default=2, ge=1, description="Smallest k of the K-means sweep")
    k_max: int = Field(
        default=200, ge=1, description="Largest k of the sweep; capped at n_unique // 2")
    k_points: int = Field(
        default=10, ge=1, description="Number of evenly spaced k values in the sweep")
    near_dup_threshold: float = Field(
        default=0.6, gt=0.0, le=1.0,
        description="TF-IDF cosine at or above which a row is a near duplicate")
    quoted_topic_guard: bool = Field(
        default=True, description="Never pair prompts that both quote topics but share none")
    number_guard: bool = Field(
        default=True,
        description="Never pair prompts that both state numbers (lengths, counts) but not the "
                    "same ones")
    assign_clusters: int = Field(
        default=2, ge=1, description="A row is compared within its this-many nearest clusters")
    max_block: int = Field(
        default=2000, ge=2,
        description="A K-means block of more rows is split by K-means again (curate/blocking)")
    seed: int = Field(default=0, description="random_state for TruncatedSVD, K-means, MinHash")
    minhash: bool = Field(default=True, description="Run the MinHash LSH pass before K-means")
    shingle_k: int = Field(default=3, ge=1, description="Character k-gram length for MinHash")
    minhash_perm: int = Field(default=128, ge=16, description="MinHash permutations")
    lsh_threshold: float = Field(
        default=0.5, gt=0.0, lt=1.0,
        description="Jaccard the LSH index is tuned for; it only proposes candidates")
    jaccard_threshold: float = Field(
        default=0.7, gt=0.0, le=1.0,
        description="Exact shingle Jaccard at or above which a row is a MinHash near duplicate")
    n_init: int = Field(
        default=1, ge=1, description="K-means restarts per k (fixed, for determinism)")
    fit_rows: int = Field(
        default=20_000, ge=2,
        description="SVD and the K-means sweep are fitted on a seeded sample of this many rows "
                    "(all rows of a smaller input); every row is then projected and assigned")

    @model_validator(mode="after")
    def _ordered(self) -> DedupParams:
        if self.ngram_max < self.ngram_min:
            raise ValueError("ngram_max must be >= ngram_min")
        if self.k_max < self.k_min:
            raise ValueError("k_max must be >= k_min")
        if self.lsh_threshold > self.jaccard_threshold:
            raise ValueError("lsh_threshold must be <= jaccard_threshold (it proposes candidates)")
        return self


@dataclass(frozen=True)
class Clustering:
    labels: NDArray[np.int64]
    distances: NDArray[np.float64]  # row × centroid, at the chosen k
    ks: list[int]
    inertias: list[float]
    chosen_k: int
    svd_components: int
    reduced: NDArray[np.float64] | None = None  # the vectors clustered (None: no rows)


def quoted_spans(text: str) -> frozenset[str]:
    """The spans a prompt puts in 《》, “”, 「」, 『』 or ASCII double quotes."""
    return frozenset(next(g for g in m.groups() if g is not None).strip()
                     for m in _QUOTED.finditer(text))


def number_key(text: str) -> str:
    """The Arabic numbers a prompt states, sorted (``""``: none): 800字 and 不少于600字 are
    different requests, 800字 and 八百字 are left to the similarity."""
    return ",".join(sorted(_NUMBER.findall(text)))


def number_ids(texts: list[str]) -> NDArray[np.int64]:
    """Per text, an id of its :func:`number_key` (0: no number), so a conflict is a comparison."""
    ids: dict[str, int] = {"": 0}
    return np.array([ids.setdefault(number_key(t), len(ids)) for t in texts], dtype=np.int64)


def topic_matrix(texts: list[str]) -> sparse.csr_matrix:
    """Row i has a 1 in the column of each span text i quotes, so shared spans are a product."""
    vocab: dict[str, int] = {}
    rows: list[int] = []
    cols: list[int] = []
    for i, text in enumerate(texts):
        for span in sorted(quoted_spans(text)):
            rows.append(i)
            cols.append(vocab.setdefault(span, len(vocab)))
    data = np.ones(len(rows), dtype=np.float64)
    return sparse.csr_matrix((data, (rows, cols)), shape=(len(texts), max(1, len(vocab))))


def sweep_ks(n_unique: int, params: DedupParams) -> list[int]:
    """Evenly spaced k in [k_min, k_max], with k_max capped at n_unique // 2 (at least 1)."""
    k_hi = max(1, min(params.k_max, n_unique // 2))
    k_lo = min(params.k_min, k_hi)
    points = np.linspace(k_lo, k_hi, num=params.k_points)
    return sorted({round(float(p)) for p in points})


def tfidf(texts: list[str], params: DedupParams) -> sparse.csr_matrix:
    """L2-normalised TF-IDF rows, so a dot product is a cosine; zero rows if no n-gram fits."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer(
        analyzer=params.analyzer,
        ngram_range=(params.ngram_min, params.ngram_max),
        dtype=np.float64,
    )
    try:
        matrix = vectorizer.fit_transform(texts)
    except ValueError:  # empty vocabulary: every text is shorter than ngram_min
        matrix = sparse.csr_matrix((len(texts), 0), dtype=np.float64)
    return sparse.csr_matrix(matrix)


def cluster(x: sparse.csr_matrix, params: DedupParams, timings: dict[str, float]) -> Clustering:
    """SVD-reduce, sweep k with K-means, choose k by the elbow rule."""
    from sklearn.cluster import KMeans
    from sklearn.decomposition import TruncatedSVD
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.preprocessing import normalize

    n, n_features = x.shape
    started = time.perf_counter()
    # SVD and the sweep are fitted on a seeded sample of at most fit_rows rows (all of a
    # smaller input); every row is then projected and assigned to the chosen centroids.
    sampled = n > params.fit_rows
    fit = (np.sort(np.random.default_rng(params.seed).choice(n, params.fit_rows, replace=False))
           if sampled else np.arange(n))
    n_comp = min(params.svd_components, fit.size - 1, n_features - 1)
    if n_comp >= 2:
        svd = TruncatedSVD(n_components=n_comp, random_state=params.seed)
        if sampled:  # normalised in place: the transform is a new array
            svd.fit(x[fit])
            reduced = normalize(svd.transform(x), copy=False)
        else:
            reduced = normalize(svd.fit_transform(x), copy=False)
    else:  # too few rows or features to reduce: cluster the TF-IDF rows themselves
        n_comp = 0
        reduced = x.toarray() if n_features else np.zeros((n, 1))
    timings["svd"] = time.perf_counter() - started

    started = time.perf_counter()
    ks = sweep_ks(fit.size, params)
    inertias: list[float] = []
    models: dict[int, KMeans] = {}
    for k in ks:
        models[k] = KMeans(n_clusters=k, n_init=params.n_init, random_state=params.seed)
        with warnings.catch_warnings():
            # Fewer distinct points than k (tiny or degenerate inputs) still gives valid labels.
            warnings.simplefilter("ignore", ConvergenceWarning)
            models[k].fit(reduced[fit] if sampled else reduced)
        inertias.append(float(models[k].inertia_))
    chosen = choose_elbow(ks, inertias)
    timings["sweep"] = time.perf_counter() - started
    best = models[chosen]
    distances = best.transform(reduced)
    labels = np.argmin(distances, axis=1) if sampled else best.labels_
    return Clustering(np.asarray(labels, dtype=np.int64), distances, ks, inertias,
                      chosen, n_comp, np.asarray(reduced, dtype=np.float64))


@dataclass(frozen=True)
class Pairs:
    """Pairs (earlier row, later row) that shared a block and reached the threshold."""

    earlier: NDArray[np.int64]
    later: NDArray[np.int64]
    sim: NDArray[np.float64]
    compared: int  # pairs whose cosine was computed, counted once per shared block
    # pairs at or above the threshold a guard set aside, counted once per shared block too
    # (their distinct count took a sort of tens of millions of keys at 10^6 raw records)
    vetoed: int


def candidate_pairs(
    x: sparse.csr_matrix,
    row_blocks: list[NDArray[np.int64]],
    threshold: float,
    topics: sparse.csr_matrix | None,
    numbers: NDArray[np.int64] | None = None,
) -> Pairs:
    """Every pair inside a block with cosine >= threshold, minus guard conflicts.

    With ``topics`` (from :func:`topic_matrix`), a pair conflicts when both rows quote
    something and share no quoted span; with ``numbers`` (from :func:`number_ids`), when
    both rows state numbers and not the same ones.
    """
    n = x.shape[0]
    quoting = np.asarray(topics.getnnz(axis=1) > 0) if topics is not None else None
    found = _DistinctPairs()
    compared = vetoed = 0
    for members in row_blocks:
        m = members.size
        if m < 2:
            continue
        compared += m * (m - 1) // 2
        for e, c, sims in _block_pairs(x, members, threshold):
            if e.size == 0:
                continue
            conflict = np.zeros(e.size, dtype=bool)
            if topics is not None and quoting is not None:
                shared = np.asarray(topics[e].multiply(topics[c]).sum(axis=1)).ravel() > 0
                conflict |= quoting[e] & quoting[c] & ~shared
            if numbers is not None:
                conflict |= (numbers[e] > 0) & (numbers[c] > 0) & (numbers[e] != numbers[c])
            vetoed += int(conflict.sum())
            found.add(e[~conflict] * n + c[~conflict], sims[~conflict])
    keys, all_sims = found.result()
    return Pairs(keys // max(n, 1), keys % max(n, 1), all_sims, compared, vetoed)


class _DistinctPairs:
    """Pair keys (and their cosines) met in the blocks, each kept once, ascending.

    A pair met in two overlapping blocks has the same cosine in both (computed from the
    same row's terms in the same order), so any copy will do. The copies are merged
    away every ``_PAIRS_PENDING`` keys instead of at the end: at 10^6 raw records the
    blocks meet millions of pairs at or above the threshold, whose copies and one final
    sort added to the stage's memory peak. Sorting, not ``np.unique``'s hash path (5.2
    against 0.08 s on 4M keys here)."""

    def __init__(self) -> None:
        self.keys = np.zeros(0, dtype=np.int64)
        self.sims = np.zeros(0, dtype=np.float64)
        self.pending: list[tuple[NDArray[np.int64], NDArray[np.float64]]] = []
        self.size = 0

    def add(self, keys: NDArray[np.int64], sims: NDArray[np.float64]) -> None:
        if keys.size:
            self.pending.append((keys, sims))
            self.size += keys.size
            if self.size >= _PAIRS_PENDING:
                self._merge()

    def _merge(self) -> None:
        keys = np.concatenate([self.keys, *(k for k, _ in self.pending)])
        sims = np.concatenate([self.sims, *(s for _, s in self.pending)])
        self.pending, self.size = [], 0
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        first = np.ones(keys.size, dtype=bool)
        first[1:] = keys[1:] != keys[:-1]
        self.keys, self.sims = keys[first], sims[order][first]

    def result(self) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        self._merge()
        return self.keys, self.sims


def _block_pairs(x: sparse.csr_matrix, members: NDArray[np.int64], threshold: float
                 ) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]]:
    """(earlier rows, later rows, TF-IDF cosines) of a block's pairs at or above ``threshold``,
    a chunk of the block at a time."""
    m = members.size
    xb = x[members]
    # Only the n-grams the block uses: the dense side is a few thousand columns, not the
    # corpus vocabulary (~10^5 at 10^6 raw records, which made each chunk a few dozen
    # rows wide and most of the pass zero-filling dense chunks). The map is monotone, so
    # each row keeps its order of terms and every dot product sums in the same order.
    used = np.unique(xb.indices)
    xb = sparse.csr_matrix((xb.data, np.searchsorted(used, xb.indices), xb.indptr),
                           shape=(m, used.size))
    # Sparse × dense is several times faster than sparse × sparse when, as here,
    # nearly every pair shares some n-gram; the dense side is bounded in size.
    step = max(1, _BLOCK_FLOATS // max(m, used.size))
    for start in range(0, m, step):
        stop = min(m, start + step)
        sims = np.asarray(xb[:stop] @ xb[start:stop].toarray().T)  # earlier × chunk
        # Each pair once, with the earlier row (smaller index) first.
        e, c = np.nonzero((sims >= threshold)
                          & (np.arange(stop)[:, None] < np.arange(start, stop)[None, :]))
        yield members[e], members[start + c], sims[e, c]


def greedy_keep(n: int, pairs: Pairs) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Visit rows in order; drop a row if a kept earlier row is paired with it.

    Returns, per row, the kept row it duplicates (-1 if kept) and their cosine.
    The most similar kept row is chosen; equal cosines go to the earlier row.
    """
    dup_of = np.full(n, -1, dtype=np.int64)
    sim = np.zeros(n, dtype=np.float64)
    decided = np.zeros(n, dtype=bool)
    order = np.lexsort((pairs.earlier, -pairs.sim, pairs.later))
    for e, lt, s in zip(pairs.earlier[order].tolist(), pairs.later[order].tolist(),
                        pairs.sim[order].tolist(), strict=True):
        # Rows are settled in increasing order, so an earlier row's fate is already final.
        if not decided[lt] and dup_of[e] < 0:
            dup_of[lt], sim[lt], decided[lt] = e, s, True
    return dup_of, sim


def _cluster_summary(labels: NDArray[np.int64]) -> dict[str, Any]:
    if labels.size == 0:
        return {"count": 0, "min": 0, "median": 0.0, "max": 0, "singletons": 0}
    sizes = np.bincount(labels)
    sizes = sizes[sizes > 0]
    return {"count": int(sizes.size), "min": int(sizes.min()), "median": float(np.median(sizes)),
            "max": int(sizes.max()), "singletons": int((sizes == 1).sum())}


def _minhash(texts: list[str], rows: list[int], params: DedupParams) -> MinhashResult | None:
    if not params.minhash:
        return None
    return minhash_pass(
        [texts[i] for i in rows], k=params.shingle_k, num_perm=params.minhash_perm,
        lsh_threshold=params.lsh_threshold, jaccard_threshold=params.jaccard_threshold,
        seed=params.seed,
        spans=[quoted_spans(texts[i]) for i in rows] if params.quoted_topic_guard else None,
        numbers=[number_key(texts[i]) for i in rows] if params.number_guard else None)


def run_dedup(table: pl.DataFrame, params: DedupParams) -> StageOutput:
    """Every input row, in order, with exact and near duplicates marked ``duplicate``."""
    require_kept_input(table, "dedup", "filter")
    started = time.perf_counter()
    timings: dict[str, float] = {}
    ids: list[str] = table["prompt_id"].to_list()
    texts: list[str] = table["text"].to_list()
    n = len(ids)

    decision = [Decision.KEPT.value] * n
    reason: list[str | None] = [None] * n
    detail: list[str | None] = [None] * n
    duplicate_of: list[str | None] = [None] * n
    similarity: list[float | None] = [None] * n

    first_row: dict[str, int] = {}
    unique_rows: list[int] = []
    for i, pid in enumerate(ids):
        if pid in first_row:
            decision[i], reason[i] = Decision.DUPLICATE.value, "exact_duplicate"
            duplicate_of[i], similarity[i] = pid, 1.0
            detail[i] = f"same prompt_id as row {first_row[pid]}"
        else:
            first_row[pid] = i
            unique_rows.append(i)

    t0 = time.perf_counter()
    by_minhash = _minhash(texts, unique_rows, params)
    remaining = unique_rows
    if by_minhash is not None:
        remaining = [i for i, j in zip(unique_rows, by_minhash.dup_of.tolist(), strict=True)
                     if j < 0]
        for u in np.flatnonzero(by_minhash.dup_of >= 0).tolist():
            i, kept_row = unique_rows[u], unique_rows[int(by_minhash.dup_of[u])]
            sim = float(by_minhash.jaccard[u])
            decision[i], reason[i] = Decision.DUPLICATE.value, "minhash_duplicate"
            duplicate_of[i], similarity[i] = ids[kept_row], sim
            detail[i] = (f"character {params.shingle_k}-gram Jaccard {sim:.3f} >= "
                         f"{params.jaccard_threshold} with row {kept_row} (MinHash LSH candidate)")
    timings["minhash"] = time.perf_counter() - t0
    # Each pass's garbage goes back to the system before the next: at 10^6 raw records the
    # MinHash buckets, the vectoriser's lists and the K-means copies each left hundreds of
    # MB of free heap that raised the stage's peak.
    release_free_memory()
    unique_rows = remaining  # the K-means pass compares what MinHash kept

    t0 = time.perf_counter()
    x = tfidf([texts[i] for i in unique_rows], params)
    timings["vectorise"] = time.perf_counter() - t0
    release_free_memory()
    if unique_rows:
        clustering = cluster(x, params, timings)
    else:
        clustering = Clustering(np.zeros(0, dtype=np.int64), np.zeros((0, 1)), [], [], 0, 0)

    t0 = time.perf_counter()
    row_blocks = blocks(clustering.distances, params.assign_clusters)
    # The centroid distances and then the reduced vectors have done their work once the
    # blocks are made: not held through the passes after (~0.5 GB at 10^6 raw records,
    # where the stage's memory peaks).
    reduced = clustering.reduced
    clustering = replace(clustering, distances=np.zeros((0, 1)), reduced=None)
    if reduced is not None:
        row_blocks = split_large(row_blocks, reduced, params.assign_clusters,
                                 params.max_block, params.seed)
    del reduced
    release_free_memory()
    topics = topic_matrix([texts[i] for i in unique_rows]) if params.quoted_topic_guard else None
    numbers = number_ids([texts[i] for i in unique_rows]) if params.number_guard else None
    pairs = candidate_pairs(x, row_blocks, params.near_dup_threshold, topics, numbers)
    dup_of, sims = greedy_keep(len(unique_rows), pairs)
    for u, j in enumerate(dup_of):
        if j < 0:
            continue
        i, kept_row = unique_rows[u], unique_rows[int(j)]
        decision[i], reason[i] = Decision.DUPLICATE.value, "near_duplicate"
        duplicate_of[i], similarity[i] = ids[kept_row], float(sims[u])
        detail[i] = (f"TF-IDF cosine {sims[u]:.3f} >= {params.near_dup_threshold} with row "
                     f"{kept_row}, K-means cluster {int(clustering.labels[u])}")
    timings["near_dup"] = time.perf_counter() - t0

    out = ensure_columns(table, {c: RECORD_COLUMNS[c] for c in ("decision", "reason", "detail")})
    out = ensure_columns(out, DUPLICATE_COLUMNS)
    dropped = pl.Series([d != Decision.KEPT.value for d in decision], dtype=pl.Boolean)
    out = out.with_columns(
        pl.Series("decision", decision, dtype=pl.Utf8),
        pl.when(dropped).then(pl.Series(reason, dtype=pl.Utf8)).otherwise(pl.col("reason"))
        .alias("reason"),
        pl.when(dropped).then(pl.Series(detail, dtype=pl.Utf8)).otherwise(pl.col("detail"))
        .alias("detail"),
        pl.Series("duplicate_of", duplicate_of, dtype=pl.Utf8),
        pl.Series("similarity", similarity, dtype=pl.Float64),
    )
    timings["total"] = time.perf_counter() - started
    meta: dict[str, Any] = {
        "params": params.model_dump(),
        "n_input": n,
        "n_unique": len(first_row),
        "n_after_minhash": len(unique_rows),
        "minhash_duplicates": reason.count("minhash_duplicate"),
        "minhash_candidates": by_minhash.candidates if by_minhash else 0,
        "minhash_vetoed_by_topic_guard": by_minhash.vetoed if by_minhash else 0,
        "n_features": int(x.shape[1]),
        "svd_components_used": clustering.svd_components,
        "ks": clustering.ks,
        "inertias": clustering.inertias,
        "chosen_k": clustering.chosen_k,
        "elbow_rule": ELBOW_RULE,
        "cluster_sizes": _cluster_summary(clustering.labels),
        "blocks": len(row_blocks),
        "largest_block": max((b.size for b in row_blocks), default=0),
        "pairs_compared": pairs.compared,
        "pairs_above_threshold": int(pairs.sim.size) + pairs.vetoed,
        "pairs_vetoed_by_topic_guard": pairs.vetoed,
        "exact_duplicates": reason.count("exact_duplicate"),
        "near_duplicates": reason.count("near_duplicate"),
        "seconds": {k: round(v, 4) for k, v in timings.items()},
    }
    return StageOutput(table=out, meta=meta)
