"""Freeze the classified prompts into a versioned prompt set.

The version is a content hash of the prompts and their labels, so the same
prompts with the same labels always get the same version, wherever and
whenever they were curated; provenance and evidence travel with each prompt
but do not change the version. A prompt without a single genre (an open genre
or a choice, kept with classify's ``keep_genre_choice``) adds its
``allowed_genres`` to its identity; a single-genre prompt's identity is
unchanged by that column (``allowed_genres == [genre]`` says nothing new), so
prompt sets frozen before it existed keep their versions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from essaybench.core.contracts import GENRES, PROMPT_SETS, kept_rows
from essaybench.core.hashing import canonical_json, sha256_hex
from essaybench.curate.funnel import Funnel

EXPORT_COLUMNS = [
    "prompt_id", "text", "genre", "prompt_set", "genre_source", "set_source",
    "genre_evidence", "set_evidence", "constraints",
    "allowed_genres", "genre_open", "genre_segment", "genre_span",
    "record_id", "source", "file", "locator", "source_ref",
]
IDENTITY_COLUMNS = ["prompt_id", "text", "genre", "prompt_set"]


@dataclass(frozen=True)
class PromptSet:
    version: str
    prompts: pl.DataFrame
    counts: dict[str, dict[str, int]]  # genre -> set -> n, with "total" rows and columns

    @property
    def n_prompts(self) -> int:
        return self.prompts.height


def genre_set_counts(prompts: pl.DataFrame) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {g: dict.fromkeys(PROMPT_SETS, 0) for g in GENRES}
    for genre, pset, n in prompts.group_by("genre", "prompt_set").len().iter_rows():
        # a kept prompt without a single genre (open genre or a choice) counts as "choice"
        key = "choice" if genre is None else str(genre)
        counts.setdefault(key, dict.fromkeys(PROMPT_SETS, 0))[str(pset)] = int(n)
    for row in counts.values():
        row["total"] = sum(row[s] for s in PROMPT_SETS)
    counts["total"] = {s: sum(counts[g][s] for g in counts if g != "total")
                       for s in (*PROMPT_SETS, "total")}
    return counts


def freeze_prompt_set(classified: pl.DataFrame) -> PromptSet:
    prompts = (kept_rows(classified)
               .select(EXPORT_COLUMNS)
               .sort("genre", "prompt_set", "prompt_id"))
    no_genre = pl.col("genre").is_null() & (pl.col("allowed_genres").list.len().fill_null(0) == 0)
    unlabeled = prompts.filter(no_genre | pl.col("prompt_set").is_null())
    if unlabeled.height:
        raise ValueError(f"{unlabeled.height} kept prompts lack a genre or set label, e.g. "
                         f"{unlabeled['prompt_id'][0]}; classify must mark them unclassified")
    identity = [
        (*row, allowed) if row[2] is None else row
        for row, allowed in zip(prompts.select(IDENTITY_COLUMNS).rows(),
                                prompts["allowed_genres"].to_list(), strict=True)]
    version = "ps-" + sha256_hex(canonical_json(identity))[:12]
    return PromptSet(version, prompts, genre_set_counts(prompts))


def export_prompt_set(
    prompt_set: PromptSet, folder: Path, manifest: dict[str, Any], funnel: Funnel
) -> dict[str, Path]:
    """Write prompts.jsonl, prompts.parquet and manifest.json; never overwrite a version."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"jsonl": folder / "prompts.jsonl", "parquet": folder / "prompts.parquet",
             "manifest": folder / "manifest.json"}
    if all(p.is_file() for p in paths.values()):
        return paths  # a version's files are immutable; same version means same content
    with paths["jsonl"].open("w", encoding="utf-8") as fh:
        for row in prompt_set.prompts.iter_rows(named=True):
            row["constraints"] = json.loads(row["constraints"]) if row["constraints"] else []
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    prompt_set.prompts.write_parquet(paths["parquet"])
    paths["manifest"].write_text(json.dumps({
        "version": prompt_set.version, "n_prompts": prompt_set.n_prompts,
        "counts": prompt_set.counts, "funnel": funnel.to_dict(), **manifest,
    }, ensure_ascii=False, indent=2, default=str) + "\n", encoding="utf-8")
    return paths
