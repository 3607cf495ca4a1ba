"""The rouge stage: greedy ROUGE-L pruning of near-duplicate prompts.

In input row order, a prompt is kept only if its ROUGE-L F with every prompt
kept before it is below ``threshold``; otherwise it is dropped pointing at the
kept prompt with the highest F (ties: the earliest). Scores equal
rouge-chinese's ``Rouge().get_scores(hyp, ref)[0]["rouge-l"]["f"]`` on the
strings :func:`~essaybench.curate.segment.rouge_string` builds, bit for bit:

* F depends only on the LCS length ``L`` of the two token sequences and their
  lengths; :func:`rouge_l_f` evaluates rouge-chinese's expression with the same
  floating-point operations in the same order. It is symmetric in hyp/ref
  (``+`` and ``*`` commute exactly in IEEE arithmetic), so the order of a pair
  does not matter.
* ``L`` is computed exactly by rapidfuzz's bit-parallel LCS on strings with one
  code point per distinct token (:func:`encode_tokens`), so the whole LCS is
  an integer computation with no rounding.

Pre-filters. Each is exact: it never discards a pair whose computed F >= t.

1. Length window. ``L <= min(n, m)``, so a collision needs
   2·min(n, m) > t·(n+m) (see 3): a prompt of n tokens is only compared with
   kept prompts whose length lies in :func:`length_window` (about 0.54n..1.86n
   at t = 0.7).
2. Multiset bound. The tokens of a common subsequence form a sub-multiset of
   both prompts, so ``L <= I``, the size of the intersection of the two token
   multisets; a pair goes on only if 2·I > t·(n+m) (see 3). ``I`` is bounded for a
   block of prompts against all kept ones by one dense matrix product over the
   frequent (token, occurrence) features plus, per pair, the smaller of the two
   prompts' counts of rare features; only the pairs that bound lets through (a few in
   10^3) get the rare part exactly (:meth:`_Occurrences.passing`); on realistic
   prompts the exact ``I`` lets through a few pairs in 10^4. This part is still
   quadratic: every prompt is bounded against every kept prompt in its length window.
3. Score bound. For ``L > 0``, F = 2·L/(n+m) · (p+r)/(p+r+1e-8) with p + r <= 2,
   so F is below 2·L/(n+m) by a relative margin of at least 5e-9, far more than
   the 4 roundings (each <= 2**-53 relative) made computing it. So computed
   F >= t implies 2·L/(n+m) > t, tested in integers against the exact rational
   value of the float ``t`` (:func:`may_collide`); for t = 0.7 that is the
   issue's 20·L > 7·(n+m) up to float(0.7) being 4e-17 below 7/10. ``L = 0``
   gives F = 0.0 < t since t > 0. Filters 1 and 2 apply the same inequality
   with ``L`` replaced by an upper bound, 2 in floats loosened by 1e-9 so that
   rounding can only let pairs through.

Only the pairs that survive, against prompts still kept, get an LCS
(rapidfuzz) and an exact F (:func:`rouge_l_f`).
"""

from __future__ import annotations

import importlib.metadata
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import chain
from typing import Any

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict, Field
from rapidfuzz.distance import LCSseq
from scipy import sparse

from essaybench.core.contracts import Decision, StageOutput, ensure_columns, require_kept_input
from essaybench.curate.segment import Segmenter
from essaybench.curate.table import DUPLICATE_COLUMNS

REASON = "rouge_l"
# Code points 0..0x10FFFF minus the 2,048 surrogates: the most distinct tokens
# one run can encode.
MAX_DISTINCT_TOKENS = 0x110000 - 0x800
# Loosens the float pre-filter so that float rounding can only let extra pairs
# through to the exact integer test, never hold a true candidate back.
_FLOAT_SLACK = 1e-9
# The multiset bound compares a band of rows with at most this many others at a time.
_BOUND_COLUMNS = 16_384
# The fused first step's float32 sums of ~10^2 terms of size <= 10^3 err by < 10^-3.
FUSED_MARGIN = 0.05


class RougeParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    threshold: float = Field(
        default=0.7,
        gt=0.0,
        le=1.0,
        description="Drop a prompt whose ROUGE-L F with an earlier kept prompt is >= this.",
    )


@dataclass(frozen=True)
class Match:
    """The kept prompt (row index) a dropped prompt collided with."""

    row: int
    f: float
    lcs: int


@dataclass(frozen=True)
class PruneResult:
    matches: list[Match | None]  # per row: None = kept
    n_bound: int  # pairs given the multiset bound (inside the length window)
    n_lcs: int  # pairs whose LCS was computed (bound passed, earlier row kept)
    n_exact_f: int  # pairs that passed both pre-filters and were scored exactly
    n_distinct_tokens: int


def rouge_l_f(lcs: int, n_hyp: int, n_ref: int) -> float:
    """rouge-chinese's ROUGE-L F, with its operations in its order."""
    r_lcs = lcs / n_ref
    p_lcs = lcs / n_hyp
    return 2.0 * ((p_lcs * r_lcs) / (p_lcs + r_lcs + 1e-8))


def rouge_l_pair(hyp: Sequence[str], ref: Sequence[str]) -> float:
    """F of one pair of token sequences (e.g. from ``rouge_tokens``), the fast way."""
    a, b = encode_tokens([hyp, ref])
    return rouge_l_f(int(LCSseq.similarity(a, b)), len(hyp), len(ref))


def may_collide(lcs: int, n: int, m: int, threshold: float | Fraction) -> bool:
    """Exact test 2·lcs/(n+m) > threshold; False guarantees F < threshold."""
    t = Fraction(threshold)
    return 2 * lcs * t.denominator > t.numerator * (n + m)


def length_window(n: int, threshold: float | Fraction) -> tuple[int, int]:
    """Inclusive range of lengths m for which 2·min(n, m) > threshold·(n+m).

    Empty (lo > hi) when no length can collide, e.g. threshold = 1.
    """
    t = Fraction(threshold)
    num, den = t.numerator, t.denominator
    # m <= n: m·(2den - num) > num·n;  m >= n: num·m < n·(2den - num)
    lo = num * n // (2 * den - num) + 1
    hi = (n * (2 * den - num) - 1) // num
    return lo, hi


def encode_tokens(token_lists: Sequence[Sequence[str]]) -> list[str]:
    """One string per token list, one code point per distinct token.

    Only equality matters to LCS, so any injective map works. The most frequent
    tokens get the smallest code points because rapidfuzz looks up code points
    below 256 in a flat table and the rest in a hash map (bulk LCS measured 2-3x
    faster).
    Surrogates are skipped; at most MAX_DISTINCT_TOKENS distinct tokens.
    """
    counts = Counter(chain.from_iterable(token_lists))
    if len(counts) > MAX_DISTINCT_TOKENS:
        raise ValueError(
            f"rouge: {len(counts)} distinct tokens exceed the {MAX_DISTINCT_TOKENS} "
            "that one run can map to code points"
        )
    ranked = sorted(counts, key=lambda w: (-counts[w], w))
    code = {w: chr(k if k < 0xD800 else k + 0x800) for k, w in enumerate(ranked)}
    return ["".join([code[w] for w in tokens]) for tokens in token_lists]


class _Occurrences:
    """0/1 rows over (token, k-th occurrence) features, one row per prompt.

    The dot product of two rows is the size of the intersection of the two
    token multisets, an upper bound on their LCS (an LCS's tokens form a
    sub-multiset of both). Features in more than DENSE_SHARE of the prompts
    (punctuation, 的, 写, 一篇...) go to a dense float32 matrix multiplied with
    BLAS; the rest to a sparse matrix whose product is cheap because its
    columns are rare. Counts stay far below 2**24, so float32 sums are exact.
    """

    DENSE_SHARE = 0.05

    def __init__(self, strings: list[str]) -> None:
        lengths = np.array([len(s) for s in strings], dtype=np.int64)
        codes = np.frombuffer("".join(strings).encode("utf-32-le"), dtype=np.uint32)
        codes = codes.astype(np.int64)
        rows = np.repeat(np.arange(len(strings), dtype=np.int64), lengths)
        # k = how many times this token already occurred earlier in its row
        order = np.lexsort((np.arange(codes.size), codes, rows))
        same = (rows[order][1:] == rows[order][:-1]) & (codes[order][1:] == codes[order][:-1])
        run_start = np.flatnonzero(np.concatenate(([True], ~same)))
        run_len = np.diff(np.append(run_start, codes.size))
        k = np.arange(codes.size) - np.repeat(run_start, run_len)
        _, feature = np.unique(codes[order] * (int(lengths.max(initial=0)) + 1) + k,
                               return_inverse=True)
        rows = rows[order]
        df = np.bincount(feature)
        dense = df > self.DENSE_SHARE * len(strings)
        column = np.empty(df.size, dtype=np.int64)
        column[dense] = np.arange(int(dense.sum()))
        column[~dense] = np.arange(int((~dense).sum()))
        in_dense = dense[feature]
        self.dense = np.zeros((len(strings), int(dense.sum())), dtype=np.float32)
        self.dense[rows[in_dense], column[feature[in_dense]]] = 1.0
        self.sparse = sparse.csr_matrix(
            (np.ones(int((~in_dense).sum()), dtype=np.float32),
             (rows[~in_dense], column[feature[~in_dense]])),
            shape=(len(strings), int((~dense).sum())),
        )
        self.rare_count = np.bincount(rows[~in_dense], minlength=len(strings)).astype(np.float32)
        self.lengths = lengths
        self._fused: np.ndarray[Any, Any] | None = None

    def set_threshold(self, loose_t: float) -> None:
        """Fold the need into :meth:`passing`'s first product: rows [x, sqrt(c_x), -t·n/2, 1]
        and [y, sqrt(c_y), 1, -t·m/2] multiply to x·y + sqrt(c_x·c_y) - t·(n+m)/2, and
        sqrt(c_x·c_y) >= min(c_x, c_y): a pair the second step would pass has it >= 0.
        One matrix product and one comparison per pair, instead of five passes over the
        pair matrix (the bound of every pair in a length window is quadratic: 7.4·10^8
        pairs at 200,000 raw records)."""
        half = (-0.5 * loose_t * self.lengths).astype(np.float32)[:, None]
        root = np.sqrt(self.rare_count)[:, None]
        one = np.ones_like(half)
        self._loose_t = loose_t
        # One matrix [x, sqrt(c), -t·n/2, 1]: the other side is a chunk of it with its last
        # two columns swapped, and the dense features a view of it (not three copies:
        # ~0.5 GB at 10^6 raw records).
        self._fused = np.hstack([self.dense, root, half, one])
        self.dense = self._fused[:, : self.dense.shape[1]]

    def intersections(self, a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]
                      ) -> np.ndarray[Any, Any]:
        """Multiset intersection sizes of rows ``a`` x rows ``b``."""
        dense = self.dense[a] @ self.dense[b].T
        rare = (self.sparse[a] @ self.sparse[b].T).toarray()
        return np.asarray(dense + rare)

    def passing(self, a: np.ndarray[Any, Any], b: np.ndarray[Any, Any],
                need: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """The pairs (positions in ``a``, in ``b``) whose multiset intersection ``I``
        satisfies ``2·I >= need`` (``need`` broadcasts to ``a`` x ``b``).

        In two steps, both exact: the dense features' product plus the smaller of the
        two rows' counts of rare features is an upper bound on ``I`` (the rare part of
        the intersection holds at most that many), so a pair failing with it fails with
        ``I``; only the pairs it lets through (a few in 10^3) get their rare part, one
        sparse row product per pair, instead of a sparse product of the whole block.
        """
        if self._fused is not None:  # set_threshold: a fused first step
            right = self._fused[b]
            right[:, -2:] = right[:, [-1, -2]]
            fused = self._fused[a] @ right.T
            ia, ib = np.nonzero(fused >= -FUSED_MARGIN)
            need_ab = np.broadcast_to(need, (a.size, b.size))[ia, ib]
            # x·y is an integer, and the fused value is off it by the other terms (known)
            # and float32 rounding (< 10^-3): rounding recovers it exactly.
            a_, b_ = a[ia], b[ib]
            rest = (np.sqrt(self.rare_count[a_].astype(np.float64) * self.rare_count[b_])
                    - 0.5 * self._loose_t * (self.lengths[a_] + self.lengths[b_]))
            unrounded = fused[ia, ib] - rest
            dense_ab = np.rint(unrounded)
            if np.abs(unrounded - dense_ab).max(initial=0.0) > 0.25:  # never seen; exactness
                dense_ab = np.einsum("ij,ij->i", self.dense[a_], self.dense[b_])
            slack_ab = np.minimum(self.rare_count[a[ia]], self.rare_count[b[ib]])
            keep = 2 * (dense_ab + slack_ab) >= need_ab
            ia, ib, dense_ab, need_ab = ia[keep], ib[keep], dense_ab[keep], need_ab[keep]
        else:
            dense = self.dense[a] @ self.dense[b].T
            slack = np.minimum(self.rare_count[a][:, None], self.rare_count[b][None, :])
            ia, ib = np.nonzero(2 * (dense + slack) >= need)
            dense_ab = dense[ia, ib]
            need_ab = np.broadcast_to(need, dense.shape)[ia, ib]
        if ia.size == 0:
            return ia, ib
        rare = np.asarray(self.sparse[a[ia]].multiply(self.sparse[b[ib]]).sum(axis=1))
        ok = 2 * (dense_ab + rare.ravel()) >= need_ab
        return ia[ok], ib[ok]


def prune(
    token_lists: Sequence[Sequence[str]],
    threshold: float,
    *,
    block_size: int = 1024,
    band_size: int = 256,
) -> PruneResult:
    """Greedy pruning in row order; see the module docstring.

    Rows are taken in blocks: each block is compared with the prompts kept
    before it (through the length window) and with itself, in bulk, by the
    multiset bound; then its rows are decided one by one, in order, computing
    LCS and F only for the pairs the bound lets through. ``block_size`` and
    ``band_size`` change speed only, never the result.
    """
    if any(len(tokens) == 0 for tokens in token_lists):
        raise ValueError("rouge: every prompt needs at least one token")
    strings = encode_tokens(token_lists)
    lengths = np.array([len(s) for s in strings], dtype=np.int64)
    occ = _Occurrences(strings)
    exact_t = Fraction(threshold)
    loose_t = float(threshold) * (1.0 - _FLOAT_SLACK)
    occ.set_threshold(loose_t)
    matches: list[Match | None] = [None] * len(strings)
    is_kept = np.zeros(len(strings), dtype=bool)
    n_bound = n_lcs = n_exact = 0

    def bound_pairs(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]
                    ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """Pairs (positions in ``a``, in ``b``) the multiset bound lets through; ``b`` is
        taken in chunks so that a block's matrices stay a few MiB at any corpus size."""
        nonlocal n_bound
        n_bound += a.size * b.size
        found_a, found_b = [], []
        for lo in range(0, b.size, _BOUND_COLUMNS):
            part = b[lo:lo + _BOUND_COLUMNS]
            need = loose_t * (lengths[a][:, None] + lengths[part][None, :])
            ia, ib = occ.passing(a, part, need)
            found_a.append(ia)
            found_b.append(ib + lo)
        return np.concatenate(found_a), np.concatenate(found_b)

    for start in range(0, len(strings), block_size):
        rows = np.arange(start, min(start + block_size, len(strings)))
        candidates: dict[int, list[int]] = {int(j): [] for j in rows}
        kept_arr = np.flatnonzero(is_kept)
        by_len = kept_arr[np.argsort(lengths[kept_arr], kind="stable")]
        sorted_len = lengths[by_len]
        # Bands of similar-length queries share one window of kept lengths
        # (the window grows with n), keeping the matrix products large.
        by_q_len = rows[np.argsort(lengths[rows], kind="stable")]
        for band in np.array_split(by_q_len, max(1, round(len(rows) / band_size))):
            lo = length_window(int(lengths[band[0]]), exact_t)[0]
            hi = length_window(int(lengths[band[-1]]), exact_t)[1]
            a = int(np.searchsorted(sorted_len, lo, side="left"))
            b = int(np.searchsorted(sorted_len, hi, side="right"))
            if a < b:
                for g, k in zip(*bound_pairs(band, by_len[a:b]), strict=True):
                    candidates[int(band[g])].append(int(by_len[a + k]))
        for a_, b_ in zip(*bound_pairs(rows, rows), strict=True):
            if a_ < b_:
                candidates[int(rows[b_])].append(int(rows[a_]))

        for j in rows.tolist():
            best: Match | None = None
            n_j = int(lengths[j])
            for i in candidates[j]:
                if not is_kept[i]:
                    continue
                n_lcs += 1
                lcs = int(LCSseq.similarity(strings[j], strings[i]))
                if not may_collide(lcs, n_j, int(lengths[i]), exact_t):
                    continue
                n_exact += 1
                f = rouge_l_f(lcs, n_j, int(lengths[i]))
                if f >= threshold and (
                    best is None or f > best.f or (f == best.f and i < best.row)
                ):
                    best = Match(row=i, f=f, lcs=lcs)
            matches[j] = best
            if best is None:
                is_kept[j] = True
    return PruneResult(matches, n_bound, n_lcs, n_exact, len(set("".join(strings))))


def run_rouge(table: pl.DataFrame, params: RougeParams) -> StageOutput:
    """Mark every row kept or duplicate (reason ``rouge_l``); see module docstring."""
    t0 = time.perf_counter()
    require_kept_input(table, "rouge", "dedup")
    ids: list[str] = table["prompt_id"].to_list()
    texts: list[str | None] = table["text"].to_list()
    blank = [pid for pid, text in zip(ids, texts, strict=True) if text is None or not text.strip()]
    if blank:
        raise ValueError(
            f"rouge: {len(blank)} prompt(s) have empty or whitespace-only text (filter should "
            f"have dropped them): prompt_id {', '.join(map(repr, blank[:5]))}"
        )
    segmenter = Segmenter()
    tokens = [segmenter.rouge_tokens(text) for text in texts if text is not None]
    t1 = time.perf_counter()
    result = prune(tokens, params.threshold)
    t2 = time.perf_counter()

    matches = result.matches
    drop = [m is not None for m in matches]
    details = [
        None if m is None else f"ROUGE-L F={m.f:.4f} with {ids[m.row]} (LCS {m.lcs} of "
        f"{len(tokens[j])}/{len(tokens[m.row])} tokens)"
        for j, m in enumerate(matches)
    ]
    out = ensure_columns(table, DUPLICATE_COLUMNS).with_columns(
        pl.Series("decision", [Decision.DUPLICATE.value if d else Decision.KEPT.value
                               for d in drop], dtype=pl.Utf8),
        pl.Series("reason", [REASON if d else None for d in drop], dtype=pl.Utf8),
        pl.Series("detail", details, dtype=pl.Utf8),
        pl.Series("duplicate_of", [None if m is None else ids[m.row] for m in matches],
                  dtype=pl.Utf8),
        pl.Series("similarity", [None if m is None else m.f for m in matches],
                  dtype=pl.Float64),
    )
    n_dropped = sum(m is not None for m in result.matches)
    meta: dict[str, Any] = {
        "params": params.model_dump(),
        "threshold": params.threshold,
        "n_in": table.height,
        "n_kept": table.height - n_dropped,
        "n_dropped": n_dropped,
        "n_bound": result.n_bound,
        "n_lcs": result.n_lcs,
        "n_exact_f": result.n_exact_f,
        "n_distinct_tokens": result.n_distinct_tokens,
        "jieba_block_memo": {"hits": segmenter.hits, "misses": segmenter.misses},
        "tokenizer": f"jieba {importlib.metadata.version('jieba')} lcut(HMM=True), "
        "whitespace tokens dropped",
        "reference": f"rouge-chinese {importlib.metadata.version('rouge-chinese')} "
        "Rouge().get_scores(hyp, ref)[0]['rouge-l']['f']",
        "seconds_segment": round(t1 - t0, 3),
        "seconds_prune": round(t2 - t1, 3),
        "seconds": round(time.perf_counter() - t0, 3),
    }
    return StageOutput(table=out, meta=meta)
