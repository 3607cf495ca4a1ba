"""What the curate benchmark checks in a finished store: time and peak memory per stage,
recall of the planted duplicates, and that no published pair reaches ROUGE-L 0.7.

The ROUGE-L check is independent of the rouge stage's pruning: it scores pairs of the
published prompts from scratch (jieba tokens as rouge-chinese sees them, a full LCS per
pair) and compares a sample of them with rouge-chinese itself, bit for bit.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from itertools import combinations
from typing import Any

import numpy as np
import polars as pl
from datasketch import MinHash, MinHashLSH
from rapidfuzz import process
from rapidfuzz.distance import LCSseq
from rouge_chinese import Rouge

from benchmarks.curate_corpus import ChatLog
from essaybench.curate.funnel import CURATE_STAGES
from essaybench.curate.rouge import encode_tokens, rouge_l_f
from essaybench.curate.segment import Segmenter, rouge_string
from essaybench.store import Store

THRESHOLD = 0.7
CHECK_LSH_THRESHOLD = 0.3  # lower than the stage's own index: more candidate pairs
COPIES = ("exact", "near", "rouge_hi")


@dataclass(frozen=True)
class StageCost:
    stage: str
    seconds: float
    peak_bytes: int
    start_bytes: int  # the first sample inside the stage: its peak less this is its own

    @property
    def growth_bytes(self) -> int:
        return max(self.peak_bytes - self.start_bytes, 0)


def stage_costs(store: Store, samples: list[tuple[float, int]]) -> list[StageCost]:
    """Each curation stage's wall time (from the catalog), the largest process-tree RSS
    sampled while it ran and the first."""
    runs = {r.stage: r for r in store.stage_runs(limit=50) if r.status == "ok"}
    out = []
    for stage in CURATE_STAGES:
        run = runs[stage]
        t0, t1 = _epoch(run.started_at), _epoch(run.ended_at or run.started_at)
        inside = [rss for t, rss in samples if t0 <= t <= t1]
        out.append(StageCost(stage, t1 - t0, max(inside, default=0),
                             inside[0] if inside else 0))
    return out


def _epoch(moment: datetime) -> float:
    return moment.timestamp()


def outcomes(store: Store) -> pl.DataFrame:
    """One row per collected record: its id in the log, the stage that decided its fate
    (classify for a published one), decision, reason and the prompt it duplicated."""
    parts = []
    for stage in CURATE_STAGES:
        table = store.latest_ok_snapshot(stage)
        assert table is not None, f"no {stage} snapshot"
        rows = table.read()
        decided = rows if stage == "classify" else rows.filter(pl.col("decision") != "kept")
        cols = [c for c in ("record_id", "decision", "reason", "prompt_id", "text")
                if c in decided.columns]
        parts.append(decided.select(cols).with_columns(pl.lit(stage).alias("stage")))
    collect = store.latest_ok_snapshot("collect")
    assert collect is not None
    refs = collect.read().select("record_id", "source_ref", "locator")
    decided = pl.concat(parts, how="diagonal")
    assert decided.height == refs.height, "a record went missing between stages"
    return refs.join(decided, on="record_id", how="left")


def recall(log: ChatLog, table: pl.DataFrame) -> dict[str, Any]:
    """Per planted role: copies whose original and copy both passed the filter, and how
    many of those were dropped as duplicates (and by which stage)."""
    fate = {r["source_ref"]: r for r in table.iter_rows(named=True)
            if r["source_ref"] and r["source_ref"].startswith("e")}
    seen_by_dedup = {ref for ref, r in fate.items() if r["stage"] not in ("collect", "filter")}
    published = {ref for ref, r in fate.items() if r["stage"] == "classify"
                 and r["decision"] == "kept"}
    out: dict[str, Any] = {}
    for role in (*COPIES, "rouge_lo"):
        copies = [(ref, p.of) for ref, p in log.essays.items()
                  if p.role == role and ref in seen_by_dedup and p.of in seen_by_dedup]
        dropped = [ref for ref, _ in copies if fate[ref]["decision"] == "duplicate"]
        out[role] = {"planted": sum(p.role == role for p in log.essays.values()),
                     "reached_dedup": len(copies), "dropped": len(dropped),
                     # the pair is removed when its two prompts are not both published
                     "pair_removed": sum(not (ref in published and of in published)
                                         for ref, of in copies),
                     "by": dict(Counter(str(fate[ref]["reason"]) for ref in dropped))}

    def share(key: str, roles: tuple[str, ...]) -> float:
        total = sum(out[r]["reached_dedup"] for r in roles)
        return sum(out[r][key] for r in roles) / total if total else 1.0

    # recall: planted duplicate pairs (exact, near, ROUGE-L >= 0.7) not both published;
    # strict: the copy itself dropped as a duplicate
    out["recall"], out["strict"] = share("pair_removed", COPIES), share("dropped", COPIES)
    out["near_recall"] = share("pair_removed", ("near",))
    bases = [ref for ref, p in log.essays.items() if p.role == "base" and ref in seen_by_dedup]
    out["bases_dropped"] = dict(Counter(str(fate[ref]["reason"]) for ref in bases
                                        if fate[ref]["decision"] == "duplicate"))
    out["bases"] = len(bases)
    return out


def _shingles(text: str, k: int = 3) -> list[bytes]:
    return [text[i:i + k].encode() for i in range(max(1, len(text) - k + 1))]


def rouge_check(published: pl.DataFrame, log: ChatLog, table: pl.DataFrame,
                sample: int = 20_000, seed: int = 0, reference: int = 300) -> dict[str, Any]:
    """Exact ROUGE-L F of: ``sample`` random pairs of published prompts, every pair a
    MinHash LSH index (3-character shingles, threshold 0.3) proposes, and every planted
    pair whose two prompts were both published. ``reference`` pairs (the highest-scoring
    half, the other half random) are scored again by rouge-chinese itself.

    Pairs are kept as integer keys and their LCS computed in rapidfuzz's C++ (``cpdist``),
    F with rouge-chinese's operations on arrays (the same IEEE operations in the same
    order): at 10^6 raw records the LSH proposes tens of millions of pairs."""
    texts: list[str] = published["text"].to_list()
    n = len(texts)
    segmenter = Segmenter()
    tokens = [segmenter.rouge_tokens(t) for t in texts]
    codes = encode_tokens(tokens)
    rng = random.Random(seed)
    total_pairs = n * (n - 1) // 2
    keys: list[np.ndarray] = []
    if total_pairs <= sample:
        keys.append(np.array([a * n + b for a, b in combinations(range(n), 2)], dtype=np.int64))
    else:
        chosen: set[tuple[int, int]] = set()
        while len(chosen) < sample:
            a, b = sorted(rng.sample(range(n), 2))
            chosen.add((a, b))
        keys.append(np.array(sorted(a * n + b for a, b in chosen), dtype=np.int64))
    n_random = int(keys[0].size)
    lsh = MinHashLSH(threshold=CHECK_LSH_THRESHOLD, num_perm=128)
    for i, mh in enumerate(MinHash.bulk([_shingles(t) for t in texts], num_perm=128)):
        found = lsh.query(mh)
        if found:
            keys.append(np.fromiter(found, dtype=np.int64, count=len(found)) * n + i)
        lsh.insert(i, mh, check_duplication=False)
    random_keys = keys[0]
    all_keys = np.unique(np.concatenate(keys))
    n_lsh = int(all_keys.size) - n_random
    row_of = {t: i for i, t in enumerate(texts)}
    text_of = {r["source_ref"]: r["text"] for r in table.iter_rows(named=True)
               if r["source_ref"] and r["text"] is not None}
    planted_keys = []
    for ref, p in log.essays.items():
        x, y = row_of.get(text_of.get(ref, "")), row_of.get(text_of.get(p.of or "", ""))
        if p.of and x is not None and y is not None and x != y:
            planted_keys.append(min(x, y) * n + max(x, y))
    planted = len(planted_keys)
    all_keys = np.unique(np.concatenate([all_keys, np.array(planted_keys, dtype=np.int64)]))
    del keys, random_keys
    first, second = all_keys // max(n, 1), all_keys % max(n, 1)
    lengths = np.array([len(t) for t in tokens], dtype=np.float64)
    lcs = np.zeros(all_keys.size, dtype=np.float64)
    for lo in range(0, all_keys.size, 2_000_000):
        a_part, b_part = first[lo:lo + 2_000_000], second[lo:lo + 2_000_000]
        lcs[lo:lo + a_part.size] = process.cpdist(
            [codes[a] for a in a_part.tolist()], [codes[b] for b in b_part.tolist()],
            scorer=LCSseq.similarity, dtype=np.int64, workers=-1)
    # rouge_l_f on arrays: r = lcs/n_ref, p = lcs/n_hyp, 2·((p·r)/(p + r + 1e-8))
    r_lcs, p_lcs = lcs / lengths[second], lcs / lengths[first]
    scores = 2.0 * ((p_lcs * r_lcs) / (p_lcs + r_lcs + 1e-8))
    order = np.argsort(-scores, kind="stable")
    top = order[: reference // 2].tolist()
    picked = top + rng.sample(range(all_keys.size), min(int(all_keys.size), reference // 2))
    rouge = Rouge()
    mismatches = 0
    for k in picked:
        a, b = int(first[k]), int(second[k])
        assert scores[k] == rouge_l_f(int(lcs[k]), len(tokens[a]), len(tokens[b]))
        hyp, ref_ = (rouge_string(texts[i]) for i in (a, b))
        if rouge.get_scores(hyp, ref_)[0]["rouge-l"]["f"] != scores[k]:
            mismatches += 1
    best = int(order[0]) if order.size else None
    return {"published": n, "pairs": int(all_keys.size), "random_pairs": n_random,
            "lsh_pairs": n_lsh, "planted_pairs": planted,
            "at_or_above": int((scores >= THRESHOLD).sum()),
            "max_f": float(scores[best]) if best is not None else 0.0,
            "max_pair": ((texts[int(first[best])], texts[int(second[best])])
                         if best is not None else None),
            "reference_checked": len(picked), "reference_mismatches": mismatches}
