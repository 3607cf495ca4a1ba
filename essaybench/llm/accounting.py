"""Cost, token and latency accounting over LLM calls, per model and stage.

Pure functions over ``CallRecord`` rows (built from ledger rows or ``ChatResult``s).
The rules, so that a report never flatters a model:

- Each call's cost is :mod:`~essaybench.llm.pricing`'s, recorded when it finished: cached
  input, batch and off-peak prices applied. A call priced without a cached-input figure
  from its provider is counted in ``cost_upper_bound`` (``upper_bound_note``), so the
  output says once which figures are upper bounds.
- Skipped calls were never sent: they count as calls and by status, and nowhere else.
- Cost sums the sent calls' recorded costs. One call that produced something billable
  (it succeeded, or reported usage) but has no cost (unknown price, or no usage reported)
  makes the group's cost None, and ``cost_unknown`` says how many: an unknown is never
  summed as zero. Failed calls that reported neither usage nor cost (HTTP errors,
  connection failures, timeouts) have nothing to price: they are left out of the sum and
  counted as ``unmetered``, shown beside the cost. ``spent_usd`` is the same over calls
  sent in this run (ledger hits cost nothing now, but their results were paid for once).
- Latency percentiles cover sent calls with a measured latency, failures included (a
  timeout is latency the run waited through). They use numpy's "linear" method
  (Hyndman & Fan type 7; equal to ``statistics.quantiles(method="inclusive")``).
- Cost per 1,000 characters is :mod:`~essaybench.llm.cost_basis`'s, the report's and the
  alerts': the group's generate spend (billed failures included) over the grid
  characters of its ok essays (None for a group without generate calls). Latency per 1k
  counts Chinese characters (CJK ideographs) of reply text: total latency of the calls
  that returned characters / those characters.
- Extra requests inside a call are counted apart: ``retries`` (re-sent after a transient
  transport failure: the endpoint's health) and ``reasks`` (sent again because the reply
  was empty or broke the answer format: the model's). Over the calls sent in this run and
  recorded ones alike; a call recorded before the two were split counts in
  ``repeats_unknown``, never as zero.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from rich.table import Table

from essaybench.llm.cost_basis import GENERATE, cost_per_1k, usable_chars
from essaybench.llm.pricing import UPPER_BOUND_NOTE
from essaybench.llm.types import CallStatus, ChatResult

GROUP_FIELDS = ("model", "stage")
ALL = "(all)"  # group value when a summary does not split by that field

# Ideographs only (CJK Unified Ideographs, extensions A-I, compatibility, and 〇):
# punctuation, kana and Latin letters are not "characters of output" for a Chinese essay.
_CJK_RE = re.compile(
    "[\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\U00020000-\U0002ee5f\U0002f800-\U0002fa1f\U00030000-\U000323af]")


def count_cjk(text: str | None) -> int:
    """Number of CJK ideographs in ``text`` (0 for None)."""
    return len(_CJK_RE.findall(text)) if text else 0


@dataclass(frozen=True)
class CallRecord:
    """What accounting needs from one logical call."""

    model: str
    stage: str
    status: CallStatus
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    cached_input_tokens: int | None = None  # of input_tokens (None: not reported)
    latency_s: float | None = None
    output_chars: int = 0  # CJK ideographs in the reply text
    from_ledger: bool = False  # served from the ledger: no request in this run
    retries: int | None = 0  # transport retries inside the call (None: not recorded)
    reasks: int | None = 0  # re-asks inside the call (None: not recorded)
    # generate calls: grid characters of the essay when ok (cost_basis.usable_chars)
    usable_chars: int = 0
    batched: bool = False  # answered through a provider's batch API, at its batch price

    @property
    def sent(self) -> bool:
        return self.status is not CallStatus.SKIPPED

    @property
    def unmetered(self) -> bool:
        """Sent, failed, and reported neither usage nor cost: nothing to price."""
        return (self.sent and self.status is not CallStatus.OK and self.cost_usd is None
                and self.input_tokens is None and self.output_tokens is None)

    @classmethod
    def from_result(cls, result: ChatResult) -> CallRecord:
        return cls(model=result.model, stage=result.stage, status=result.status,
                   input_tokens=result.usage.input_tokens,
                   output_tokens=result.usage.output_tokens, cost_usd=result.cost_usd,
                   cached_input_tokens=result.usage.cached_input_tokens,
                   latency_s=result.latency_s, output_chars=count_cjk(result.text),
                   from_ledger=result.from_ledger, retries=result.retries,
                   reasks=result.reasks,
                   usable_chars=usable_chars(result.status.value, result.text)
                   if result.stage == GENERATE else 0, batched=result.batched)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> CallRecord:
        """From a ledger row: this class's field names, where ``response_text`` (or ``text``)
        may stand in for ``output_chars``; no ``retries``/``reasks`` is not recorded."""
        chars = row.get("output_chars")
        text = row.get("response_text") or row.get("text")
        if chars is None:
            chars = count_cjk(text)
        return cls(model=str(row["model"]), stage=str(row.get("stage") or ""),
                   status=CallStatus(row["status"]),
                   input_tokens=_opt_int(row.get("input_tokens")),
                   output_tokens=_opt_int(row.get("output_tokens")),
                   cost_usd=_opt_float(row.get("cost_usd")),
                   cached_input_tokens=_opt_int(row.get("cached_input_tokens")),
                   latency_s=_opt_float(row.get("latency_s")),
                   output_chars=int(chars), from_ledger=bool(row.get("from_ledger") or False),
                   retries=_opt_int(row.get("retries")), reasks=_opt_int(row.get("reasks")),
                   usable_chars=usable_chars(str(row["status"]), text)
                   if row.get("stage") == GENERATE else 0,
                   batched=bool(row.get("batched") or False))


def _opt_int(v: Any) -> int | None:
    return None if v is None else int(v)


def _opt_float(v: Any) -> float | None:
    return None if v is None else float(v)


def records_from_frame(frame: pl.DataFrame) -> list[CallRecord]:
    """CallRecords from a DataFrame of ledger rows (columns as in ``CallRecord.from_row``)."""
    return [CallRecord.from_row(row) for row in frame.iter_rows(named=True)]


@dataclass(frozen=True)
class UsageSummary:
    """Accounting for one group of calls (one model × stage by default)."""

    model: str
    stage: str
    calls: int
    statuses: dict[str, int]  # every CallStatus value, zeros included
    sent: int
    from_ledger: int
    input_tokens: int  # over sent calls that reported usage
    output_tokens: int
    tokens_unknown: int  # sent calls without usage
    cached_input_tokens: int  # of input_tokens, served from the provider's cache (reported)
    cost_usd: float | None
    spent_usd: float | None  # sent in this run (ledger hits excluded)
    cost_unknown: int  # billable calls without a cost: why cost_usd may be None
    # calls with a cost but no cached-input figure: priced at the full input price, an upper
    # bound where the provider discounted cached input (llm.pricing.UPPER_BOUND_NOTE)
    cost_upper_bound: int
    unmetered: int  # failed calls with neither usage nor cost, left out of the cost
    latency_p50_s: float | None
    latency_p95_s: float | None
    retries: int  # transport retries inside the calls (recorded ones)
    reasks: int  # re-asks inside the calls (recorded ones)
    repeats_unknown: int  # sent calls whose retries and re-asks were not recorded
    output_chars: int
    cost_per_kchar_usd: float | None
    latency_per_kchar_s: float | None
    batched: int = 0  # sent calls answered through a batch API (priced at its batch price)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100), numpy "linear" method; None for no values."""
    if not values:
        return None
    return float(np.percentile(np.asarray(values, dtype=float), q, method="linear"))


def _sum_or_none(values: Iterable[float | None]) -> float | None:
    total = 0.0
    for v in values:
        if v is None:
            return None
        total += v
    return total


def summarize_group(model: str, stage: str, records: Sequence[CallRecord]) -> UsageSummary:
    sent = [r for r in records if r.sent]
    statuses = {s.value: 0 for s in CallStatus}
    for r in records:
        statuses[r.status.value] += 1
    metered = [r for r in sent if not r.unmetered]
    cost = _sum_or_none(r.cost_usd for r in metered)
    spent = _sum_or_none(r.cost_usd for r in metered if not r.from_ledger)
    latencies = [r.latency_s for r in sent if r.latency_s is not None]
    chars = sum(r.output_chars for r in records)
    essays = [r for r in metered if r.stage == GENERATE]
    essay_chars = sum(r.usable_chars for r in records if r.stage == GENERATE)
    timed = [r for r in sent if r.output_chars > 0 and r.latency_s is not None]
    timed_chars = sum(r.output_chars for r in timed)
    return UsageSummary(
        model=model, stage=stage, calls=len(records), statuses=statuses, sent=len(sent),
        from_ledger=sum(r.from_ledger for r in records),
        input_tokens=sum(r.input_tokens or 0 for r in sent),
        output_tokens=sum(r.output_tokens or 0 for r in sent),
        tokens_unknown=sum(r.input_tokens is None or r.output_tokens is None for r in sent),
        cached_input_tokens=sum(r.cached_input_tokens or 0 for r in sent),
        cost_usd=cost, spent_usd=spent,
        cost_unknown=sum(r.cost_usd is None for r in metered),
        cost_upper_bound=sum(r.cost_usd is not None and r.cost_usd > 0
                             and r.cached_input_tokens is None for r in metered),
        unmetered=len(sent) - len(metered),
        latency_p50_s=percentile(latencies, 50), latency_p95_s=percentile(latencies, 95),
        retries=sum(r.retries or 0 for r in sent), reasks=sum(r.reasks or 0 for r in sent),
        repeats_unknown=sum(r.retries is None or r.reasks is None for r in sent),
        output_chars=chars,
        cost_per_kchar_usd=cost_per_1k(_sum_or_none(r.cost_usd for r in essays),
                                       essay_chars),
        latency_per_kchar_s=(sum(r.latency_s or 0.0 for r in timed) / timed_chars * 1000
                             if timed_chars else None),
        batched=sum(r.batched for r in sent),
    )


def summarize(records: Iterable[CallRecord],
              by: Sequence[str] = GROUP_FIELDS) -> list[UsageSummary]:
    """One summary per group, sorted by (model, stage); ``by`` ⊆ ("model", "stage")."""
    unknown = set(by) - set(GROUP_FIELDS)
    if unknown:
        raise ValueError(f"can group only by {GROUP_FIELDS}, not {sorted(unknown)}")
    groups: dict[tuple[str, str], list[CallRecord]] = {}
    for r in records:
        key = (r.model if "model" in by else ALL, r.stage if "stage" in by else ALL)
        groups.setdefault(key, []).append(r)
    return [summarize_group(m, s, groups[(m, s)]) for m, s in sorted(groups)]


_FRAME_SCHEMA: dict[str, type[pl.DataType]] = {
    "model": pl.Utf8, "stage": pl.Utf8, "calls": pl.Int64,
    **{f"n_{s.value}": pl.Int64 for s in CallStatus},
    "sent": pl.Int64, "from_ledger": pl.Int64, "input_tokens": pl.Int64,
    "output_tokens": pl.Int64, "tokens_unknown": pl.Int64, "cached_input_tokens": pl.Int64,
    "cost_usd": pl.Float64, "spent_usd": pl.Float64, "cost_unknown": pl.Int64,
    "cost_upper_bound": pl.Int64, "unmetered": pl.Int64,
    "latency_p50_s": pl.Float64, "latency_p95_s": pl.Float64, "retries": pl.Int64,
    "reasks": pl.Int64, "repeats_unknown": pl.Int64, "output_chars": pl.Int64,
    "cost_per_kchar_usd": pl.Float64, "latency_per_kchar_s": pl.Float64,
    "batched": pl.Int64,
}


def summary_frame(summaries: Sequence[UsageSummary]) -> pl.DataFrame:
    """Summaries as a DataFrame: one row per group, one ``n_<status>`` column per status."""
    rows = []
    for s in summaries:
        row = {k: getattr(s, k) for k in _FRAME_SCHEMA if not k.startswith("n_")}
        row.update({f"n_{k}": v for k, v in s.statuses.items()})
        rows.append(row)
    return pl.DataFrame(rows, schema=_FRAME_SCHEMA)


_HEADERS = ("model", "stage", "calls", "ok", "not ok", "retries", "re-asks", "tokens in",
            "cached in", "tokens out", "cost USD", "p50 s", "p95 s", "USD / 1k chars",
            "s / 1k chars")


def _fmt(x: float | None, unit: str = "") -> str:
    return "–" if x is None else f"{x:.4g}{unit}"


def _display_rows(summaries: Sequence[UsageSummary]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for s in summaries:
        failures = ", ".join(f"{k} {v}" for k, v in s.statuses.items()
                             if k != CallStatus.OK.value and v)
        cost = (f"unknown ({s.cost_unknown} unpriced)" if s.cost_usd is None
                else _fmt(s.cost_usd))
        if s.unmetered:
            cost += f" (+{s.unmetered} unmetered)"
        if s.cost_upper_bound:
            cost += f" (≤, {s.cost_upper_bound} uncached-priced)"
        if s.batched:
            cost += f" ({s.batched} batched)"
        tokens_note = f" (+{s.tokens_unknown} unknown)" if s.tokens_unknown else ""
        repeats_note = f" (+{s.repeats_unknown} unknown)" if s.repeats_unknown else ""
        rows.append((s.model, s.stage, str(s.calls), str(s.statuses[CallStatus.OK.value]),
                     failures or "0", f"{s.retries}{repeats_note}", f"{s.reasks}{repeats_note}",
                     f"{s.input_tokens}{tokens_note}", str(s.cached_input_tokens),
                     str(s.output_tokens),
                     cost, _fmt(s.latency_p50_s), _fmt(s.latency_p95_s),
                     _fmt(s.cost_per_kchar_usd), _fmt(s.latency_per_kchar_s)))
    return rows


def upper_bound_note(summaries: Sequence[UsageSummary]) -> str | None:
    """One line saying how many priced calls' costs are upper bounds, or None if none is."""
    bounded = sum(s.cost_upper_bound for s in summaries)
    if not bounded:
        return None
    return (f"Cost marked ≤: {bounded} call{'' if bounded == 1 else 's'} {UPPER_BOUND_NOTE} "
            "(registry price_cached_input_per_mtok; llm.pricing).")


def render_markdown(summaries: Sequence[UsageSummary]) -> str:
    """A GitHub-flavoured Markdown table."""
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
    out = [line(_HEADERS), "|" + "|".join("---" for _ in _HEADERS) + "|"]
    out += [line(row) for row in _display_rows(summaries)]
    return "\n".join(out) + "\n"


def render_rich(summaries: Sequence[UsageSummary], title: str = "LLM calls") -> Table:
    """A rich Table for the terminal."""
    table = Table(title=title)
    for i, header in enumerate(_HEADERS):
        table.add_column(header, justify="left" if i < 2 else "right")
    for row in _display_rows(summaries):
        table.add_row(*row)
    return table
