"""The report's tables: the leaderboard and its groups, differences to the baseline, the
per-model facts of the decision table, and the failures list."""

from __future__ import annotations

import polars as pl
import pytest

from essaybench.bench.aggregate import table5
from essaybench.report.data import load_run
from essaybench.report.tables import diffs_to, failures, leaderboard, model_facts
from essaybench.stats.score_ci import PAIR_SCHEMA
from tests.report.conftest import ReportedRuns


def _judgments(means: dict[str, float]) -> pl.DataFrame:
    return pl.DataFrame([{"judge": "j", "model": m, "prompt_id": "p0", "sample_index": 0,
                          "genre": "narrative", "prompt_set": "open", "status": "ok",
                          "score_weighted": v} for m, v in means.items()])


def _stats(means: dict[str, float], same: set[frozenset[str]]) -> dict[str, pl.DataFrame]:
    """CIs and paired differences as the stats stage writes them; pairs in ``same``
    indistinguishable."""
    cis = pl.DataFrame([{"judge": "j", "model": m, "cell": "overall", "mean": v,
                         "ci_lo": v - 1, "ci_hi": v + 1, "n": 10, "n_prompts": 10}
                        for m, v in means.items()])
    models = sorted(means)
    diffs = pl.DataFrame([{"judge": "j", "cell": "overall", "model_a": a, "model_b": b,
                           "diff": means[a] - means[b], "diff_lo": means[a] - means[b] - 1,
                           "diff_hi": means[a] - means[b] + 1,
                           "indistinguishable": frozenset((a, b)) in same}
                          for i, a in enumerate(models) for b in models[i + 1:]],
                         schema=PAIR_SCHEMA)
    return {"score_ci_weighted": cis, "score_diff_weighted": diffs}


def test_groups_follow_the_ranking_led_by_their_best_model() -> None:
    means = {"a": 80.0, "b": 79.0, "c": 77.0, "d": 60.0}
    # b ties a; c ties b but not a, so c leads a new group that d does not join.
    stats = _stats(means, {frozenset("ab"), frozenset("bc")})
    rows = leaderboard("j", _judgments(means), stats)
    assert [(r.rank, r.model, r.group) for r in rows] == [
        (1, "a", "A"), (2, "b", "A"), (3, "c", "B"), (4, "d", "C")]
    assert (rows[0].lo, rows[0].hi, rows[0].coverage) == (79.0, 81.0, 1.0)
    # Differences to the baseline are model − baseline, whichever way the table holds them.
    diffs = diffs_to("j", "a", [r.model for r in rows], stats)
    assert [(d.model, d.diff, d.lo, d.hi, d.indistinguishable) for d in diffs] == [
        ("b", -1.0, -2.0, 0.0, True), ("c", -3.0, -4.0, -2.0, False),
        ("d", -20.0, -21.0, -19.0, False)]


def test_without_the_stats_stage_the_leaderboard_has_means_and_no_groups() -> None:
    rows = leaderboard("j", _judgments({"a": 50.0, "b": 70.0}), {})
    assert [(r.model, r.mean, r.lo, r.group) for r in rows] == [
        ("b", 70.0, None, ""), ("a", 50.0, None, "")]
    assert diffs_to("j", "b", ["a"], {}) == []


def test_leaderboard_of_a_real_run_is_the_stats_stage_ci(reported_runs: ReportedRuns) -> None:
    data = load_run(reported_runs.store, "r2")
    rows = leaderboard("qwen-judge", data.judgments, data.stats)
    t5 = {r["model"]: r for r in table5(data.judgments).iter_rows(named=True)}
    assert [r.rank for r in rows] == [1, 2, 3]
    means = [r.mean or 0.0 for r in rows]
    assert means == sorted(means, reverse=True)
    for r in rows:
        assert r.mean == pytest.approx(t5[r.model]["overall"])
        assert r.coverage == t5[r.model]["overall:coverage"]
        assert r.lo is not None and r.hi is not None and r.lo <= (r.mean or 0) <= r.hi
        assert r.group


def test_model_facts_count_failures_language_cost_and_latency(
        reported_runs: ReportedRuns) -> None:
    essays = load_run(reported_runs.store, "r2").essays
    facts = {r["model"]: r for r in model_facts(essays).iter_rows(named=True)}
    seek = essays.filter(pl.col("model") == "deepseek-writer")
    failed = seek.filter(pl.col("status") != "ok").height
    assert failed > 0
    assert facts["deepseek-writer"]["failure_rate"] == pytest.approx(failed / seek.height)
    assert facts["gpt-writer"]["off_language_rate"] == 1.0  # it answers in English
    gpt = essays.filter(pl.col("model") == "gpt-writer")
    chars = sum(len("".join(t.split())) for t in gpt["essay_text"].to_list())
    assert facts["gpt-writer"]["cost_per_1k_chars"] == pytest.approx(
        gpt["cost_usd"].sum() / chars * 1000)
    assert facts["gpt-writer"]["latency_s_per_1k_chars"] == pytest.approx(
        gpt["latency_s"].sum() / chars * 1000)
    # cost per 1k (llm.cost_basis): every row's spend over the ok essays' characters
    ok_chars = sum(len("".join(t.split())) for t in seek["essay_text"].drop_nulls())
    assert facts["deepseek-writer"]["cost_per_1k_chars"] == pytest.approx(
        seek["cost_usd"].sum() / ok_chars * 1000)


def test_off_language_essays_are_not_length_compliant_nor_plotted(
        reported_runs: ReportedRuns) -> None:
    """Issue 28: gpt-writer answers in English in r2. Its essays are counted off-language,
    not checked for length (they were "compliant"), and left out of the score–length chart
    and the stats stage's slope, the page says how many."""
    from essaybench.report.labels import labels_for
    from essaybench.report.sections import judge_section
    from essaybench.report.svg import ChartIds

    data = load_run(reported_runs.store, "r2")
    facts = {r["model"]: r for r in model_facts(data.essays).iter_rows(named=True)}
    gpt_ok = data.essays.filter((pl.col("model") == "gpt-writer") & (pl.col("status") == "ok"))
    assert facts["gpt-writer"]["n_off_language"] == gpt_ok.height > 0
    assert facts["gpt-writer"]["n_checked"] == 0
    assert facts["gpt-writer"]["compliance_rate"] is None
    seek = facts["deepseek-writer"]  # writes Chinese
    assert seek["n_checked"] > 0 and seek["compliance_rate"] is not None
    section = judge_section(ChartIds(), data, "qwen-judge", labels_for(data.judgments))
    keys = ["prompt_id", "model", "sample_index"]
    scored = data.judgments.filter((pl.col("status") == "ok")
                                   & pl.col("score_weighted").is_not_null()).join(
        data.essays.select(*keys, "off_language"), on=keys)
    off = scored.filter(pl.col("off_language")).height
    assert off >= scored.filter(pl.col("model") == "gpt-writer").height > 0
    assert section.off_language_points == off
    # the stats stage's slope: fitted on the essays in Chinese only
    [fit] = [r for r in data.stats["length_bias"].to_dicts() if r["genre"] == "all"]
    assert fit["n"] == scored.height - off


def test_failures_list_each_failed_essay_once_with_every_judge_it_missed(
        reported_runs: ReportedRuns) -> None:
    """Issue 28: a failed essay is one row naming the judges that skipped it (not one more
    row per judge); a judgment that failed on an essay that came back is its own row."""
    data = load_run(reported_runs.store, "r2")
    second = data.judgments.with_columns(pl.lit("j2").alias("judge"))
    # j2 also fails to parse the first ok essay's judgment
    first_ok = data.essays.filter(pl.col("status") == "ok").row(0, named=True)
    second = second.with_columns(pl.when(
        (pl.col("prompt_id") == first_ok["prompt_id"]) & (pl.col("model") == first_ok["model"])
        & (pl.col("sample_index") == first_ok["sample_index"]))
        .then(pl.lit("parse_error")).otherwise(pl.col("status")).alias("status"))
    judgments = pl.concat([data.judgments, second])
    listed = failures(data.essays, judgments)
    bad_essays = data.essays.filter(pl.col("status") != "ok")
    assert bad_essays.height > 0
    gen = listed.filter(pl.col("stage") == "generate")
    assert gen.height == bad_essays.height  # once each, not once per judge
    assert set(gen["status"]) == {"api_error"} and set(gen["judges"]) == {"j2, qwen-judge"}
    judged = listed.filter(pl.col("stage") == "judge")
    ok_keys = data.essays.filter(pl.col("status") == "ok").select(
        "prompt_id", "model", "sample_index")
    bad_on_ok = judgments.join(ok_keys, on=["prompt_id", "model", "sample_index"]).filter(
        pl.col("status") != "ok")
    assert judged.height == bad_on_ok.height >= 1
    assert ("j2", first_ok["prompt_id"], "parse_error") in set(
        judged.select("judges", "prompt_id", "status").iter_rows())


def test_cells_without_an_interval_carry_their_reason_to_the_report() -> None:
    """Issue 16: a cell or difference without an interval says why (ci_note/diff_note), and
    the leaderboard, the differences and the Bradley–Terry table and chart show it."""
    from jinja2 import Environment

    from essaybench.report.charts import bradley_terry_chart
    from essaybench.report.svg import ChartIds
    from essaybench.stats.bradley_terry import NOTE_ABOVE, bradley_terry

    means = {"a": 80.0, "b": 70.0}
    stats = _stats(means, set())
    note = "n too small (< 7 prompts)"
    stats["score_ci_weighted"] = stats["score_ci_weighted"].with_columns(
        ci_lo=pl.when(pl.col("model") == "b").then(None).otherwise(pl.col("ci_lo")),
        ci_note=pl.when(pl.col("model") == "b").then(pl.lit(note)))
    stats["score_diff_weighted"] = stats["score_diff_weighted"].with_columns(
        diff_lo=pl.lit(None, pl.Float64), diff_hi=pl.lit(None, pl.Float64),
        indistinguishable=pl.lit(True), diff_note=pl.lit(note))
    rows = leaderboard("j", _judgments(means), stats)
    assert [(r.model, r.note) for r in rows] == [("a", ""), ("b", note)]
    assert [(d.model, d.lo, d.note) for d in diffs_to("j", "a", ["a", "b"], stats)] == [
        ("b", None, note)]
    # Bradley–Terry: a model that wins everything has no rating; the report says so.
    outcomes = pl.DataFrame(
        [(f"p{p}", "top", m, "A") for p in range(4) for m in ("x", "y")]
        + [(f"p{p}", "x", "y", v) for p, v in enumerate("ABAB")],
        schema=["prompt_id", "model_a", "model_b", "verdict"], orient="row")
    ranking = bradley_terry(outcomes, n_boot=50, seed=0).table().select(
        pl.lit("j").alias("judge"), pl.all())
    svg = bradley_terry_chart(ChartIds(), "j", ranking)
    assert svg is not None and "<svg" in svg
    template = Environment(autoescape=True).from_string(
        "{% for b in rows %}{% if b.ci_lo is not none %}[{{ b.ci_lo }}]"
        "{% else %}{{ b.note or '—' }}{% endif %};{% endfor %}")
    text = template.render(rows=ranking.to_dicts())
    assert text.split(";")[0] == NOTE_ABOVE and text.count("[") == 2
