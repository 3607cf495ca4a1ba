from __future__ import annotations

import random
import statistics

import polars as pl
import pytest
from rich.console import Console

from essaybench.llm.accounting import (
    ALL,
    CallRecord,
    count_cjk,
    percentile,
    records_from_frame,
    render_markdown,
    render_rich,
    summarize,
    summary_frame,
)
from essaybench.llm.types import CallStatus, ChatResult, Usage

OK, SKIP, PARSE, API = (CallStatus.OK, CallStatus.SKIPPED, CallStatus.PARSE_ERROR,
                        CallStatus.API_ERROR)


def rec(status: CallStatus = OK, *, model: str = "a", stage: str = "generate",
        tin: int | None = 100, tout: int | None = 50, cost: float | None = 0.001,
        lat: float | None = 1.0, chars: int = 0, cached: bool = False,
        retries: int | None = 0, reasks: int | None = 0) -> CallRecord:
    return CallRecord(model=model, stage=stage, status=status, input_tokens=tin,
                      output_tokens=tout, cost_usd=cost, latency_s=lat, output_chars=chars,
                      from_ledger=cached, retries=retries, reasks=reasks,
                      usable_chars=chars if status is OK else 0)  # as if its grid count


def test_count_cjk_counts_ideographs_only() -> None:
    assert count_cjk("你好，world！") == 2
    assert count_cjk("〇一二三") == 4  # 〇 is an ideograph
    assert count_cjk("「」。、？！：；——……") == 0  # full-width punctuation
    assert count_cjk("カタカナ ひらがな 한글 abc 123") == 0
    assert count_cjk("𠀀𪚥") == 2  # extension B, outside the BMP
    assert count_cjk("") == 0 and count_cjk(None) == 0


def test_percentiles_match_hand_computation_and_statistics() -> None:
    # Linear interpolation at (n-1)·q: p95 of [1,2,3,4,10] sits 0.8 of the way from 4 to 10.
    assert percentile([10, 1, 4, 2, 3], 50) == 3.0
    assert percentile([10, 1, 4, 2, 3], 95) == pytest.approx(8.8)
    assert percentile([7.0], 95) == 7.0
    assert percentile([], 50) is None
    rng = random.Random(0)
    for n in (2, 3, 10, 37):
        xs = [rng.expovariate(1.0) for _ in range(n)]
        cuts = statistics.quantiles(xs, n=20, method="inclusive")
        assert percentile(xs, 50) == pytest.approx(cuts[9])
        assert percentile(xs, 95) == pytest.approx(cuts[18])


def test_one_group_by_hand() -> None:
    records = [
        rec(lat=1.0, chars=400, cost=0.001),
        rec(lat=2.0, chars=600, cost=0.002),
        rec(PARSE, lat=3.0, chars=0, cost=0.0005),
        rec(API, tin=None, tout=None, lat=10.0, cost=0.0),
        rec(lat=4.0, chars=1000, cost=0.0015, cached=True),
        rec(SKIP, tin=None, tout=None, cost=None, lat=None),
    ]
    [s] = summarize(records)
    assert (s.model, s.stage, s.calls, s.sent, s.from_ledger) == ("a", "generate", 6, 5, 1)
    assert s.statuses == {"ok": 3, "parse_error": 1, "api_error": 1, "refused": 0,
                          "truncated": 0, "skipped": 1}
    assert (s.input_tokens, s.output_tokens, s.tokens_unknown) == (400, 200, 1)
    assert s.cost_usd == pytest.approx(0.005)
    assert s.spent_usd == pytest.approx(0.0035)  # the ledger hit cost nothing this run
    assert s.cost_unknown == 0 and s.unmetered == 0  # the skipped call was never sent
    assert s.latency_p50_s == pytest.approx(3.0)  # over [1, 2, 3, 10, 4]
    assert s.latency_p95_s == pytest.approx(4 + 0.8 * 6)
    assert s.output_chars == 2000
    assert s.cost_per_kchar_usd == pytest.approx(0.005 / 2000 * 1000)
    # Only calls that returned characters: (1 + 2 + 4) s for 2,000 characters.
    assert s.latency_per_kchar_s == pytest.approx(7.0 / 2000 * 1000)


def test_unknown_cost_is_never_summed_as_zero() -> None:
    [s] = summarize([rec(cost=0.01, chars=100), rec(cost=None, chars=100)])
    assert s.cost_usd is None and s.spent_usd is None and s.cost_unknown == 1
    assert s.cost_per_kchar_usd is None
    [cached_only_unknown] = summarize([rec(cost=0.01), rec(cost=None, cached=True)])
    assert cached_only_unknown.cost_usd is None
    assert cached_only_unknown.spent_usd == pytest.approx(0.01)
    # A success without usage, or a failure that reported usage, was billed at an unknown cost.
    for billed in (rec(OK, tin=None, tout=None, cost=None), rec(PARSE, cost=None)):
        [s] = summarize([rec(cost=0.01), billed])
        assert s.cost_usd is None and s.cost_unknown == 1 and s.unmetered == 0


def test_failures_without_usage_are_unmetered_not_unknown() -> None:
    records = [rec(cost=0.01, chars=100),
               rec(API, tin=None, tout=None, cost=None, lat=30.0),  # e.g. a timeout
               rec(SKIP, tin=None, tout=None, cost=None, lat=None)]
    [s] = summarize(records)
    assert s.cost_usd == pytest.approx(0.01) and s.cost_unknown == 0
    assert s.unmetered == 1 and s.tokens_unknown == 1
    assert s.latency_p50_s == pytest.approx(15.5)  # (1 + 30) / 2: the failure's wait counts
    assert "0.01 (+1 unmetered)" in render_markdown([s])


def test_groups_without_sent_calls_or_characters() -> None:
    [s] = summarize([rec(SKIP, cost=None, lat=None)])
    assert s.sent == 0 and s.cost_usd == 0.0 and s.latency_p50_s is None
    assert s.cost_per_kchar_usd is None and s.latency_per_kchar_s is None
    assert summarize([]) == []


def test_grouping_and_order() -> None:
    records = [rec(model="b", stage="judge"), rec(model="a", stage="judge"),
               rec(model="b", stage="generate"), rec(model="a", stage="judge", lat=3.0)]
    keys = [(s.model, s.stage, s.calls) for s in summarize(records)]
    assert keys == [("a", "judge", 2), ("b", "generate", 1), ("b", "judge", 1)]
    by_model = summarize(records, by=("model",))
    assert [(s.model, s.stage, s.calls) for s in by_model] == [("a", ALL, 2), ("b", ALL, 2)]
    assert by_model[0].latency_p50_s == pytest.approx(2.0)
    [total] = summarize(records, by=())
    assert total.calls == 4 and total.cost_usd == pytest.approx(0.004)
    with pytest.raises(ValueError, match="group"):
        summarize(records, by=("tag",))


def test_records_from_results_and_ledger_rows() -> None:
    result = ChatResult(key="k", model="a", status=OK, text="春天来了。Spring!",
                        usage=Usage(12, 7), latency_s=0.5, cost_usd=0.25, stage="judge",
                        from_ledger=True)
    r = CallRecord.from_result(result)
    assert r == CallRecord(model="a", stage="judge", status=OK, input_tokens=12,
                           output_tokens=7, cost_usd=0.25, latency_s=0.5, output_chars=4,
                           from_ledger=True)
    frame = pl.DataFrame({
        "model": ["a", "b"], "stage": ["judge", None], "status": ["ok", "skipped"],
        "input_tokens": [12, None], "output_tokens": [7, None], "cost_usd": [0.25, None],
        "latency_s": [0.5, None], "response_text": ["春天来了。Spring!", None],
    })
    rows = records_from_frame(frame)
    assert rows[0] == CallRecord(model="a", stage="judge", status=OK, input_tokens=12,
                                 output_tokens=7, cost_usd=0.25, latency_s=0.5,
                                 output_chars=4, retries=None, reasks=None)
    assert rows[1].status is SKIP and rows[1].stage == "" and rows[1].output_chars == 0
    with pytest.raises(ValueError):
        CallRecord.from_row({"model": "a", "status": "exploded"})


def test_summary_frame() -> None:
    frame = summary_frame(summarize([rec(chars=500), rec(PARSE, cost=None),
                                     rec(model="b", cost=0.5, chars=1000)]))
    assert frame["model"].to_list() == ["a", "b"]
    assert frame["n_ok"].to_list() == [1, 1] and frame["n_parse_error"].to_list() == [1, 0]
    assert frame["cost_usd"].to_list() == [None, 0.5]
    assert frame["cost_per_kchar_usd"].to_list() == [None, pytest.approx(0.5)]
    assert frame.schema["n_skipped"] == pl.Int64
    empty = summary_frame([])
    assert empty.height == 0 and empty.columns == frame.columns


def test_renderers_show_unknown_costs_and_failures() -> None:
    summaries = summarize([rec(chars=500), rec(PARSE, cost=None),
                           rec(model="b|x", cost=0.5, chars=1000, lat=2.0)])
    md = render_markdown(summaries)
    lines = md.strip().splitlines()
    assert lines[0].startswith("| model | stage | calls |")
    assert len(lines) == 4
    assert "unknown (1 unpriced)" in lines[2] and "parse_error 1" in lines[2]
    assert "b\\|x" in lines[3] and "| 0.5 |" in lines[3]
    console = Console(record=True, width=250)
    console.print(render_rich(summaries))
    text = console.export_text()
    assert "unknown (1 unpriced)" in text and "parse_error 1" in text


def test_reasks_are_counted_apart_from_transport_retries() -> None:
    # A re-ask is the model's reply failing the answer format; a retry is the transport
    # (429, 5xx, timeouts). Rows of ledgers written before the split count as unknown.
    records = [rec(retries=2, reasks=0), rec(PARSE, retries=0, reasks=2, cost=None),
               rec(retries=1, reasks=1, cached=True), rec(retries=None, reasks=None),
               rec(SKIP, retries=0, reasks=0, tin=None, tout=None, cost=None, lat=None)]
    (s,) = summarize(records)
    assert (s.retries, s.reasks, s.repeats_unknown) == (3, 3, 1)
    row = summary_frame([s]).row(0, named=True)
    assert (row["retries"], row["reasks"], row["repeats_unknown"]) == (3, 3, 1)
    lines = render_markdown([s]).strip().splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    cells = dict(zip(header, (c.strip() for c in lines[2].strip("|").split("|")), strict=True))
    assert cells["retries"] == "3 (+1 unknown)" and cells["re-asks"] == "3 (+1 unknown)"
    ledger_row = {"model": "a", "stage": "judge", "status": "ok", "retries": 1, "reasks": 2}
    assert (CallRecord.from_row(ledger_row).retries, CallRecord.from_row(ledger_row).reasks) \
        == (1, 2)
    old = CallRecord.from_row({"model": "a", "stage": "judge", "status": "ok"})
    assert (old.retries, old.reasks) == (None, None)
    result = ChatResult(key="k", model="a", status=OK, attempts=4, retries=2, reasks=1)
    assert (CallRecord.from_result(result).retries, CallRecord.from_result(result).reasks) \
        == (2, 1)


def test_cost_per_1k_is_all_generate_spend_over_usable_essay_characters() -> None:
    """llm.cost_basis: a truncated essay was billed (its spend counts) but is not usable
    (its characters do not); a group without generate calls has no such figure."""
    truncated = CallRecord(model="a", stage="generate", status=CallStatus.TRUNCATED,
                           input_tokens=100, output_tokens=50, cost_usd=0.003,
                           latency_s=1.0, output_chars=300)
    [s] = summarize([rec(cost=0.001, chars=500), truncated])
    assert s.cost_per_kchar_usd == pytest.approx(0.004 / 500 * 1000)
    [j] = summarize([rec(stage="judge", cost=0.001, chars=500)])
    assert j.cost_per_kchar_usd is None
    row = CallRecord.from_row({"model": "a", "stage": "generate", "status": "ok",
                               "cost_usd": 0.001, "response_text": "春天 来了。Hi"})
    assert row.usable_chars == 7  # grid count: every non-space character
