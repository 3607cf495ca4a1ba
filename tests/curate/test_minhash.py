"""MinHash LSH pass of dedup: checked against brute-force exact Jaccard over every pair."""

from __future__ import annotations

import random
from itertools import combinations
from typing import TypedDict

import numpy as np
import polars as pl
import pytest
from datasketch import MinHash
from pydantic import ValidationError

from essaybench.core.contracts import Decision
from essaybench.core.hashing import prompt_id
from essaybench.curate import minhash as minhash_module
from essaybench.curate.dedup import DedupParams, quoted_spans, run_dedup
from essaybench.curate.funnel import compute_funnel
from essaybench.curate.minhash import crc32, jaccard, minhash_pass, shingles, signatures
from tests.curate.test_dedup import DISTINCT, REWORDINGS, TEMPLATE_TWINS


class MinhashArgs(TypedDict):
    """minhash_pass's keyword parameters, spans and numbers aside."""

    k: int
    num_perm: int
    lsh_threshold: float
    jaccard_threshold: float
    seed: int


class KMeansArgs(TypedDict):
    """The DedupParams of a fast K-means pass."""

    k_points: int
    svd_components: int


PARAMS: MinhashArgs = {"k": 3, "num_perm": 128, "lsh_threshold": 0.5, "jaccard_threshold": 0.7,
                       "seed": 0}
EDITS = [("写一篇", "撰写一篇"), ("不少于", "至少"), ("左右", "上下"), ("。", "！"),
         ("要求", "需要"), ("文章", "作文")]


def _copy(text: str, rng: random.Random) -> str:
    """A close copy: a prefix, a suffix or a synonym (sometimes two of them)."""
    out = text
    for _ in range(rng.randint(1, 2)):
        op = rng.randrange(3)
        if op == 0:
            out = rng.choice(["请", "帮我", "麻烦你，"]) + out
        elif op == 1:
            out = out + rng.choice(["谢谢！", "（初中）", "尽快。"])
        else:
            found = [(a, b) for a, b in EDITS if a in out]
            if found:
                a, b = rng.choice(found)
                out = out.replace(a, b, 1)
    return out if out != text else out + "谢谢"


def _corpus(seed: int = 3) -> list[str]:
    """DISTINCT, its rewordings, and 60 close copies of random earlier rows (copies of
    copies too), shuffled so that a copy can come before its original."""
    rng = random.Random(seed)
    texts = [*DISTINCT, *(b for _, b in REWORDINGS)]
    for _ in range(60):
        texts.append(_copy(rng.choice(texts), rng))
    rng.shuffle(texts)
    return list(dict.fromkeys(texts))


def _brute_force(texts: list[str], threshold: float) -> tuple[list[int], list[float]]:
    """The same greedy rule with every earlier kept row compared by exact Jaccard of
    shingle sets computed here (Python sets of every 3-character substring)."""
    sets = [{t[i:i + 3] for i in range(len(t) - 2)} for t in texts]
    spans = [quoted_spans(t) for t in texts]
    kept: list[int] = []
    dup_of, sims = [-1] * len(texts), [0.0] * len(texts)
    for i in range(len(texts)):
        best, best_sim = -1, 0.0
        for j in kept:
            sim = len(sets[i] & sets[j]) / len(sets[i] | sets[j])
            conflict = spans[i] and spans[j] and not spans[i] & spans[j]
            if sim >= threshold and not conflict and sim > best_sim:
                best, best_sim = j, sim
        if best < 0:
            kept.append(i)
        dup_of[i], sims[i] = best, best_sim
    return dup_of, sims


def test_signatures_are_datasketchs_own() -> None:
    sets = [shingles(t, 3) for t in [*DISTINCT[:8], "写", "写作文"]]
    for seed, num_perm in ((0, 128), (7, 64)):
        ours = signatures(sets, num_perm, seed)
        for row, shingle_set in zip(ours, sets, strict=True):
            theirs = MinHash(num_perm=num_perm, seed=seed, hashfunc=crc32)
            theirs.update_batch([x.encode("utf-8") for x in shingle_set])
            assert row.tolist() == theirs.hashvalues.tolist()


def test_small_sketch_batches_and_cache_change_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = _corpus(seed=2)
    spans = [quoted_spans(t) for t in texts]
    whole = minhash_pass(texts, **PARAMS, spans=spans)
    monkeypatch.setattr(minhash_module, "SKETCH_BATCH", 7)
    monkeypatch.setattr(minhash_module, "SHINGLE_CACHE", 3)
    small = minhash_pass(texts, **PARAMS, spans=spans)
    assert small.dup_of.tolist() == whole.dup_of.tolist()
    assert small.jaccard.tolist() == whole.jaccard.tolist()
    assert (small.candidates, small.vetoed) == (whole.candidates, whole.vetoed)


def test_lsh_pass_equals_brute_force_exact_jaccard() -> None:
    texts = _corpus()
    spans = [quoted_spans(t) for t in texts]
    result = minhash_pass(texts, **PARAMS, spans=spans)
    expected_dup, expected_sim = _brute_force(texts, PARAMS["jaccard_threshold"])
    assert result.dup_of.tolist() == expected_dup
    assert result.jaccard.tolist() == pytest.approx(expected_sim, abs=1e-12)
    # the corpus exercises it: copies dropped, and far fewer pairs compared than all pairs
    assert 30 <= int((result.dup_of >= 0).sum()) <= 70
    assert result.candidates < len(texts) * (len(texts) - 1) // 2 / 5


def test_every_drop_points_at_an_earlier_kept_row_at_or_above_the_threshold() -> None:
    texts = _corpus(seed=11)
    result = minhash_pass(texts, **PARAMS, spans=[quoted_spans(t) for t in texts])
    for i, j in enumerate(result.dup_of.tolist()):
        if j < 0:
            continue
        assert j < i and result.dup_of[j] == -1
        a = {texts[i][k:k + 3] for k in range(len(texts[i]) - 2)}
        b = {texts[j][k:k + 3] for k in range(len(texts[j]) - 2)}
        assert len(a & b) / len(a | b) == result.jaccard[i] >= 0.7


def test_a_pair_quoting_disjoint_topics_is_never_dropped() -> None:
    for first, second in TEMPLATE_TWINS:
        with_guard = minhash_pass([first, second], **(PARAMS | {"jaccard_threshold": 0.5}),
                                  spans=[quoted_spans(first), quoted_spans(second)])
        assert with_guard.dup_of.tolist() == [-1, -1]
    first, second = TEMPLATE_TWINS[1]  # Jaccard 0.83: a duplicate without the guard
    assert jaccard(shingles(first, 3), shingles(second, 3)) >= 0.7
    without = minhash_pass([first, second], **PARAMS)
    assert without.dup_of.tolist() == [-1, 0]
    guarded = minhash_pass([first, second], **PARAMS,
                           spans=[quoted_spans(first), quoted_spans(second)])
    assert guarded.dup_of.tolist() == [-1, -1] and guarded.vetoed == 1


def test_short_texts_and_ties() -> None:
    assert shingles("写", 3) == frozenset({"写"})
    assert shingles("写作文", 3) == frozenset({"写作文"})
    # c is as similar to a as to b, and a and b are not duplicates of each other:
    # c goes to the earlier row
    common, q, r = "以环保为题写一篇议论文要求观点明确", "结构清晰语言生动", "论据充分字迹工整"
    a, b, c = common + q, common + r, common + "。"
    args: MinhashArgs = {**PARAMS, "jaccard_threshold": 0.5, "lsh_threshold": 0.3}
    sa, sb, sc = (shingles(t, 3) for t in (a, b, c))
    assert jaccard(sa, sb) < 0.5 <= jaccard(sc, sa) == jaccard(sc, sb)
    assert minhash_pass([a, b, c], **args).dup_of.tolist() == [-1, -1, 0]
    assert minhash_pass([b, a, c], **args).dup_of.tolist() == [-1, -1, 0]


def _table(texts: list[str]) -> pl.DataFrame:
    return pl.DataFrame({
        "record_id": [f"r{i}" for i in range(len(texts))], "text": texts,
        "prompt_id": [prompt_id(t) for t in texts],
        "decision": [Decision.KEPT.value] * len(texts),
    })


def test_dedup_runs_minhash_first_then_kmeans_on_what_is_left() -> None:
    texts = _corpus()
    texts = [*texts, texts[0]]  # and one exact duplicate
    out = run_dedup(_table(texts), DedupParams(k_points=3))
    reasons = out.table["reason"].to_list()
    expected_dup, _ = _brute_force(texts[:-1], 0.7)
    for i, j in enumerate(expected_dup):
        if j >= 0:
            assert reasons[i] == "minhash_duplicate"
            assert out.table["duplicate_of"][i] == prompt_id(texts[j])
            assert f"Jaccard {out.table['similarity'][i]:.3f}" in out.table["detail"][i]
    assert reasons[-1] == "exact_duplicate"
    meta = out.meta
    assert meta["minhash_duplicates"] == sum(j >= 0 for j in expected_dup)
    assert meta["n_after_minhash"] == meta["n_unique"] - meta["minhash_duplicates"]
    assert out.counts()[Decision.DUPLICATE.value] == (
        meta["exact_duplicates"] + meta["minhash_duplicates"] + meta["near_duplicates"])
    # rewordings MinHash cannot see (Jaccard < 0.7) are left to K-means, which finds some,
    # each pointing at a row both passes kept
    assert meta["near_duplicates"] >= 5
    kept = set(out.table.filter(pl.col("decision") == Decision.KEPT.value)["prompt_id"])
    assert set(out.table.filter(pl.col("reason") == "near_duplicate")["duplicate_of"]) <= kept


def test_minhash_off_is_the_kmeans_pass_alone_and_runs_are_deterministic() -> None:
    texts = _corpus(seed=5)
    fast: KMeansArgs = {"k_points": 2, "svd_components": 16}
    off = run_dedup(_table(texts), DedupParams(minhash=False, **fast))
    assert "minhash_duplicate" not in off.table["reason"].to_list()
    assert off.meta["minhash_duplicates"] == 0 and off.meta["n_after_minhash"] == len(texts)
    on = run_dedup(_table(texts), DedupParams(**fast))
    again = run_dedup(_table(texts), DedupParams(**fast))
    assert on.table.equals(again.table)
    assert on.meta["minhash_duplicates"] > 0


def test_funnel_balances_with_minhash_drops() -> None:
    texts = _corpus()
    n = len(texts)
    dedup = run_dedup(_table(texts), DedupParams(k_points=3)).table
    kept = dedup.filter(pl.col("decision") == Decision.KEPT.value)
    stage = {"decision": [Decision.KEPT.value] * kept.height}
    tables = {
        "collect": pl.DataFrame({"decision": [Decision.KEPT.value] * n}),
        "filter": pl.DataFrame({"decision": [Decision.KEPT.value] * n, "reason": [None] * n},
                               schema_overrides={"reason": pl.Utf8}),
        "dedup": dedup,
        "rouge": pl.DataFrame(stage), "classify": pl.DataFrame(stage),
    }
    funnel = compute_funnel(tables)
    assert funnel.balanced and funnel.final == kept.height
    assert funnel.near_duplicates == n - kept.height
    assert funnel.reasons["dedup"]["minhash_duplicate"] == int(
        (dedup["reason"] == "minhash_duplicate").sum())


def test_params_reject_an_index_threshold_above_the_decision() -> None:
    with pytest.raises(ValidationError, match="lsh_threshold"):
        DedupParams(lsh_threshold=0.8, jaccard_threshold=0.7)
    assert np.isclose(DedupParams().jaccard_threshold, 0.7)


def test_brute_force_reference_sees_the_planted_copies() -> None:
    # the reference itself is not vacuous: every planted copy of a kept prompt whose
    # Jaccard reaches 0.7 is among its drops
    texts = _corpus()
    dup_of, _ = _brute_force(texts, 0.7)
    sets = [shingles(t, 3) for t in texts]
    for i, j in combinations(range(len(texts)), 2):
        if dup_of[i] < 0 and dup_of[j] < 0:
            spans_i, spans_j = quoted_spans(texts[i]), quoted_spans(texts[j])
            if not (spans_i and spans_j and not spans_i & spans_j):
                assert jaccard(sets[i], sets[j]) < 0.7


def _datasketch_pass(texts: list[str], numbers: list[str]) -> tuple[list[int], int]:
    """The pass as it was written on datasketch's MinHashLSH (query and insert), the
    guards applied after the exact Jaccard: the reference for the plain-dict buckets."""
    from datasketch import LeanMinHash, MinHashLSH

    sets = [shingles(t, 3) for t in texts]
    sketches = signatures(sets, 128, 0)
    spans = [quoted_spans(t) for t in texts]
    lsh = MinHashLSH(threshold=0.5, num_perm=128)
    dup_of, proposed = [-1] * len(texts), 0
    for i, own in enumerate(sets):
        sketch = LeanMinHash(seed=0, hashvalues=sketches[i], scheme="affine32")
        found = sorted(lsh.query(sketch))
        proposed += len(found)
        best, best_sim = -1, 0.0
        for j in found:
            estimate = (sketches[j] == sketches[i]).sum()
            small, large = sorted((len(sets[i]), len(sets[j])))
            if estimate < (0.7 - minhash_module.ESTIMATE_MARGIN) * 128 or small < 0.7 * large:
                continue
            sim = jaccard(own, sets[j])
            clash = ((spans[i] and spans[j] and not spans[i] & spans[j])
                     or (numbers[i] and numbers[j] and numbers[i] != numbers[j]))
            if sim >= 0.7 and not clash and sim > best_sim:
                best, best_sim = j, sim
        dup_of[i] = best
        if best < 0:
            lsh.insert(i, sketch, check_duplication=False)
    return dup_of, proposed


def test_plain_dict_buckets_propose_what_datasketchs_index_does() -> None:
    # The buckets are plain dicts (datasketch's query and insert were half of the pass at
    # 200,000 raw records) and the guards come before the exact Jaccard: the same
    # candidates and the same drops as datasketch's index with the guards after.
    from essaybench.curate.dedup import number_key

    texts = _corpus(seed=5) + [t.replace("800", "600") for t in _corpus(seed=6)[:40]]
    texts = list(dict.fromkeys(texts))
    numbers = [number_key(t) for t in texts]
    result = minhash_pass(texts, **PARAMS, spans=[quoted_spans(t) for t in texts],
                          numbers=numbers)
    expected, proposed = _datasketch_pass(texts, numbers)
    assert result.dup_of.tolist() == expected
    assert result.candidates == proposed
    assert sum(j >= 0 for j in expected) >= 30 and result.vetoed > 0
