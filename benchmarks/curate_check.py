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

import polars as pl
from datasketch import MinHash, MinHashLSH
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


def stage_costs(store: Store, samples: list[tuple[float, int]]) -> list[StageCost]:
    """Each curation stage's wall time (from the catalog) and the largest process-tree
    RSS sampled while it ran."""
    runs = {r.stage: r for r in store.stage_runs(limit=50) if r.status == "ok"}
    out = []
    for stage in CURATE_STAGES:
        run = runs[stage]
        t0, t1 = _epoch(run.started_at), _epoch(run.ended_at or run.started_at)
        inside = [rss for t, rss in samples if t0 <= t <= t1]
        out.append(StageCost(stage, t1 - t0, max(inside, default=0)))
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
    half, the other half random) are scored again by rouge-chinese itself."""
    texts: list[str] = published["text"].to_list()
    n = len(texts)
    segmenter = Segmenter()
    tokens = [segmenter.rouge_tokens(t) for t in texts]
    codes = encode_tokens(tokens)
    pairs: set[tuple[int, int]] = set()
    rng = random.Random(seed)
    total_pairs = n * (n - 1) // 2
    if total_pairs <= sample:
        pairs.update(combinations(range(n), 2))
    while len(pairs) < min(sample, total_pairs):
        a, b = sorted(rng.sample(range(n), 2))
        pairs.add((a, b))
    n_random = len(pairs)
    lsh = MinHashLSH(threshold=CHECK_LSH_THRESHOLD, num_perm=128)
    for i, mh in enumerate(MinHash.bulk([_shingles(t) for t in texts], num_perm=128)):
        for j in lsh.query(mh):
            pairs.add((int(j), i))
        lsh.insert(i, mh, check_duplication=False)
    n_lsh = len(pairs) - n_random
    row_of = {t: i for i, t in enumerate(texts)}
    text_of = {r["source_ref"]: r["text"] for r in table.iter_rows(named=True)
               if r["source_ref"] and r["text"] is not None}
    planted = 0
    for ref, p in log.essays.items():
        x, y = row_of.get(text_of.get(ref, "")), row_of.get(text_of.get(p.of or "", ""))
        if p.of and x is not None and y is not None and x != y:
            pairs.add((min(x, y), max(x, y)))
            planted += 1
    scores = {}
    for a, b in sorted(pairs):
        lcs = int(LCSseq.similarity(codes[a], codes[b]))
        scores[(a, b)] = rouge_l_f(lcs, len(tokens[a]), len(tokens[b]))
    ranked = sorted(scores, key=lambda ab: -scores[ab])
    chosen = ranked[: reference // 2] + rng.sample(ranked, min(len(ranked), reference // 2))
    rouge = Rouge()
    mismatches = 0
    for a, b in chosen:
        hyp, ref_ = (rouge_string(texts[i]) for i in (a, b))
        if rouge.get_scores(hyp, ref_)[0]["rouge-l"]["f"] != scores[(a, b)]:
            mismatches += 1
    top = ranked[0] if ranked else None
    return {"published": n, "pairs": len(pairs), "random_pairs": n_random, "lsh_pairs": n_lsh,
            "planted_pairs": planted,
            "at_or_above": sum(f >= THRESHOLD for f in scores.values()),
            "max_f": scores[top] if top else 0.0,
            "max_pair": (texts[top[0]], texts[top[1]]) if top else None,
            "reference_checked": len(chosen), "reference_mismatches": mismatches}
