"""Issue 28 on the page of a run with two judges: r2 of ``reported_runs`` with a second
judge "j2" beside qwen-judge (its scores a noisy, squeezed copy of qwen-judge's, longer
essays favoured; it did not judge pairwise) and a comparison with a baseline that scored
fewer prompts. The page is made once for the module; each test reads its part.

* the comparison's change and interval come from the same common prompts (A);
* no empty "Judge j2" heading in the pairwise section, the position-bias table headed
  in words (B);
* a failed essay listed once with every judge that missed it (C);
* off-language essays counted apart from length compliance and left out of the chart (D);
* judge agreement per essay and per leaderboard, the disagreement list, and a
  length-controlled leaderboard beside the raw one, checked against scipy (E).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np
import polars as pl
import pytest
from scipy import stats

from essaybench.bench.compare import compare_runs
from essaybench.bench.stats_tables import build_stats_tables, essay_lengths
from essaybench.report.data import RunData, load_run
from essaybench.report.format import number, signed
from essaybench.report.page import render_report
from essaybench.stats.length_control import length_controlled
from tests.helpers import JUDGED_FAMILIES
from tests.report.conftest import STATS, ReportedRuns
from tests.report.test_page import Page, assert_self_contained

KEYS = ["prompt_id", "model", "sample_index"]


@dataclass(frozen=True)
class TwoJudges:
    data: RunData
    html: str
    text: str  # the page's text, whitespace collapsed


def _second_judge(data: RunData) -> pl.DataFrame:
    """j2: 0.5 × qwen-judge's score + 30, plus 2 points per 100 characters of essay and
    seeded noise; the same statuses."""
    rng = np.random.default_rng(28)
    lengths = data.essays.select(*KEYS, pl.Series("n", essay_lengths(data.essays)))
    first = data.judgments.join(lengths, on=KEYS, how="left")
    noise = pl.Series(rng.normal(0, 4, first.height))
    score = (pl.col("score_weighted") * 0.5 + 30 + pl.col("n").fill_null(0) * 0.02
             + noise).round(2)
    return first.with_columns(pl.lit("j2").alias("judge"),
                              pl.when(pl.col("score_weighted").is_not_null()).then(score)
                              .alias("score_weighted")).drop("n")


@pytest.fixture(scope="module")
def two_judges(reported_runs: ReportedRuns) -> TwoJudges:
    data = load_run(reported_runs.store, "r2")
    second = _second_judge(data)
    judgments = pl.concat([data.judgments, second.select(data.judgments.columns)])
    # j2's tables as the stats stage would make them (no pairwise: qwen-judge's only)
    extra = build_stats_tables(second, data.essays, None, STATS, JUDGED_FAMILIES)
    tables = {name: pl.concat([data.stats[name], extra[name]]) if name in extra
              else data.stats[name] for name in data.stats}
    before = reported_runs.judged["r1"].read()
    kept = sorted(set(before["prompt_id"].to_list()))[:9]  # last week scored 9 prompts
    compared = compare_runs(judgments, before.filter(pl.col("prompt_id").is_in(kept)))
    assert data.alerts is not None
    data = replace(data, judgments=judgments, stats=tables,
                   alerts=replace(data.alerts, comparison=compared))
    html = render_report(data)
    return TwoJudges(data, html, assert_self_contained(html).text())


def _section(html: str, section_id: str) -> str:
    return html.split(f'<section id="{section_id}">', 1)[1].split("</section>", 1)[0]


def _rows(html: str, table_id: str, marker: str | None = None) -> list[list[str]]:
    """The cells of each body row of the table with ``id=table_id`` (or the first after
    ``marker``), tags dropped."""
    body = html.split(marker or f'id="{table_id}"', 1)[1].split("</table>", 1)[0]
    return [[" ".join(re.sub(r"<[^>]+>", "", c).split()) for c in
             re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body.split("<tbody>", 1)[1], re.S)]


def test_the_change_and_its_interval_come_from_the_common_prompts(
        two_judges: TwoJudges) -> None:
    assert two_judges.data.alerts is not None
    compared = two_judges.data.alerts.comparison
    assert compared is not None
    assert "over the common prompts" in two_judges.text
    shown = {(r[0], r[1]): r for r in _rows(two_judges.html, "comparison")}
    for c in compared.iter_rows(named=True):
        row = shown[(c["judge"], c["model"])]
        assert row[6] == str(c["n_common_prompts"])
        if c["judge"] == "j2":  # new this week: nothing in common, no change
            assert c["n_common_prompts"] == 0 and row[4] == "—"
            continue
        assert 0 < c["n_common_prompts"] <= 9
        assert c["delta"] == pytest.approx(c["common_mean_now"] - c["common_mean_before"])
        assert row[2:5] == [number(c["common_mean_before"]), number(c["common_mean_now"]),
                            signed(c["delta"])]
        if c["delta_lo"] is not None:
            assert row[5] == f"[{signed(c['delta_lo'])}, {signed(c['delta_hi'])}]"
            assert c["delta_lo"] <= c["delta"] <= c["delta_hi"]
        assert row[7] == f"{number(c['mean_before'])} → {number(c['mean_now'])}"


def test_the_pairwise_section_heads_only_judges_that_compared_pairwise(
        two_judges: TwoJudges) -> None:
    pairwise = _section(two_judges.html, "pairwise")
    assert "<h3>Judge qwen-judge</h3>" in pairwise
    assert "Judge j2" not in pairwise  # j2 judged no pairs: no empty heading
    head = pairwise.split('id="position-bias"', 1)[1].split("</thead>", 1)[0]
    headings = re.findall(r"<th>(.*?)</th>", head)
    assert headings[:4] == ["judge", "pairs judged in both orders",
                            "verdict changed when swapped", "swap-flip rate"]
    assert not any("_" in h for h in headings)  # no raw column names
    [row] = _rows(pairwise, "position-bias")
    bias = two_judges.data.stats["position_bias"].row(0, named=True)
    assert row[0] == "qwen-judge" and row[1] == str(bias["pairs_ok"])
    assert row[3] == f"{bias['swap_flip_rate']:.1%}"


def test_each_failed_essay_is_listed_once_with_the_judges_it_missed(
        two_judges: TwoJudges) -> None:
    essays = two_judges.data.essays
    failed = essays.filter(pl.col("status") != "ok")
    rows = _rows(two_judges.html, "failures-table")
    generate = [r for r in rows if r[0] == "generate"]
    assert len(generate) == failed.height > 0  # not once more per judge
    assert {r[2] for r in generate} == {"not judged by j2, qwen-judge"}
    assert not [r for r in rows if r[0] == "judge" and r[4] == "skipped"]


def test_off_language_essays_are_counted_apart(two_judges: TwoJudges) -> None:
    rows = {r[0]: r for r in _rows(two_judges.html, "compliance-table")}
    gpt = two_judges.data.essays.filter((pl.col("model") == "gpt-writer")
                                        & (pl.col("status") == "ok"))
    # checked 0 (was every essay), compliant —, off-language counted
    assert rows["gpt-writer"][2] == "0" and rows["gpt-writer"][3] == "—"
    assert rows["gpt-writer"][7] == str(gpt.height)
    length = _section(two_judges.html, "length")
    assert "not written in Chinese left out of the chart and the fit" in length


def test_agreement_per_essay_and_per_leaderboard_is_scipys(two_judges: TwoJudges) -> None:
    judgments = two_judges.data.judgments.filter(pl.col("status") == "ok")
    wide = judgments.pivot(on="judge", index=KEYS, values="score_weighted").drop_nulls()
    x, y = wide["j2"].to_numpy(), wide["qwen-judge"].to_numpy()
    [row] = _rows(two_judges.html, "agreement-table")
    assert row[0] == "j2 · qwen-judge" and row[1] == str(wide.height)
    assert row[2] == number(float(stats.spearmanr(x, y).statistic))
    assert row[3] == number(float(np.mean(np.abs(x - y))))
    means = judgments.group_by("judge", "model").agg(pl.col("score_weighted").mean())
    board = means.pivot(on="judge", index="model", values="score_weighted").sort("model")
    assert row[4] == str(board.height)
    assert row[5] == number(float(stats.spearmanr(board["j2"], board["qwen-judge"]).statistic))
    assert "Judge agreement" in two_judges.text and 'href="#agreement"' in two_judges.html


def test_the_disagreement_list_is_the_largest_percentile_gaps(two_judges: TwoJudges) -> None:
    judgments = two_judges.data.judgments.filter(pl.col("status") == "ok")
    wide = judgments.pivot(on="judge", index=KEYS, values="score_weighted").drop_nulls()
    pct = {j: np.array([stats.percentileofscore(wide[j], v, kind="mean") for v in wide[j]])
           for j in ("j2", "qwen-judge")}
    gaps = np.abs(pct["j2"] - pct["qwen-judge"])
    rows = _rows(two_judges.html, "disagreements")
    assert len(rows) == 10
    assert [r[3] for r in rows] == [number(float(g), 0) for g in sorted(gaps, reverse=True)[:10]]
    i = int(np.argmax(gaps))
    top = wide.row(i, named=True)
    assert rows[0][:2] == [top["prompt_id"], top["model"]]
    assert rows[0][4] == f"{number(top['j2'], 1)} ({number(float(pct['j2'][i]), 0)})"


def test_a_length_controlled_leaderboard_beside_the_raw_one(two_judges: TwoJudges) -> None:
    leaderboard = _section(two_judges.html, "leaderboard")
    for judge in ("qwen-judge", "j2"):
        assert f'<table class="length-controlled" data-judge="{judge}">' in leaderboard
    assert "score − slope × (length − genre mean length)" in leaderboard
    # j2 favours length by construction: its fit finds the slope (2 points / 100 chars)
    data = two_judges.data
    lengths = data.essays.select(*KEYS, pl.Series("length", essay_lengths(data.essays)))
    rows = (data.judgments.filter((pl.col("judge") == "j2") & (pl.col("status") == "ok"))
            .join(lengths, on=KEYS).select("model", "genre", "length",
                                           pl.col("score_weighted").alias("score")))
    fit = length_controlled(rows)
    body = _rows(leaderboard, "", '<table class="length-controlled" data-judge="j2">')
    assert [r[1] for r in body] == fit.models["model"].to_list()
    assert [r[2] for r in body] == [number(v) for v in fit.models["controlled_mean"]]
    raw = rows.drop_nulls().group_by("model").agg(pl.col("score").mean())
    assert {r[1]: r[3] for r in body} == {m: number(v) for m, v in raw.iter_rows()}
    assert fit.left_out > 0 and f"{fit.left_out} scored essay(s) without a length" in leaderboard
    # gpt-writer wrote English only: on the raw board, named as not ranked here
    assert "gpt-writer" not in fit.models["model"].to_list()
    assert "Not ranked here (no scored essay in Chinese): gpt-writer." in " ".join(
        leaderboard.split('data-judge="j2">', 2)[2].split())


def test_the_two_judge_page_escapes_essay_text(two_judges: TwoJudges) -> None:
    for raw in ("<script>alert", "</textarea>", '"onmouseover', "<img src=x"):
        assert raw not in two_judges.html
    # the page's script, the essay index and the pairwise view's (data: the texts are in
    # the chunks)
    assert [t for t, _ in Page(two_judges.html).tags].count("script") == 3
