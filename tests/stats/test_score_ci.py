"""Table 5 CIs: means equal aggregate.table5, CIs equal a naive prompt-resampling loop."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats

from essaybench.bench.aggregate import table5
from essaybench.bench.judge.judgments import JUDGMENT_SCHEMA
from essaybench.stats.cluster_t import MIN_PROMPTS, NOTE_CONSTANT_DIFF, NOTE_TOO_FEW
from essaybench.stats.score_ci import SMALL_CELL_CAVEAT, SMALL_CELL_PROMPTS, score_cis

GENRES = [("argumentative", "open"), ("narrative", "constrained"), ("expository", "open")]


def _judgments(seed: int = 0, n_prompts: int = 24) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows: list[dict[str, object]] = []
    quality = {"m-a": 70.0, "m-b": 72.0, "m-c": 65.0}
    for p in range(n_prompts):
        genre, pset = GENRES[p % len(GENRES)]
        difficulty = rng.normal(0, 6)
        for judge in ("j1", "j2"):
            for model, q in quality.items():
                for s in range(int(rng.integers(1, 4))):  # unequal samples per prompt
                    status = "ok" if rng.random() > 0.15 else str(
                        rng.choice(["parse_error", "api_error", "refused"]))
                    value = q + difficulty + rng.normal(0, 4)
                    rows.append({
                        "prompt_id": f"p{p:02d}", "model": model, "sample_index": s,
                        "genre": genre, "prompt_set": pset, "judge": judge, "status": status,
                        "score_weighted": value if status == "ok" else None,
                        "score_unweighted": value - 1 if status == "ok" else None,
                        "align_total": None})
    return pl.DataFrame(rows).with_columns(
        [pl.lit(None, dtype=dtype).alias(name) for name, dtype in JUDGMENT_SCHEMA.items()
         if name not in rows[0]]).select(list(JUDGMENT_SCHEMA)).cast(
        JUDGMENT_SCHEMA)  # type: ignore[arg-type]


@pytest.mark.parametrize("score", ["score_weighted", "score_unweighted"])
def test_means_and_n_equal_table5(score: str) -> None:
    judgments = _judgments()
    res = score_cis(judgments, score, n_boot=50, seed=1)
    t5 = table5(judgments, score)
    checked = 0
    for row in res.cells.iter_rows(named=True):
        ref = t5.filter((pl.col("judge") == row["judge"]) & (pl.col("model") == row["model"]))
        assert row["mean"] == pytest.approx(ref[row["cell"]][0], rel=1e-12)
        assert row["n"] == ref[f"{row['cell']}:n"][0]
        if row["n_prompts"] >= MIN_PROMPTS:
            assert row["ci_lo"] <= row["mean"] <= row["ci_hi"] and row["ci_note"] is None
        else:
            assert row["ci_lo"] is None and row["ci_note"] == NOTE_TOO_FEW
        checked += 1
    assert checked == 2 * 3 * (1 + len(GENRES))


def test_percentile_cis_equal_naive_prompt_resampling() -> None:
    judgments = _judgments(seed=3)
    n_boot = 200
    res = score_cis(judgments, n_boot=n_boot, seed=7, method="percentile")
    # Judge j1 is processed first, from a fresh default_rng(7).
    ok = judgments.filter((pl.col("judge") == "j1") & (pl.col("status") == "ok"))
    prompts = sorted(set(ok["prompt_id"].to_list()) | set(
        judgments.filter(pl.col("judge") == "j1")["prompt_id"].to_list()))
    idx = np.random.default_rng(7).integers(0, len(prompts), size=(n_boot, len(prompts)))
    scores: dict[tuple[str, str], list[float]] = {}
    for prompt, model, value in ok.select("prompt_id", "model", "score_weighted").iter_rows():
        scores.setdefault((prompt, model), []).append(value)
    for model in ("m-a", "m-c"):
        reps = []
        for b in range(n_boot):
            values: list[float] = []
            for i in idx[b]:
                values += scores.get((prompts[i], model), [])
            reps.append(np.mean(values))
        lo, hi = np.percentile(reps, [2.5, 97.5])
        row = res.cells.filter((pl.col("judge") == "j1") & (pl.col("model") == model)
                               & (pl.col("cell") == "overall"))
        assert row["ci_lo"][0] == pytest.approx(lo, rel=1e-10)
        assert row["ci_hi"][0] == pytest.approx(hi, rel=1e-10)


def test_pairs_flags_follow_difference_cis() -> None:
    judgments = _judgments(seed=5, n_prompts=60)
    res = score_cis(judgments, n_boot=400, seed=2)
    pairs = res.pairs
    assert pairs.height == 2 * 3 * (1 + len(GENRES))  # 3 model pairs per judge and cell
    overall = pairs.filter((pl.col("cell") == "overall") & (pl.col("judge") == "j1"))
    flags = {(a, b): f for a, b, f in overall.select(
        "model_a", "model_b", "indistinguishable").iter_rows()}
    # m-c is 5–7 points behind with a shared prompt effect: clearly distinguishable.
    assert flags[("m-a", "m-c")] is False and flags[("m-b", "m-c")] is False
    for row in pairs.iter_rows(named=True):
        assert row["indistinguishable"] == (row["diff_lo"] <= 0 <= row["diff_hi"])
        means = res.cells.filter((pl.col("judge") == row["judge"])
                                 & (pl.col("cell") == row["cell"]))
        get = dict(zip(means["model"], means["mean"], strict=True))
        assert row["diff"] == pytest.approx(get[row["model_a"]] - get[row["model_b"]])


def test_all_failed_cell_is_null_and_seed_reproducible() -> None:
    judgments = _judgments(seed=2).with_columns(
        pl.when((pl.col("model") == "m-b") & (pl.col("genre") == "narrative"))
        .then(pl.lit("api_error")).otherwise(pl.col("status")).alias("status"))
    a = score_cis(judgments, n_boot=30, seed=4)
    b = score_cis(judgments, n_boot=30, seed=4)
    assert a.cells.equals(b.cells) and a.pairs.equals(b.pairs)
    dead = a.cells.filter((pl.col("model") == "m-b") & (pl.col("cell") == "narrative/constrained"))
    assert dead.height == 2
    assert dead["mean"].null_count() == 2 and dead["ci_lo"].null_count() == 2
    assert (dead["n"] == 0).all()
    with pytest.raises(ValueError, match="level"):
        score_cis(judgments, level=95)


def test_percentile_pair_bounds_equal_difference_ci_on_each_pair() -> None:
    """The pairs' bounds come from one vectorised quantile call: the same numbers, bit for
    bit, as difference_ci on each pair's replicate columns (NaN replicates included)."""
    from essaybench.stats.bootstrap import difference_ci, paired_bootstrap_ratio
    from essaybench.stats.score_ci import _judge_matrices

    judgments = _judgments(seed=7, n_prompts=30).with_columns(  # m-c fails a whole cell
        status=pl.when((pl.col("model") == "m-c") & (pl.col("genre") == "narrative"))
        .then(pl.lit("api_error")).otherwise(pl.col("status")))
    res = score_cis(judgments, n_boot=300, seed=4, method="percentile")
    rng = np.random.default_rng(4)
    cell_names = ["overall", *sorted(f"{g}/{p}" for g, p in GENRES)]
    for judge in ("j1", "j2"):
        rows = judgments.filter(pl.col("judge") == judge)
        sums, counts, _ = _judge_matrices(rows, ["m-a", "m-b", "m-c"], cell_names,
                                          "score_weighted")
        boot = paired_bootstrap_ratio(sums, counts, n_boot=300, seed=rng).boot
        got = res.pairs.filter(pl.col("judge") == judge)
        for row in got.iter_rows(named=True):
            a, b = (["m-a", "m-b", "m-c"].index(row[k]) for k in ("model_a", "model_b"))
            c = cell_names.index(row["cell"])
            lo, hi = difference_ci(boot, a * len(cell_names) + c, b * len(cell_names) + c)
            if row["diff_note"] is None:
                assert (row["diff_lo"], row["diff_hi"]) == (lo, hi)
            else:  # a side with no ok score, or fewer than MIN_PROMPTS prompts
                assert row["diff_lo"] is None and row["diff_hi"] is None
    assert got.filter(pl.col("diff_lo").is_null()).height > 0  # the NaN case was exercised
    assert got.filter(pl.col("diff_lo").is_not_null()).height > 0


def test_a_cell_with_one_prompt_has_a_mean_but_no_interval() -> None:
    one = _judgments(n_prompts=24).filter(pl.col("prompt_id") == "p00")
    res = score_cis(one, n_boot=200, seed=0)
    ok_cells = res.cells.filter(pl.col("n_prompts") == 1)
    assert ok_cells.height > 0
    assert ok_cells["mean"].null_count() == 0
    assert ok_cells["ci_lo"].null_count() == ok_cells.height == ok_cells["ci_hi"].null_count()
    assert (ok_cells["ci_note"] == NOTE_TOO_FEW).all()
    # and no pair of them can be told apart
    assert res.pairs["indistinguishable"].all()
    assert res.pairs["diff_lo"].null_count() == res.pairs.height


def test_judge_matrices_equal_a_row_by_row_loop_bit_for_bit() -> None:
    """Sums are accumulated in row order (np.add.at), so every float equals the plain
    loop's; a row without genre counts in overall only; failed rows count nowhere."""
    from essaybench.core.contracts import OVERALL, cells
    from essaybench.stats.score_ci import _judge_matrices

    judgments = _judgments(seed=9).filter(pl.col("judge") == "j1")
    rng = np.random.default_rng(2)
    judgments = judgments.with_columns(  # scores whose sums depend on the order of adding
        pl.when(pl.col("status") == "ok").then(pl.lit(rng.uniform(10, 100, judgments.height)
                                                      * 1.000001)).alias("score_weighted"),
        pl.when(pl.int_range(pl.len()) % 7 == 0).then(None).otherwise(pl.col("genre"))
        .alias("genre"))
    names = [OVERALL, *cells(judgments)]
    models = sorted(set(judgments["model"].to_list()))
    sums, counts, n_prompts = _judge_matrices(judgments, models, names, "score_weighted")
    prompts = sorted(set(judgments["prompt_id"].to_list()))
    want_sums, want_counts = np.zeros_like(sums), np.zeros_like(counts)
    for row in judgments.iter_rows(named=True):
        if row["status"] != "ok" or row["score_weighted"] is None:
            continue
        p, m = prompts.index(row["prompt_id"]), models.index(row["model"])
        targets = [0] + ([names.index(f"{row['genre']}/{row['prompt_set']}")]
                         if row["genre"] is not None else [])
        for c in targets:
            want_sums[p, m * len(names) + c] += row["score_weighted"]
            want_counts[p, m * len(names) + c] += 1.0
    assert n_prompts == len(prompts)
    np.testing.assert_array_equal(sums, want_sums)
    np.testing.assert_array_equal(counts, want_counts)


def test_default_intervals_are_cluster_t_on_the_raw_rows() -> None:
    """The default method, recomputed from the ok rows of each cell by hand: pooled mean,
    delta-method variance over prompts n/(n−1)·Σ_p (s_p − R·c_p)²/N², t with n−1 df; a
    paired difference uses the per-prompt difference of those terms."""
    from scipy import stats

    judgments = _judgments(seed=4, n_prompts=30)
    res = score_cis(judgments)
    ok = judgments.filter(pl.col("status") == "ok")

    def terms(rows: pl.DataFrame) -> tuple[float, dict[str, float], int]:
        mean = float(rows["score_weighted"].mean())  # type: ignore[arg-type]
        per = rows.group_by("prompt_id").agg(
            (pl.col("score_weighted") - mean).sum().alias("dev"))
        return mean, {p: d / rows.height for p, d in per.iter_rows()}, per.height

    checked = 0
    for judge, cell in (("j1", "overall"), ("j2", "narrative/constrained")):
        mine = ok.filter(pl.col("judge") == judge)
        if cell != "overall":
            mine = mine.filter(pl.format("{}/{}", "genre", "prompt_set") == cell)
        for model in ("m-a", "m-c"):
            mean, z, n = terms(mine.filter(pl.col("model") == model))
            se = np.sqrt(n / (n - 1) * sum(v * v for v in z.values()))
            q = stats.t.ppf(0.975, n - 1)
            row = res.cells.filter((pl.col("judge") == judge) & (pl.col("model") == model)
                                   & (pl.col("cell") == cell)).row(0, named=True)
            assert (row["ci_lo"], row["ci_hi"]) == pytest.approx((mean - q * se, mean + q * se),
                                                                 rel=1e-10)
            assert row["ci_note"] is None and row["n_prompts"] == n >= MIN_PROMPTS
            checked += 1
        ma, za, _ = terms(mine.filter(pl.col("model") == "m-a"))
        mc, zc, _ = terms(mine.filter(pl.col("model") == "m-c"))
        prompts = set(za) | set(zc)
        d = [za.get(p, 0.0) - zc.get(p, 0.0) for p in prompts]
        se = np.sqrt(len(d) / (len(d) - 1) * sum(v * v for v in d))
        q = stats.t.ppf(0.975, len(d) - 1)
        row = res.pairs.filter((pl.col("judge") == judge) & (pl.col("cell") == cell)
                               & (pl.col("model_a") == "m-a") & (pl.col("model_b") == "m-c")
                               ).row(0, named=True)
        assert (row["diff_lo"], row["diff_hi"]) == pytest.approx(
            (ma - mc - q * se, ma - mc + q * se), rel=1e-10)
    assert checked == 4
    # Deterministic: the seed only matters to the percentile bootstrap.
    assert score_cis(judgments, seed=99).cells.equals(res.cells)
    with pytest.raises(ValueError, match="method"):
        score_cis(judgments, method="bca")  # type: ignore[arg-type]


def test_a_constant_non_zero_difference_is_decided() -> None:
    """Issue 25 item 10: a = b + 10 on each of 20 prompts is a decided difference, and
    b = c on each prompt an exact tie; other pairs keep their t-interval."""
    rows: list[dict[str, object]] = []
    rng = np.random.default_rng(3)
    for p in range(20):
        base = 60.0 + rng.normal(0, 8)
        for model, value in (("a", base + 10.0), ("b", base), ("c", base),
                             ("d", base + rng.normal(0, 3))):
            rows.append({"prompt_id": f"p{p:02d}", "model": model, "sample_index": 0,
                         "genre": "argumentative", "prompt_set": "open", "judge": "j",
                         "status": "ok", "score_weighted": value})
    res = score_cis(pl.DataFrame(rows), "score_weighted")
    pairs = {(r["model_a"], r["model_b"]): r
             for r in res.pairs.filter(pl.col("cell") == "overall").iter_rows(named=True)}
    ab = pairs[("a", "b")]
    assert ab["diff"] == pytest.approx(10.0, abs=1e-9)
    assert ab["indistinguishable"] is False
    assert (ab["diff_lo"], ab["diff_hi"]) == pytest.approx((10.0, 10.0), abs=1e-9)
    assert ab["diff_note"] == NOTE_CONSTANT_DIFF
    bc = pairs[("b", "c")]
    assert bc["indistinguishable"] is True and bc["diff"] == pytest.approx(0.0, abs=1e-9)
    # A pair with spread: the paired t-interval (scipy's), unchanged.
    ad = pairs[("a", "d")]
    x = np.array([r["score_weighted"] for r in rows if r["model"] == "a"])
    y = np.array([r["score_weighted"] for r in rows if r["model"] == "d"])
    ci = stats.ttest_rel(x, y).confidence_interval(0.95)
    assert (ad["diff_lo"], ad["diff_hi"]) == pytest.approx((ci.low, ci.high), rel=1e-9)
    assert ad["diff_note"] is None


def test_small_cells_with_an_interval_state_the_heavy_tail_limit() -> None:
    """Issue 25 item 8: a cell mean with an interval over fewer than SMALL_CELL_PROMPTS
    prompts says that it may under-cover when scores have a heavy lower tail; cells without
    an interval, or with enough prompts, do not."""
    res = score_cis(_judgments(n_prompts=SMALL_CELL_PROMPTS + 6), "score_weighted")
    checked = set()
    for row in res.cells.iter_rows(named=True):
        has = row["ci_lo"] is not None
        small = row["n_prompts"] < SMALL_CELL_PROMPTS
        assert row["ci_caveat"] == (SMALL_CELL_CAVEAT if has and small else None), row
        checked.add((has, small))
    assert checked == {(True, True), (True, False)}
    assert "may cover only" in SMALL_CELL_CAVEAT and "heavy lower tail" in SMALL_CELL_CAVEAT
