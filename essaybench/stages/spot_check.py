"""Weekly spot checks against the store (``essaybench spot-check``; docs/weekly.md).

Files, under ``<store>/spotcheck/<run_id>/``: ``pack/`` (what annotators get: ``pack.csv``,
``form.html``), ``key.json`` (never handed out; ``keys/`` keeps every pack's key, so an
older pack stays importable), and after an import ``annotations.jsonl``
(the mapped-back absolute annotations, as ``essaybench agreement --kind absolute`` reads),
``questions.parquet`` (every sub-question score) and ``agreement.parquet`` (one row of the
weekly trend). Nothing is written to the catalog.
"""

from __future__ import annotations

import csv
import hashlib
import secrets
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from essaybench.bench.rubrics import load_rubric
from essaybench.bench.spot.gold import gold_items, promote
from essaybench.bench.spot.importer import Imported, essay_rows, import_pack
from essaybench.bench.spot.pack import KEY_FILE, PackKey, write_pack
from essaybench.bench.spot.sample import SampleParams, select_items
from essaybench.bench.spot.trend import TREND_FILE, import_agreement, iso_week
from essaybench.core.errors import NotFoundError, UserError
from essaybench.store import Store

READER = "spot-check"


def spot_folder(store: Store, run_id: str) -> Path:
    return store.root / "spotcheck" / run_id


def _judged(store: Store, run_id: str, judge: str | None) -> tuple[pl.DataFrame, str, str]:
    snapshot = store.require_ok_snapshot("judge", run_id, READER, "run the judge stage first")
    table = snapshot.read()
    judges = sorted(set(table["judge"].to_list()))
    chosen = judge if judge is not None else judges[0]
    if chosen not in judges:
        raise UserError(f"{READER}: judge {chosen!r} did not judge run {run_id} "
                        f"(it has {', '.join(judges)})")
    return table.filter(pl.col("judge") == chosen), chosen, iso_week(snapshot.created_at)


def _essays(store: Store, run_id: str) -> pl.DataFrame:
    return store.require_ok_snapshot("generate", run_id, READER).read()


def _salt(store: Store) -> str:
    """The store's secret for blind ids (``spotcheck/.salt``, made once): the same run and
    seed give the same ids in this store, and nobody without the file can recompute them."""
    path = store.root / "spotcheck" / ".salt"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_hex(16), encoding="utf-8")
    return path.read_text(encoding="utf-8").strip()


def _returned_models(*tables: pl.DataFrame) -> list[str]:
    """The model ids the APIs returned (writers' and judge's), to mask them too."""
    columns = ("returned_model", "judge_returned_model")
    return sorted({str(v) for t in tables for c in columns if c in t.columns
                   for v in t[c].drop_nulls().unique().to_list()})


@dataclass(frozen=True)
class PackWritten:
    folder: Path
    key_path: Path
    items: pl.DataFrame  # the selection, with priority and stratum (not in the pack)


def make_pack(store: Store, run_id: str, params: SampleParams, *, judge: str | None = None,
              folder: Path | None = None) -> PackWritten:
    judged, chosen, _ = _judged(store, run_id, judge)
    items = select_items(judged, params)
    if items.is_empty():
        raise UserError(f"{READER}: run {run_id} has no essay its judge scored")
    folder = folder or spot_folder(store, run_id) / "pack"
    key_path = spot_folder(store, run_id) / KEY_FILE
    essays = _essays(store, run_id)
    hidden = [chosen, *_returned_models(judged, essays)]
    key = write_pack(items, essays, load_rubric(), run_id=run_id, judge=chosen,
                     seed=params.seed, folder=folder, key_path=key_path, hidden=hidden,
                     salt=_salt(store))
    # Every pack's key is kept: a pack handed out stays importable after another is made.
    fingerprint = hashlib.sha256(",".join(sorted(key.items)).encode()).hexdigest()[:12]
    key.write(spot_folder(store, run_id) / "keys" / f"{fingerprint}.json")
    return PackWritten(folder, key_path, items)


def _item_ids(filled: Path) -> set[str]:
    try:
        with filled.open(encoding="utf-8-sig", newline="") as fh:
            return {row.get("item_id") or "" for row in csv.DictReader(fh)}
    except (OSError, UnicodeDecodeError, csv.Error):
        return set()  # the importer says what is wrong with the file


def _key(store: Store, run_id: str, filled: Path | None = None) -> PackKey:
    """The key of the pack ``filled`` was made from (the one holding most of its item
    ids), else the newest pack's."""
    path = spot_folder(store, run_id) / KEY_FILE
    if not path.is_file():
        raise NotFoundError(f"{READER}: no pack was made for run {run_id} ({path} missing); "
                            f"run essaybench spot-check --run {run_id} first")
    newest = PackKey.read(path)
    ids = _item_ids(filled) if filled is not None else set()
    keys = [PackKey.read(p) for p in sorted((path.parent / "keys").glob("*.json"))]
    best = max(keys, key=lambda k: len(ids & k.items.keys()), default=newest)
    return best if len(ids & best.items.keys()) > len(ids & newest.items.keys()) else newest


def _alpha(judged: pl.DataFrame) -> float:
    alphas = judged["alpha"].drop_nulls() if "alpha" in judged.columns else pl.Series([])
    return float(alphas[0]) if len(alphas) else load_rubric().alpha_default


def import_filled(store: Store, run_id: str, filled: Path,
                  week: str | None = None) -> tuple[Imported, pl.DataFrame]:
    """Validate and map back ``filled``; write the import's files and its agreement row
    (``week``: the trend's label, default the ISO week the run was judged)."""
    key = _key(store, run_id, filled)
    judged, _, judged_week = _judged(store, run_id, key.judge)
    week = week or judged_week
    rubric = load_rubric()
    if (rubric.id, rubric.version) != (key.rubric_id, key.rubric_version):
        raise UserError(f"{READER}: the pack used rubric {key.rubric_id} v{key.rubric_version}, "
                        f"the project now has {rubric.id} v{rubric.version}")
    folder = spot_folder(store, run_id)
    imported = import_pack(filled, key, rubric, judged, _alpha(judged),
                           folder / "annotations.jsonl")
    row = import_agreement(imported, judged, run_id=run_id, week=week)
    imported.questions.write_parquet(folder / "questions.parquet")
    row.write_parquet(folder / TREND_FILE)
    return imported, row


def promote_accepted(store: Store, run_id: str, gold_dir: Path) -> tuple[Path, int]:
    """The run's accepted items (last import) into the next gold-set version in
    ``gold_dir``."""
    path = spot_folder(store, run_id) / "questions.parquet"
    if not path.is_file():
        raise NotFoundError(f"{READER}: nothing imported for run {run_id}; run "
                            "essaybench spot-check-import first")
    questions = pl.read_parquet(path)
    judged, _, _ = _judged(store, run_id, _key(store, run_id).judge)
    rubric = load_rubric()
    accepted = questions.filter(pl.col("accept"))
    scores = (essay_rows(accepted, rubric, _alpha(judged))
              .group_by("prompt_id", "model", "sample_index").agg(pl.col("score").mean())
              if accepted.height else pl.DataFrame())
    score_of = {(str(p), str(m), int(s)): float(v) for p, m, s, v in
                (scores.select("prompt_id", "model", "sample_index", "score").iter_rows()
                 if scores.height else [])}
    return promote(gold_dir, gold_items(questions, _essays(store, run_id), run_id, score_of))
