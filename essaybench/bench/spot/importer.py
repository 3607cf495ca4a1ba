"""A filled pack read back: validated cell by cell, mapped to the run's essays.

Each problem is one line naming the file, the line and the column
(``filled.csv:4: column 'arg_q2': 11 is not an integer from 1 to 10``): an unknown column,
an unknown ``item_id``, a missing annotator, a missing or off-range score, a score for a
question of another genre, a repeated (item, annotator). Problems are collected and
reported together (up to :data:`~essaybench.human.annotations.MAX_REPORTED`) as an
:class:`~essaybench.human.annotations.AnnotationFileError`, the error every annotation
file gives.

The rows are then mapped back through the key (item → prompt, model, sample) and each
annotator's sub-question scores turned into the essay's 0–100 rubric score (the judge's
formula and α). Those rows are written as an absolute annotation file and loaded with
:func:`~essaybench.human.run_check.load_checked`, the path ``essaybench agreement`` uses:
an essay the run does not have is refused there, as for any annotation file.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from essaybench.bench.judge.reading import trait_specs
from essaybench.bench.rubrics import Rubric
from essaybench.bench.scoring import essay_score
from essaybench.bench.spot.pack import COMMENT, FILLED_HEAD, SHOWN, PackKey
from essaybench.human.annotations import AnnotationFileError, ScoreScale, raise_problems
from essaybench.human.run_check import RunEssays, load_checked, write_jsonl

ESSAY_SCALE = ScoreScale(0, 100)
ACCEPT = {"": False, "no": False, "yes": True}
QUESTION_SCHEMA: dict[str, type[pl.DataType]] = {
    "item_id": pl.Utf8, "prompt_id": pl.Utf8, "model": pl.Utf8, "sample_index": pl.Int64,
    "genre": pl.Utf8, "annotator": pl.Utf8, "question": pl.Utf8, "human": pl.Int64,
    "accept": pl.Boolean, "comment": pl.Utf8, "line": pl.Int64}


@dataclass(frozen=True)
class Imported:
    questions: pl.DataFrame  # one row per item × annotator × sub-question (QUESTION_SCHEMA)
    essays: pl.DataFrame  # absolute annotations (ABSOLUTE_SCHEMA), checked against the run


def _score(text: str, low: int, high: int) -> int | None:
    try:
        value = int(text)
    except ValueError:
        return None
    return value if low <= value <= high and str(value) == text.lstrip("+") else None


def _row_problems(path: Path, line: int, row: dict[str, str], key: PackKey, rubric: Rubric,
                  all_questions: set[str]) -> list[str]:
    where = f"{path}:{line}: column"
    item_id = row.get("item_id", "").strip()
    if item_id not in key.items:
        return [f"{where} 'item_id': unknown item {item_id!r} (not in this pack)"]
    problems = []
    if not row.get("annotator", "").strip():
        problems.append(f"{where} 'annotator': missing")
    if row.get("accept", "").strip().lower() not in ACCEPT:
        problems.append(f"{where} 'accept': {row['accept']!r} is not yes, no or empty")
    own = set(rubric.question_ids(key.items[item_id]["genre"]))
    low, high = rubric.score_range
    for question in sorted(all_questions & row.keys(), key=list(row).index):
        text = row[question].strip()
        if question not in own:
            if text:
                problems.append(f"{where} {question!r}: not a question of this item's genre "
                                f"({key.items[item_id]['genre']}); leave it empty")
        elif not text:
            problems.append(f"{where} {question!r}: missing score")
        elif _score(text, low, high) is None:
            problems.append(f"{where} {question!r}: {text!r} is not an integer from {low} "
                            f"to {high}")
    problems += [f"{where} {q!r}: missing column" for q in sorted(own - row.keys())]
    return problems


def read_filled(path: Path, key: PackKey, rubric: Rubric) -> pl.DataFrame:
    """The filled pack at ``path`` as question rows (``QUESTION_SCHEMA``), every cell valid."""
    if not path.is_file():
        raise AnnotationFileError(f"{path}: filled pack not found")
    all_questions = {q for g in rubric.genres for q in rubric.question_ids(g)}
    allowed = {*SHOWN, *FILLED_HEAD, COMMENT, *all_questions}
    problems: list[str] = []
    records: list[dict[str, object]] = []
    seen: dict[tuple[str, str], int] = {}
    try:
        with path.open(encoding="utf-8-sig", newline="") as fh:
            reader = csv.DictReader(fh)
            fields = reader.fieldnames or []
            problems += [f"{path}:1: column {c!r}: unknown column" for c in fields
                         if c not in allowed]
            if "item_id" not in fields:
                problems.append(f"{path}:1: column 'item_id': missing column")
            for row in reader if not problems else ():
                line = reader.line_num
                if None in row:
                    problems.append(f"{path}:{line}: more cells than header fields")
                    continue
                found = _row_problems(path, line, row, key, rubric, all_questions)
                pair = (row["item_id"].strip(), row.get("annotator", "").strip())
                if not found and pair in seen:
                    found = [f"{path}:{line}: column 'annotator': {pair[1]!r} already scored "
                             f"{pair[0]} at line {seen[pair]}"]
                problems += found
                if found:
                    continue
                seen[pair] = line
                item = key.items[pair[0]]
                for question in rubric.question_ids(item["genre"]):
                    records.append({"item_id": pair[0], **item, "annotator": pair[1],
                                    "question": question, "human": int(row[question]),
                                    "accept": ACCEPT[row.get("accept", "").strip().lower()],
                                    "comment": row.get(COMMENT) or None, "line": line})
    except UnicodeDecodeError as exc:
        raise AnnotationFileError(f"{path}: not UTF-8 text: {exc}") from exc
    raise_problems(problems)
    if not records:
        raise AnnotationFileError(f"{path}: no filled row in the pack")
    return pl.DataFrame(records, schema=QUESTION_SCHEMA)


def essay_rows(questions: pl.DataFrame, rubric: Rubric, alpha: float) -> pl.DataFrame:
    """One absolute annotation per (essay, annotator): the 0–100 weighted rubric score."""
    rows = []
    keys = ["prompt_id", "model", "sample_index", "genre", "annotator"]
    for values, group in questions.group_by(keys, maintain_order=True):
        record = dict(zip(keys, values, strict=True))
        scores = dict(zip(group["question"], group["human"], strict=True))
        total = essay_score(trait_specs(rubric, str(record["genre"])), scores, alpha).total
        rows.append({**record, "score": total})
    return pl.DataFrame(rows)


def import_pack(path: Path, key: PackKey, rubric: Rubric, judgments: pl.DataFrame,
                alpha: float, annotations_path: Path) -> Imported:
    """Validate ``path``, map it back, write the essay annotations to ``annotations_path``
    and load them back through :func:`load_checked` against the run's ``judgments``."""
    questions = read_filled(path, key, rubric)
    essays = essay_rows(questions, rubric, alpha).with_columns(pl.lit(0).alias("line"))
    write_jsonl(essays, annotations_path)
    checked = load_checked(annotations_path, "absolute",
                           RunEssays.from_judgments(key.run_id, judgments), scale=ESSAY_SCALE)
    return Imported(questions, checked.table)
