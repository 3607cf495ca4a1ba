"""The pairwise stage's tables: one row per call, merged one row per pair, and position bias.

Verdicts come in two vocabularies. A *position* verdict is what the judge said about
the order it saw ("A" = the essay shown first). A *model* verdict is about the pair as
designed ("A" = ``model_a`` won). Order ``AB`` shows ``model_a`` first, ``BA`` shows
``model_b`` first, so the two agree in ``AB`` and are mirrored in ``BA``.

Merging the two orders of a pair: both ok and the same model verdict → that verdict;
both ok but different (A vs B, or a win vs a tie) → ``tie`` and ``consistent`` false;
any call not ok → the pair is not ok and has no verdict. Nothing is ever imputed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import polars as pl

from essaybench.core.contracts import Decision
from essaybench.llm.types import CallStatus

Order = Literal["AB", "BA"]
ORDERS: tuple[Order, Order] = ("AB", "BA")
TIE = "tie"

# Identity of a designed comparison; the same in the calls and the merged table.
PAIR_COLUMNS: dict[str, type[pl.DataType] | pl.DataType] = {
    "judge": pl.Utf8,  # registry name of the judge
    "prompt_id": pl.Utf8,
    "sample_index": pl.Int64,  # sample i of model_a against sample i of model_b
    "model_a": pl.Utf8,
    "model_b": pl.Utf8,
    "genre": pl.Utf8,
    "prompt_set": pl.Utf8,
    "pair_id": pl.Utf8,  # content hash of the prompt, both models and both essays
    "rubric_id": pl.Utf8,
    "rubric_fingerprint": pl.Utf8,
    "template_id": pl.Utf8,  # the pairwise prompt file
    "template_fingerprint": pl.Utf8,
}

CALL_SCHEMA: dict[str, type[pl.DataType] | pl.DataType] = {
    **PAIR_COLUMNS,
    "order": pl.Utf8,  # AB: model_a shown first; BA: model_b shown first
    "first_model": pl.Utf8,
    "status": pl.Utf8,
    "error": pl.Utf8,
    "judge_returned_model": pl.Utf8,
    "raw_reply": pl.Utf8,
    "analysis": pl.Utf8,
    "position_verdict": pl.Utf8,  # A (first shown) / B / tie; null unless ok
    "verdict": pl.Utf8,  # A (model_a) / B (model_b) / tie; null unless ok
    "from_ledger": pl.Boolean,
    "call_key": pl.Utf8,
}

_PER_ORDER = ("status", "error", "raw_reply", "analysis", "position_verdict", "verdict",
              "from_ledger", "call_key")

PAIRWISE_SCHEMA: dict[str, type[pl.DataType] | pl.DataType] = {
    **PAIR_COLUMNS,
    "status": pl.Utf8,  # ok only when both orders are ok
    "decision": pl.Utf8,  # "kept" for ok rows, else the status (stage bookkeeping)
    "error": pl.Utf8,
    "verdict": pl.Utf8,  # A (model_a won) / B (model_b won) / tie; null unless ok
    "winner": pl.Utf8,  # the winning model's name, or "tie"; null unless ok
    "consistent": pl.Boolean,  # both orders gave the same verdict; null unless ok
    "judge_returned_model": pl.Utf8,
    **{f"{col}_{order.lower()}": CALL_SCHEMA[col] for order in ORDERS for col in _PER_ORDER},
}

BIAS_SCHEMA: dict[str, type[pl.DataType] | pl.DataType] = {
    "judge": pl.Utf8,
    "pairs_ok": pl.Int64,  # pairs whose two calls are both ok
    "swap_flips": pl.Int64,  # ... of which the two orders disagree
    "swap_flip_rate": pl.Float64,  # swap_flips / pairs_ok; null when no pair is ok
    "calls_ok": pl.Int64,
    "first_wins": pl.Int64,  # ok calls won by the essay shown first
    "second_wins": pl.Int64,
    "ties": pl.Int64,  # ok calls judged a tie (excluded from the rate)
    "first_position_win_rate": pl.Float64,  # first / (first + second); null when none decisive
}


def model_verdict(position_verdict: str, order: Order) -> str:
    """The position verdict of a call in ``order``, in terms of model_a / model_b."""
    if position_verdict == TIE or order == "AB":
        return position_verdict
    return "B" if position_verdict == "A" else "A"


def winner(verdict: str | None, model_a: str, model_b: str) -> str | None:
    if verdict is None:
        return None
    return {"A": model_a, "B": model_b}.get(verdict, TIE)


def calls_frame(rows: Iterable[dict[str, Any]]) -> pl.DataFrame:
    rows = list(rows)
    return pl.DataFrame(rows, schema=CALL_SCHEMA, orient="row") if rows else \
        pl.DataFrame(schema=CALL_SCHEMA)


def _merged_status(ab: dict[str, Any], ba: dict[str, Any]) -> tuple[str, str | None]:
    failed = [(o, c) for o, c in zip(ORDERS, (ab, ba), strict=True)
              if c["status"] != CallStatus.OK.value]
    if not failed:
        return CallStatus.OK.value, None
    if len(failed) == 2 and (ab["status"], ab["error"]) == (ba["status"], ba["error"]):
        return str(ab["status"]), ab["error"]  # e.g. a skipped pair: one reason, said once
    error = "; ".join(f"order {o}: {c['status']}" + (f": {c['error']}" if c["error"] else "")
                      for o, c in failed)
    return str(failed[0][1]["status"]), error


def _merge_pair(ab: dict[str, Any], ba: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {c: ab[c] for c in PAIR_COLUMNS}
    for order, call in zip(ORDERS, (ab, ba), strict=True):
        row.update({f"{col}_{order.lower()}": call[col] for col in _PER_ORDER})
    status, error = _merged_status(ab, ba)
    row.update(status=status, error=error, decision=(
        Decision.KEPT.value if status == CallStatus.OK.value else status),
        judge_returned_model=ab["judge_returned_model"] or ba["judge_returned_model"])
    if status == CallStatus.OK.value:
        consistent = ab["verdict"] == ba["verdict"]
        verdict = ab["verdict"] if consistent else TIE  # a conflict is a tie, by design
        row.update(verdict=verdict, consistent=consistent,
                   winner=winner(verdict, row["model_a"], row["model_b"]))
    return row


def merge_calls(calls: pl.DataFrame) -> pl.DataFrame:
    """One row per (judge, pair): the two orders merged, in order of first appearance."""
    halves: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for call in calls.iter_rows(named=True):
        halves.setdefault((call["judge"], call["pair_id"]), {})[call["order"]] = call
    rows = []
    for (judge, pair_id), by_order in halves.items():
        if set(by_order) != set(ORDERS):
            raise ValueError(f"pair {pair_id} of judge {judge!r} lacks an order: has "
                             f"{sorted(by_order)}")
        rows.append(_merge_pair(by_order["AB"], by_order["BA"]))
    return pl.DataFrame(rows, schema=PAIRWISE_SCHEMA, orient="row") if rows else \
        pl.DataFrame(schema=PAIRWISE_SCHEMA)


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


def position_bias(merged: pl.DataFrame) -> pl.DataFrame:
    """Per judge: swap-flip rate over fully-ok pairs, first-position win rate over ok calls."""
    rows = []
    ok = CallStatus.OK.value
    for judge in merged["judge"].unique(maintain_order=True).to_list():
        mine = merged.filter(pl.col("judge") == judge)
        both = mine.filter((pl.col("status_ab") == ok) & (pl.col("status_ba") == ok))
        flips = int((both["verdict_ab"] != both["verdict_ba"]).sum())
        positions: list[str] = []
        for order in ORDERS:
            suffix = order.lower()
            positions += mine.filter(pl.col(f"status_{suffix}") == ok)[
                f"position_verdict_{suffix}"].to_list()
        first, second = positions.count("A"), positions.count("B")
        rows.append({"judge": judge, "pairs_ok": both.height, "swap_flips": flips,
                     "swap_flip_rate": _rate(flips, both.height), "calls_ok": len(positions),
                     "first_wins": first, "second_wins": second,
                     "ties": positions.count(TIE),
                     "first_position_win_rate": _rate(first, first + second)})
    return pl.DataFrame(rows, schema=BIAS_SCHEMA, orient="row") if rows else \
        pl.DataFrame(schema=BIAS_SCHEMA)
