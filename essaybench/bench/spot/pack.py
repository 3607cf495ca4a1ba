"""The blind annotation pack and the key that maps it back.

A pack folder holds what annotators see and nothing else:

* ``pack.csv`` — one row per item: ``item_id``, ``writer`` (a pseudonym, ``W1``…),
  ``genre``, ``prompt_text``, ``essay_text``, then the fields to fill: ``annotator``,
  ``accept`` (``yes`` to propose the item for the gold set), one column per rubric
  sub-question (blank for questions of other genres) and ``comment``.
* ``form.html`` — the same items as an offline form (no network, plain JS): "Save CSV"
  downloads a file with the fill-in columns that ``spot-check-import`` reads.

Neither holds a model name, a model id, a prompt id or a judge score. Item ids and writer
pseudonyms are derived from a secret salt, the run, the seed and the essay key, so the
same selection gives the same pack, and the ids cannot be recomputed without the salt.
The key (``key.json``: item → prompt, model, sample; pseudonym → model) is written to the
store, never into the pack folder.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from jinja2 import Environment, PackageLoader, select_autoescape

from essaybench.bench.rubrics import Rubric

SHOWN = ("item_id", "writer", "genre", "prompt_text", "essay_text")
FILLED_HEAD = ("item_id", "annotator", "accept")
COMMENT = "comment"
KEY_FILE = "key.json"
MASK = "〈模型〉"  # a model's name inside a prompt or an essay ("作为通义千问…") unblinds it


@dataclass(frozen=True)
class PackKey:
    """What maps a pack back to the run; JSON in the store (``key.json``)."""

    run_id: str
    judge: str
    seed: int
    rubric_id: str
    rubric_version: int
    items: dict[str, dict[str, Any]]  # item id → prompt_id, model, sample_index, genre
    writers: dict[str, str]  # pseudonym → model

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.__dict__, ensure_ascii=False, indent=1,
                                   sort_keys=True), encoding="utf-8")
        return path

    @classmethod
    def read(cls, path: Path) -> PackKey:
        return cls(**json.loads(path.read_text(encoding="utf-8")))


def question_columns(rubric: Rubric, genres: list[str]) -> list[str]:
    """Every sub-question id of ``genres``, in rubric order (the pack's score columns)."""
    return [q for g in sorted(set(genres)) for q in rubric.question_ids(g)]


def _digest(*parts: object) -> str:
    return hashlib.sha256("\x00".join(map(str, parts)).encode()).hexdigest()


def blind_ids(items: pl.DataFrame, run_id: str, seed: int,
              salt: str = "") -> tuple[list[str], dict[str, str]]:
    """(item id per row, pseudonym → model): ``I`` + 8 hex digits per essay, ``W1``… per
    model in a seeded order (not alphabetical, which would hint at the names). ``salt``,
    a secret the annotators do not have, keeps them from recomputing the ids from the run
    id, the seed and a guessed model name."""
    models = sorted(set(items["model"].to_list()), key=lambda m: _digest(salt, seed, run_id, m))
    pseudonym = {m: f"W{i + 1}" for i, m in enumerate(models)}
    ids = ["I" + _digest(salt, run_id, seed, p, m, s)[:8] for p, m, s in
           items.select("prompt_id", "model", "sample_index").iter_rows()]
    if len(set(ids)) != len(ids):
        raise ValueError("item ids collide; choose another seed")
    return ids, {v: k for k, v in pseudonym.items()}


def mask_names(text: str, names: list[str]) -> str:
    """``text`` with every name in ``names`` (case-insensitive, longest first) masked."""
    for name in sorted({n for n in names if n}, key=len, reverse=True):
        text = re.sub(re.escape(name), MASK, text, flags=re.IGNORECASE)
    return text


def _env() -> Environment:
    return Environment(loader=PackageLoader("essaybench.bench.spot", "templates"),
                       autoescape=select_autoescape(default=True, default_for_string=True))


def write_pack(items: pl.DataFrame, essays: pl.DataFrame, rubric: Rubric, *, run_id: str,
               judge: str, seed: int, folder: Path, key_path: Path,
               hidden: list[str] | None = None, salt: str = "") -> PackKey:
    """Write ``pack.csv`` and ``form.html`` into ``folder`` and the key to ``key_path``.

    ``items`` come from :func:`~essaybench.bench.spot.sample.select_items`; ``essays``
    (the generate snapshot) supply ``prompt_text`` and ``essay_text``, in which every
    model name of ``essays`` and every name in ``hidden`` (model ids, judges) is masked."""
    texts = essays.select("prompt_id", "model", "sample_index", "prompt_text", "essay_text")
    rows = items.select("prompt_id", "model", "sample_index", "genre").join(
        texts, on=["prompt_id", "model", "sample_index"], how="left", maintain_order="left")
    ids, writers = blind_ids(rows, run_id, seed, salt)
    by_model = {m: w for w, m in writers.items()}
    questions = question_columns(rubric, rows["genre"].to_list())
    header = [*SHOWN, *FILLED_HEAD[1:], *questions, COMMENT]
    names = [*essays["model"].unique().to_list(), *(hidden or [])]
    records = [{"item_id": i, "writer": by_model[r["model"]], "genre": r["genre"],
                "prompt_text": mask_names(r["prompt_text"] or "", names),
                "essay_text": mask_names(r["essay_text"] or "", names)}
               for i, r in zip(ids, rows.iter_rows(named=True), strict=True)]
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "pack.csv").open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=header)
        writer.writeheader()
        writer.writerows(records)
    genres = {g: rubric.genre(g) for g in sorted(set(rows["genre"].to_list()))}
    html = _env().get_template("form.html").render(
        items=records, genres=genres, low=rubric.score_range[0], high=rubric.score_range[1],
        header=[*FILLED_HEAD, *questions, COMMENT])
    (folder / "form.html").write_text(html, encoding="utf-8")
    key = PackKey(run_id=run_id, judge=judge, seed=seed, rubric_id=rubric.id,
                  rubric_version=rubric.version,
                  items={i: {"prompt_id": r["prompt_id"], "model": r["model"],
                             "sample_index": int(r["sample_index"]), "genre": r["genre"]}
                         for i, r in zip(ids, rows.iter_rows(named=True), strict=True)},
                  writers=writers)
    key.write(key_path)
    return key
