"""The pairwise view's data: every comparison of the run's pairwise stage (one per judge
and pair), its two essays side by side, the verdict of each order and the analyses. Pure.

Built the way the essay browser is (``browser.py``), so it scales with the run: the page
holds a compact index, one row per comparison, and the judges' analyses and errors go to
chunk files beside the page (``report_files/``, the same ``essaybenchChunk(name, data)``
scripts, named by a hash of their content). The essays' own texts are not repeated: a row
names its two essays by their positions in the essay index, and the page reads them from
the essays' chunks. Everything from the run is put on the page with ``textContent``.

Index (``index``, JSON in a ``<script type="application/json" id="pair-index">``):
the judges and statuses, the chunk file names with the position of each one's first
comparison (``chunk_first``), and the comparisons as one flat list of integers, three per
comparison: ``essay_a`` minus the previous comparison's ``essay_a``, ``essay_b`` minus
``essay_a`` (positions in the essay index, whose rows name the prompt, the model and the
sample), and ``((judge × len(statuses) + status) × 4 + verdict_ab) × 4 + verdict_ba``,
a verdict in model terms (``bench/pairwise/tables``: order AB shows model_a first, BA shows
model_b first) coded 0 (model_a better), 1 (model_b better), 2 (tie) or 3 (that order's
call is not ok). Consistency and the merged verdict follow from the two, as the stage
merges them: both ok and equal → that verdict; both ok and different → position-
inconsistent, a tie. At the paper's scale with every pair of 15 writers and 2 judges
(152,880 comparisons) that is ~1.2 MB where one JSON array per comparison took 5 MB.
A comparison whose essays are not both in the essay index (none, when the page is made
from one run's snapshots) is left out and counted (``missing``). A chunk holds, per
comparison, each order's status, position verdict, analysis and error (and the raw reply
of a call that did not parse), and the comparison's error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from essaybench.report.browser import CHUNK_BYTES, Chunk, chunk_file, essay_id

__all__ = ["PAIRS_PER_PAGE", "PairsView", "pairs_data"]

PAIRS_PER_PAGE = 20  # comparisons listed at a time
VERDICT_CODES = {"A": 0, "B": 1, "tie": 2}
NOT_OK = 3  # that order's call gave no verdict
ORDERS = ("ab", "ba")


@dataclass(frozen=True)
class PairsView:
    """What the page embeds (``index``) and the files beside it (``chunks``)."""

    index: dict[str, Any]
    chunks: list[Chunk]
    n_pairs: int  # in the index
    n_inconsistent: int
    options: dict[str, list[str]]  # "pair" → "a vs b", "judge" → judges, "status"


def _code(verdict: str | None) -> int:
    return NOT_OK if verdict is None else VERDICT_CODES[verdict]


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
    return chunk_file({"first": first, "pairs": pairs}, first, len(pairs))


def pairs_data(pairwise: pl.DataFrame, essay_ids: list[str], *,
               chunk_bytes: int = CHUNK_BYTES) -> PairsView:
    """The index and chunks of ``pairwise`` (the stage's merged table) over the essays of
    the essay index, whose ids in its order are ``essay_ids``. Comparisons are listed in
    the order of their first essay in the essay index (prompt order), then judge."""
    at = {e: i for i, e in enumerate(essay_ids)}
    judges = sorted(set(pairwise["judge"].to_list()))
    statuses = sorted(set(pairwise["status"].to_list()))
    judge_at = {j: i for i, j in enumerate(judges)}
    status_at = {s: i for i, s in enumerate(statuses)}
    keyed: list[tuple[int, int, str, dict[str, Any]]] = []
    missing = 0
    for r in pairwise.iter_rows(named=True):
        a = at.get(essay_id(r["prompt_id"], r["model_a"], r["sample_index"]))
        b = at.get(essay_id(r["prompt_id"], r["model_b"], r["sample_index"]))
        if a is None or b is None:
            missing += 1
            continue
        keyed.append((a, b, r["judge"], r))
    keyed.sort(key=lambda k: k[:3])
    flat: list[int] = []
    chunks: list[Chunk] = []
    chunk_first: list[int] = []
    pending: list[dict[str, Any]] = []
    pending_bytes = previous = inconsistent = 0
    names: set[tuple[str, str]] = set()
    for n, (a, b, judge, r) in enumerate(keyed):
        ab, ba = _code(r["verdict_ab"]), _code(r["verdict_ba"])
        flat += [a - previous, b - a,
                 ((judge_at[judge] * len(statuses) + status_at[r["status"]]) * 4 + ab) * 4 + ba]
        previous = a
        inconsistent += r["status"] == "ok" and ab != ba
        names.add((r["model_a"], r["model_b"]))
        if not pending:
            chunk_first.append(n)
        detail: dict[str, Any] = {"ab": _order(r, "ab"), "ba": _order(r, "ba")}
        if r["error"] is not None:
            detail["error"] = r["error"]
        pending.append(detail)
        pending_bytes += 200 + sum(3 * len(r[f"{c}_{o}"] or "") for o in ORDERS
                                   for c in ("analysis", "error"))
        if pending_bytes >= chunk_bytes:
            chunks.append(_chunk(pending, n + 1 - len(pending)))
            pending, pending_bytes = [], 0
    if pending:
        chunks.append(_chunk(pending, len(keyed) - len(pending)))
    index = {"version": 2, "per_page": PAIRS_PER_PAGE, "judges": judges,
             "statuses": statuses, "chunks": [c.name for c in chunks],
             "chunk_first": chunk_first, "pairs": flat, "missing": missing}
    return PairsView(index, chunks, len(keyed), inconsistent,
                     {"pair": sorted(f"{a} vs {b}" for a, b in names), "judge": judges,
                      "status": statuses})
