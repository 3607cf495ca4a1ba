"""Accepted spot-check items promoted into the next gold-set version.

A gold set is a folder of versioned JSONL files, ``spot_gold.v<N>.jsonl``, one line per
essay::

    {"prompt_id": "...", "genre": "narrative", "prompt_text": "...", "essay_text": "...",
     "human_scores": {"nar_q1": 7, ...}, "human_score": 71.5, "annotators": ["zhang"],
     "source_run": "2026-W49", "item_id": "I1a2b3c4d", "essay_sha256": "..."}

``human_scores`` are each sub-question's mean over the annotators who accepted the item
(``accept`` = yes), ``human_score`` the mean of those annotators' 0–100 rubric scores. A new version
holds every line of the previous one plus the newly accepted essays (an essay already in
the set, by ``essay_sha256``, is not added twice). Published versions are never edited.
No field names the model; the essay text is kept as written (a model that names itself in
its essay is named there; the pack masks such names, the gold set does not alter essays).
A version is read as a gold set like a gold YAML file (``bench/gold.py``; ``essaybench gold
attach`` ties it to a prompt set): per prompt its highest-scored essay is the reference.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl

from essaybench.core.hashing import sha256_hex

PATTERN = re.compile(r"spot_gold\.v(\d+)\.jsonl")


def latest_version(folder: Path) -> tuple[int, Path | None]:
    found = [(int(m[1]), p) for p in folder.glob("spot_gold.v*.jsonl")
             if (m := PATTERN.fullmatch(p.name))]
    return max(found) if found else (0, None)


def gold_items(questions: pl.DataFrame, texts: pl.DataFrame, source_run: str,
               score_of: dict[tuple[str, str, int], float]) -> list[dict[str, object]]:
    """Gold lines for the accepted rows of ``questions`` (importer.QUESTION_SCHEMA);
    ``texts``: prompt_id, model, sample_index, prompt_text, essay_text; ``score_of``:
    (prompt, model, sample) → the mean of the accepting annotators' 0–100 scores."""
    accepted = questions.filter(pl.col("accept"))
    keys = ["prompt_id", "model", "sample_index"]
    lines = []
    for (prompt, model, sample), group in sorted(accepted.group_by(keys),
                                                 key=lambda kv: tuple(map(str, kv[0]))):
        text = texts.filter((pl.col("prompt_id") == prompt) & (pl.col("model") == model)
                            & (pl.col("sample_index") == sample)).row(0, named=True)
        means = group.group_by("question", maintain_order=True).agg(pl.col("human").mean())
        lines.append({
            "prompt_id": prompt, "genre": group["genre"][0],
            "prompt_text": text["prompt_text"], "essay_text": text["essay_text"],
            "human_scores": dict(zip(means["question"], means["human"], strict=True)),
            "human_score": score_of[(str(prompt), str(model), int(sample))],
            "annotators": sorted(set(group["annotator"].to_list())),
            "source_run": source_run, "item_id": group["item_id"][0],
            "essay_sha256": sha256_hex(str(text["essay_text"]))})
    return lines


def promote(folder: Path, new: list[dict[str, object]]) -> tuple[Path, int]:
    """Write version N+1 (previous lines + ``new`` not yet in the set); (path, added)."""
    version, previous = latest_version(folder)
    old = ([json.loads(line) for line in previous.read_text(encoding="utf-8").splitlines()
            if line.strip()] if previous else [])
    known = {item["essay_sha256"] for item in old}
    added = [item for item in new if item["essay_sha256"] not in known]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"spot_gold.v{version + 1}.jsonl"
    path.write_text("".join(json.dumps(item, ensure_ascii=False, sort_keys=True) + "\n"
                            for item in [*old, *added]), encoding="utf-8")
    return path, len(added)
