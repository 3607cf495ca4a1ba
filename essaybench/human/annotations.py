"""Human annotations from JSONL or CSV files, validated row by row.

Two formats. The file's suffix chooses the reader: ``.jsonl`` (one JSON object
per line, blank lines ignored) or ``.csv`` (UTF-8, header row naming the
fields, an empty cell = absent optional field).

**Pairwise** — one row per (pair, annotator); several annotators per pair::

    {"prompt_id": "p1", "model_a": "m1", "model_b": "m2", "annotator": "zhang",
     "verdict": "A", "genre": "narrative"}

* ``verdict``: ``A`` (model_a's essay is better), ``B`` or ``tie``.
* ``genre`` is optional; when given, every row of one prompt must agree on it.
* ``sample_index`` is optional (default 0, the first essay a model wrote on the prompt,
  the only one when the run wrote one sample per prompt): which sample of each model the
  annotator read, sample i of ``model_a`` against sample i of ``model_b`` as the pairwise
  judge pairs them. The judge is compared with humans on exactly these essays.
* One annotator judges one unordered pair of one prompt (and sample) at most once: a
  second row for (p1, m2, m1, zhang) is a duplicate of (p1, m1, m2, zhang).

**Absolute** — one score per (prompt, model, annotator)::

    prompt_id,model,annotator,score,genre
    p1,m1,zhang,3,narrative

* ``score``: a finite number on the declared scale (:class:`ScoreScale`, e.g. 0–3 or
  1–10; ``essaybench agreement --scale LOW-HIGH``); 99 on a 0–3 scale, −5, 1e300 and NaN
  are errors naming the file and line, never numbers that reach the statistics.

Unknown fields are errors. Any invalid row stops the load with
:class:`AnnotationFileError`, whose message names the file, the line and the
field (``annotations.csv:7: field 'verdict': ...``), for every bad row up to
:data:`MAX_REPORTED` of them.

The loaded table is a polars DataFrame with the fields above plus ``line``
(the row's line in the file), so later checks can point back at the file.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Self, TypeVar

import polars as pl
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from essaybench.core.errors import UserError
from essaybench.core.jsonlines import numbered_json_lines

MAX_REPORTED = 20

Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Verdict = Literal["A", "B", "tie"]
VERDICTS: tuple[Verdict, ...] = ("A", "B", "tie")

PAIRWISE_SCHEMA: dict[str, type[pl.DataType]] = {
    "prompt_id": pl.Utf8, "genre": pl.Utf8, "model_a": pl.Utf8, "model_b": pl.Utf8,
    "annotator": pl.Utf8, "verdict": pl.Utf8, "sample_index": pl.Int64, "line": pl.Int64,
}
ABSOLUTE_SCHEMA: dict[str, type[pl.DataType]] = {
    "prompt_id": pl.Utf8, "genre": pl.Utf8, "model": pl.Utf8, "annotator": pl.Utf8,
    "score": pl.Float64, "sample_index": pl.Int64, "line": pl.Int64,
}


class AnnotationFileError(UserError, ValueError):
    """An annotation file is unreadable or invalid; the message names file, line and field."""


@dataclass(frozen=True)
class ScoreScale:
    """The closed range human scores must lie in."""

    low: float
    high: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low < self.high):
            raise ValueError(f"a score scale needs finite low < high, got {self}")

    @classmethod
    def parse(cls, text: str) -> ScoreScale:
        """"0-3", "1-10", "-2-2" or "0..100"."""
        match = _SCALE_RE.fullmatch(text.strip())
        if match is None:
            raise ValueError(f"{text!r} is not a scale: expected LOW-HIGH, e.g. 0-3 or 1-10")
        return cls(float(match[1]), float(match[2]))

    def __contains__(self, score: float) -> bool:
        return self.low <= score <= self.high

    def __str__(self) -> str:
        return f"{self.low:g}–{self.high:g}"


_NUMBER = r"(-?\d+(?:\.\d+)?)"
_SCALE_RE = re.compile(rf"{_NUMBER}\s*(?:-|\.\.|–)\s*{_NUMBER}")
# When none is declared: the judge's own sub-question scale, which holds the usual human
# ones (0–3, 1–5, 1–10). Declare a wider one rather than let 99 through.
DEFAULT_SCALE = ScoreScale(0, 10)


class PairwiseAnnotation(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt_id: Name
    model_a: Name
    model_b: Name
    annotator: Name
    verdict: Verdict
    genre: Name | None = None
    sample_index: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _two_models(self) -> Self:
        if self.model_a == self.model_b:
            raise ValueError(f"model_a and model_b are the same model {self.model_a!r}")
        return self

    def key(self) -> tuple[str, ...]:
        return (self.prompt_id, *sorted((self.model_a, self.model_b)), self.annotator,
                str(self.sample_index))


class AbsoluteAnnotation(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt_id: Name
    model: Name
    annotator: Name
    score: float = Field(allow_inf_nan=False)
    genre: Name | None = None
    sample_index: int = Field(default=0, ge=0)  # as in PairwiseAnnotation

    def key(self) -> tuple[str, ...]:
        return (self.prompt_id, self.model, self.annotator, str(self.sample_index))


Row = TypeVar("Row", PairwiseAnnotation, AbsoluteAnnotation)


def _raw_rows(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, raw row) pairs; a row that cannot be parsed at all is an error."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        yield from numbered_json_lines(path, AnnotationFileError)
    elif suffix == ".csv":
        with path.open(encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh)
            for row in reader:
                # The line the row ends on (a quoted cell may span lines; blank lines are skipped).
                line = reader.line_num
                if None in row:
                    raise AnnotationFileError(f"{path}:{line}: more cells than header fields")
                yield line, {k: v for k, v in row.items() if v is not None and v.strip() != ""}
    else:
        raise AnnotationFileError(f"{path}: unknown annotation file type {path.suffix!r} "
                                  "(expected .jsonl or .csv)")


def _describe(path: Path, line: int, exc: ValidationError) -> list[str]:
    out = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"])
        where = f"field {field!r}: " if field else ""
        out.append(f"{path}:{line}: {where}{err['msg']}")
    return out


def _off_scale(path: Path, line: int, row: BaseModel, scale: ScoreScale | None) -> str | None:
    score = getattr(row, "score", None)
    if scale is None or score is None or score in scale:
        return None
    return (f"{path}:{line}: field 'score': {score:g} is outside the scale {scale} "
            "(declare the scale your annotators used with --scale LOW-HIGH)")


def raise_problems(problems: list[str]) -> None:
    """One ``AnnotationFileError`` listing ``problems`` (the first MAX_REPORTED, then how
    many more), if there are any."""
    if problems:
        more = len(problems) - MAX_REPORTED
        shown = problems[:MAX_REPORTED] + ([f"... and {more} more"] if more > 0 else [])
        raise AnnotationFileError("invalid annotations:\n  " + "\n  ".join(shown))


def _load(path: Path | str, model: type[Row],
          scale: ScoreScale | None = None) -> list[tuple[int, Row]]:
    path = Path(path)
    if not path.is_file():
        raise AnnotationFileError(f"{path}: annotation file not found")
    rows: list[tuple[int, Row]] = []
    problems: list[str] = []
    first_seen: dict[tuple[str, ...], int] = {}
    genre_of: dict[str, tuple[str, int]] = {}
    try:
        for line, raw in _raw_rows(path):
            if not isinstance(raw, dict):
                problems.append(f"{path}:{line}: expected an object, got {type(raw).__name__}")
                continue
            try:
                row = model.model_validate(raw)
            except ValidationError as exc:
                problems.extend(_describe(path, line, exc))
                continue
            off_scale = _off_scale(path, line, row, scale)
            if off_scale is not None:
                problems.append(off_scale)
                continue
            key = row.key()
            if key in first_seen:
                problems.append(f"{path}:{line}: duplicate of line {first_seen[key]} "
                                f"({', '.join(key)})")
                continue
            first_seen[key] = line
            if row.genre is not None:
                seen = genre_of.setdefault(row.prompt_id, (row.genre, line))
                if seen[0] != row.genre:
                    problems.append(f"{path}:{line}: field 'genre': prompt {row.prompt_id!r} "
                                    f"has genre {row.genre!r} here but {seen[0]!r} "
                                    f"at line {seen[1]}")
                    continue
            rows.append((line, row))
    except UnicodeDecodeError as exc:
        raise AnnotationFileError(f"{path}: not UTF-8 text: {exc}") from exc
    raise_problems(problems)
    if not rows:
        raise AnnotationFileError(f"{path}: no annotations in the file")
    return rows


def load_pairwise(path: Path | str) -> pl.DataFrame:
    """Pairwise annotations (see the module docstring) as a DataFrame with ``PAIRWISE_SCHEMA``."""
    rows = _load(path, PairwiseAnnotation)
    return pl.DataFrame([{**row.model_dump(), "line": line} for line, row in rows],
                        schema=PAIRWISE_SCHEMA)


def load_absolute(path: Path | str, scale: ScoreScale | None = None) -> pl.DataFrame:
    """Absolute annotations (see the module docstring) as a DataFrame with ``ABSOLUTE_SCHEMA``;
    every score on ``scale`` (None: any finite number; ``load_checked`` applies
    ``DEFAULT_SCALE`` when none is declared)."""
    rows = _load(path, AbsoluteAnnotation, scale)
    return pl.DataFrame([{**row.model_dump(), "line": line} for line, row in rows],
                        schema=ABSOLUTE_SCHEMA)


def require_columns(df: pl.DataFrame, columns: tuple[str, ...] | list[str], what: str) -> None:
    """Raise a ValueError naming ``what`` and the missing columns, if any."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what}: missing column(s) {missing}; has {df.columns}")
