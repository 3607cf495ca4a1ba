"""The judge-drift anchor set: frozen essays every judge re-scores in every run.

``rubrics/anchors/essay_anchors.v<N>.yaml`` (validated strictly, fingerprinted like a
rubric). :func:`anchor_essays` turns the set, or a genre-stratified seeded sample of it,
into an essays table of the shape the judge stage reads, so anchors are judged by exactly
the code, rubric rendering and answer schema that judge the run's own essays.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Literal, Self

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, model_validator

from essaybench.bench.judge.request import ESSAY_COLUMNS
from essaybench.bench.rubrics import RubricError, VersionedFile
from essaybench.core.contracts import GENRES, OK
from essaybench.core.paths import resource
from essaybench.core.yamlio import load_model

ANCHOR_MODEL = "anchor"  # the "model" column of an anchor essay: no model wrote it
ANCHOR_SET = "anchor"  # its prompt_set column (neither open nor constrained)
Level = Literal["high", "mid", "low"]


class AnchorEssay(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")
    genre: str
    level: Level = Field(description="The authors' intended quality; not a score.")
    prompt: str = Field(min_length=1)
    essay: str = Field(min_length=1)

    @model_validator(mode="after")
    def _known_genre(self) -> Self:
        if self.genre not in GENRES:
            raise ValueError(f"genre {self.genre!r} is not one of {', '.join(GENRES)}")
        return self


class AnchorSet(VersionedFile):
    """A versioned anchor set; ``fingerprint`` hashes the file's content."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    version: int = Field(ge=1)
    description: str
    essays: tuple[AnchorEssay, ...] = Field(min_length=2)

    @model_validator(mode="after")
    def _unique_ids(self) -> Self:
        seen: set[str] = set()
        for essay in self.essays:
            if essay.id in seen:
                raise ValueError(f"essays[{essay.id}]: duplicate anchor id")
            seen.add(essay.id)
        return self

    @property
    def label(self) -> str:
        """``id.vN@fingerprint``: what a calibration is tied to."""
        return f"{self.id}.v{self.version}@{self.fingerprint}"


def default_anchor_path() -> Path:
    return resource("rubrics") / "anchors" / "essay_anchors.v1.yaml"


def load_anchor_set(path: Path | str | None = None) -> AnchorSet:
    return load_model(AnchorSet, path if path is not None else default_anchor_path(),
                      "anchor set", error=RubricError)


def sample_anchors(anchors: AnchorSet, n: int | None, seed: int) -> list[AnchorEssay]:
    """All anchors (``n`` None), else ``n`` of them: genres in turn, each genre's anchors
    in a seeded order that alternates levels, so a small sample still spans genres and
    quality. The same (set, n, seed) always gives the same sample."""
    if n is None or n >= len(anchors.essays):
        return list(anchors.essays)
    rng = random.Random(seed)
    queues: list[list[AnchorEssay]] = []
    levels = ("high", "low", "mid")
    for g, genre in enumerate(GENRES):  # each genre starts at another level
        by_level = {lv: [e for e in anchors.essays if e.genre == genre and e.level == lv]
                    for lv in levels[g % 3:] + levels[:g % 3]}
        for group in by_level.values():
            rng.shuffle(group)
        order = [e for trio in zip(*by_level.values(), strict=False) for e in trio]
        order += [e for g in by_level.values() for e in g if e not in order]
        queues.append(order)
    chosen: list[AnchorEssay] = []
    while len(chosen) < n:
        for queue in queues:
            if queue and len(chosen) < n:
                chosen.append(queue.pop(0))
    return chosen


def anchor_essays(essays: list[AnchorEssay]) -> pl.DataFrame:
    """The anchors as an essays table (the judge stage's input): prompt_id = anchor id."""
    rows = [{"prompt_id": e.id, "model": ANCHOR_MODEL, "sample_index": 0, "genre": e.genre,
             "prompt_set": ANCHOR_SET, "prompt_text": e.prompt, "essay_text": e.essay,
             "status": OK, "level": e.level} for e in essays]
    schema = {c: (pl.Int64 if c == "sample_index" else pl.Utf8) for c in ESSAY_COLUMNS}
    return pl.DataFrame(rows, schema={**schema, "level": pl.Utf8}, orient="row")
