"""Human annotations checked against the run they are compared with.

An annotation names essays by prompt id and model. A row naming a prompt the run did not
write, a model it did not run, or an essay it does not have (that model on that prompt)
is a mistake in the file (a typo, last month's run, another prompt set): unnoticed, it
turns correlations into NaN or, in pairwise voting, moves the known models' scores. So
such rows are an error naming the file, the lines and the unknown values, unless the
user says ``--ignore-unknown``: then they are dropped and counted, never used.
Scores are checked against the declared scale as they are read (``ScoreScale``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import polars as pl

from essaybench.human.annotations import (
    DEFAULT_SCALE,
    AnnotationFileError,
    ScoreScale,
    load_absolute,
    load_pairwise,
)

Kind = Literal["pairwise", "absolute"]
SHOWN = 5  # values and lines named per kind of problem


@dataclass(frozen=True)
class RunEssays:
    """What a run has: its prompts, its models, and which model wrote on which prompt."""

    run_id: str
    prompts: frozenset[str]
    models: frozenset[str]
    essays: frozenset[tuple[str, str]]  # (prompt_id, model)
    samples: frozenset[tuple[str, str, int]] = frozenset()  # (prompt_id, model, sample_index)

    @classmethod
    def from_judgments(cls, run_id: str, judgments: pl.DataFrame) -> RunEssays:
        """From a ``judge`` snapshot: every essay it has a row for, whatever its status
        (a table without ``sample_index`` holds sample 0 only)."""
        sample = (pl.col("sample_index") if "sample_index" in judgments.columns
                  else pl.lit(0)).cast(pl.Int64).alias("sample_index")
        keys = {(str(p), str(m), int(k)) for p, m, k
                in judgments.select("prompt_id", "model", sample).unique().iter_rows()}
        pairs = {(p, m) for p, m, _ in keys}
        return cls(run_id, frozenset(p for p, _ in pairs), frozenset(m for _, m in pairs),
                   frozenset(pairs), frozenset(keys))


@dataclass(frozen=True)
class CheckedAnnotations:
    table: pl.DataFrame  # the rows that name essays of the run
    dropped: int  # rows left out (only with ignore_unknown)
    note: str  # what was left out, and why ("" when nothing was)


def _problems(row: dict[str, object], models: tuple[str, ...],
              run: RunEssays) -> list[tuple[str, str]]:
    """(kind, value) for each thing ``row`` names that ``run`` does not have."""
    prompt = str(row["prompt_id"])
    sample = row.get("sample_index")  # absent in tables loaded before it existed
    found: list[tuple[str, str]] = []
    if prompt not in run.prompts:
        found.append(("prompts", repr(prompt)))
    for column in models:
        model = str(row[column])
        if model not in run.models:
            found.append(("models", repr(model)))
        elif prompt in run.prompts and (prompt, model) not in run.essays:
            found.append(("essays", f"({prompt}, {model})"))
        elif (prompt in run.prompts and run.samples and isinstance(sample, int)
              and (prompt, model, sample) not in run.samples):
            found.append(("essays", f"({prompt}, {model}, sample {sample})"))
    return found


def _listed(items: Iterable[str], limit: int = SHOWN) -> str:
    items = list(items)
    more = f", … {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def _summary(where: dict[str, dict[str, list[int]]]) -> str:
    names = {"models": "unknown models", "prompts": "unknown prompts",
             "essays": "essays not in the run"}
    parts = []
    for kind in ("models", "prompts", "essays"):
        if where.get(kind):
            values = where[kind]
            lines = sorted({n for ns in values.values() for n in ns})
            parts.append(f"{names[kind]} {_listed(values)} "
                         f"({'line' if len(lines) == 1 else 'lines'} {_listed(map(str, lines))})")
    return "; ".join(parts)


def check_against_run(annotations: pl.DataFrame, kind: Kind, run: RunEssays,
                      path: Path | str, *, ignore_unknown: bool = False) -> CheckedAnnotations:
    """``annotations`` (as loaded, with their ``line``) whose rows all name essays of
    ``run``; ``AnnotationFileError`` naming ``path``, the lines and the unknown values
    otherwise, unless ``ignore_unknown`` (then those rows are dropped and counted)."""
    models = ("model_a", "model_b") if kind == "pairwise" else ("model",)
    where: dict[str, dict[str, list[int]]] = {}
    bad_lines: set[int] = set()
    for row in annotations.iter_rows(named=True):
        for problem, value in _problems(row, models, run):
            where.setdefault(problem, {}).setdefault(value, []).append(int(row["line"]))
            bad_lines.add(int(row["line"]))
    if not bad_lines:
        return CheckedAnnotations(annotations, 0, "")
    what = (f"{len(bad_lines)} annotation row(s) name what run {run.run_id} does not have: "
            f"{_summary(where)}")
    if not ignore_unknown:
        raise AnnotationFileError(f"{path}:{min(bad_lines)}: {what}; fix the file or pass "
                                  "--ignore-unknown to leave those rows out")
    kept = annotations.filter(~pl.col("line").is_in(sorted(bad_lines)))
    if kept.height == 0:
        raise AnnotationFileError(f"{path}: no annotation row names an essay of run "
                                  f"{run.run_id} ({what})")
    return CheckedAnnotations(kept, len(bad_lines), f"{path}: ignored {what}")


def load_checked(path: Path | str, kind: Kind, run: RunEssays, *,
                 scale: ScoreScale | None = None,
                 ignore_unknown: bool = False) -> CheckedAnnotations:
    """Load ``path`` (scores on ``scale``, ``DEFAULT_SCALE`` when none is declared) and
    check it against ``run`` (``check_against_run``)."""
    table = (load_pairwise(path) if kind == "pairwise"
             else load_absolute(path, scale or DEFAULT_SCALE))
    return check_against_run(table, kind, run, path, ignore_unknown=ignore_unknown)


def write_jsonl(checked: pl.DataFrame, path: Path) -> Path:
    """The rows of ``checked`` as an annotation file (JSONL) the loaders read back equal
    (their ``line`` numbers aside): the rows a stage should use, when some were left out."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = ({k: v for k, v in row.items() if k != "line" and v is not None}
            for row in checked.iter_rows(named=True))
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")
    return path

