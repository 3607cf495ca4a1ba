"""The pairwise view's data: every comparison of the run's pairwise stage (one per judge
and pair), its two essays side by side, the verdict of each order and the analyses. Pure.

Built the way the essay browser is (``browser.py``), so it scales with the run: the page
holds a compact index, one row per comparison, and the judges' analyses and errors go to
chunk files beside the page (``report_files/``, the same ``essaybenchChunk(name, data)``
scripts, named by a hash of their content). The essays' own texts are not repeated: a row
names its two essays by their positions in the essay index, and the page reads them from
the essays' chunks. Everything from the run is put on the page with ``textContent``.

Index (``index``, JSON in a ``<script type="application/json" id="pair-index">``):
vocabularies (judges, models, statuses), the chunk file names, and one row per comparison
``[judge, model_a, model_b, essay_a, essay_b, status, verdict, consistent, verdict_ab,
verdict_ba, chunk]``: numbers are positions in the vocabularies, ``essay_a``/``essay_b``
positions in the essay index (null when that essay is not there), verdicts ``0`` (model_a
won), ``1`` (model_b won), ``2`` (tie) or null (that order's call is not ok), in model
terms (``bench/pairwise/tables``: order AB shows model_a first, BA shows model_b first);
``consistent`` is 1 when both orders agreed, 0 when they did not (position-inconsistent:
merged to a tie), null unless both are ok. A chunk holds, per comparison, each order's
status, position verdict, analysis and error (and the raw reply of a call that did not
parse), and the comparison's error.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import polars as pl

from essaybench.report.browser import CHUNK_BYTES, Chunk, essay_id, json_bytes

__all__ = ["PAIRS_PER_PAGE", "PairsView", "pairs_data"]

PAIRS_PER_PAGE = 20  # comparisons listed at a time
VERDICT_CODES = {"A": 0, "B": 1, "tie": 2}
ORDERS = ("ab", "ba")


@dataclass(frozen=True)
class PairsView:
    """What the page embeds (``index``) and the files beside it (``chunks``)."""

    index: dict[str, Any]
    chunks: list[Chunk]
    n_pairs: int
    n_inconsistent: int
    options: dict[str, list[str]]  # "pair" → "a vs b", "judge" → judges, "status"


def _code(verdict: str | None) -> int | None:
    return None if verdict is None else VERDICT_CODES[verdict]


def _order(row: dict[str, Any], order: str) -> dict[str, Any]:
    out: dict[str, Any] = {"status": row[f"status_{order}"]}
    optional = {"position": row[f"position_verdict_{order}"],
                "analysis": row[f"analysis_{order}"], "error": row[f"error_{order}"],
                # the reply itself only where it could not be read as a verdict
                "raw": (row[f"raw_reply_{order}"] if row[f"status_{order}"] == "parse_error"
                        else None)}
    out.update({k: v for k, v in optional.items() if v is not None})
    return out


def _chunk(pairs: list[dict[str, Any]], first: int) -> Chunk:
    data = json_bytes({"first": first, "pairs": pairs})
    name = f"{hashlib.sha256(data).hexdigest()[:16]}.js"
    body = b"".join((f'essaybenchChunk("{name}",'.encode(), data, b");\n"))
    return Chunk(name, body, first, len(pairs))


def pairs_data(pairwise: pl.DataFrame, essay_ids: list[str], *,
               chunk_bytes: int = CHUNK_BYTES) -> PairsView:
    """The index and chunks of ``pairwise`` (the stage's merged table) over the essays of
    the essay index, whose ids in its order are ``essay_ids``. Comparisons are listed in
    the order of their first essay in the essay index (prompt order), then judge."""
    at = {e: i for i, e in enumerate(essay_ids)}
    judges = sorted(set(pairwise["judge"].to_list()))
    statuses = sorted(set(pairwise["status"].to_list()))
    rows = pairwise.to_dicts()
    models = sorted({r["model_a"] for r in rows} | {r["model_b"] for r in rows})

    def essay_at(row: dict[str, Any], model: str) -> int | None:
        return at.get(essay_id(row["prompt_id"], model, row["sample_index"]))

    keyed = [(essay_at(r, r["model_a"]), essay_at(r, r["model_b"]), r) for r in rows]
    keyed.sort(key=lambda k: (k[0] is None, k[0] or 0, k[1] or 0, k[2]["judge"]))
    index_rows: list[list[Any]] = []
    chunks: list[Chunk] = []
    pending: list[dict[str, Any]] = []
    pending_bytes = 0
    for a, b, r in keyed:
        consistent = r["consistent"]
        index_rows.append([
            judges.index(r["judge"]), models.index(r["model_a"]), models.index(r["model_b"]),
            a, b, statuses.index(r["status"]), _code(r["verdict"]),
            None if consistent is None else int(consistent),
            _code(r["verdict_ab"]), _code(r["verdict_ba"]), len(chunks)])
        detail: dict[str, Any] = {"ab": _order(r, "ab"), "ba": _order(r, "ba")}
        if r["error"] is not None:
            detail["error"] = r["error"]
        pending.append(detail)
        pending_bytes += 200 + sum(3 * len(r[f"{c}_{o}"] or "") for o in ORDERS
                                   for c in ("analysis", "error"))
        if pending_bytes >= chunk_bytes:
            chunks.append(_chunk(pending, len(index_rows) - len(pending)))
            pending, pending_bytes = [], 0
    if pending:
        chunks.append(_chunk(pending, len(index_rows) - len(pending)))
    pair_names = sorted({f"{models[r[1]]} vs {models[r[2]]}" for r in index_rows})
    index = {"version": 1, "per_page": PAIRS_PER_PAGE, "judges": judges, "models": models,
             "statuses": statuses, "chunks": [c.name for c in chunks], "pairs": index_rows}
    return PairsView(index, chunks, len(index_rows),
                     sum(1 for r in index_rows if r[7] == 0),
                     {"pair": pair_names, "judge": judges, "status": statuses})

