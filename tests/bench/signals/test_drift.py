"""Output drift: pairing of two weeks' essays, the band from a model's own history
(checked against numpy), and what too little history means."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from essaybench.bench.signals.drift import band_low, drift_pairs, summarise
from essaybench.bench.signals.lexical import rouge_l
from essaybench.bench.signals.params import SignalParams

ESSAYS = ["春天的校园里桃花盛开，同学们在树下读书。", "我的奶奶住在乡下，每年夏天我都去看她。",
          "科技改变生活，手机让人们的联系更方便。", "那一次，我在雨中等了很久，终于等到了他。"]


def week(texts: dict[tuple[str, str], str | None]) -> pl.DataFrame:
    return pl.DataFrame([{"model": m, "prompt_id": p, "sample_index": 0,
                          "status": "ok" if t is not None else "api_error", "essay_text": t}
                         for (m, p), t in texts.items()],
                        schema={"model": pl.Utf8, "prompt_id": pl.Utf8, "sample_index": pl.Int64,
                                "status": pl.Utf8, "essay_text": pl.Utf8})


def test_pairs_are_same_model_same_prompt_both_ok() -> None:
    before = week({("a", "p1"): ESSAYS[0], ("a", "p2"): ESSAYS[1], ("a", "p3"): ESSAYS[2],
                   ("b", "p1"): ESSAYS[3]})
    now = week({("a", "p1"): ESSAYS[0], ("a", "p2"): ESSAYS[3], ("a", "p3"): None,
                ("a", "p4"): ESSAYS[1], ("b", "p1"): ESSAYS[3]})
    pairs = drift_pairs(now, before)
    assert pairs.select("model", "prompt_id").rows() == [("a", "p1"), ("a", "p2"), ("b", "p1")]
    assert pairs["rouge_l"].to_list() == pytest.approx(
        [1.0, rouge_l(ESSAYS[3], ESSAYS[1]), 1.0])


def test_band_low_is_mean_minus_k_sd_or_the_minimum_drop() -> None:
    params = SignalParams(min_history=3, band_k=2.0, band_min_drop=0.01)
    h = [0.31, 0.27, 0.35, 0.30]
    expected = float(np.mean(h) - 2.0 * np.std(h, ddof=1))
    assert band_low(h, params) == pytest.approx(expected)
    steady = [0.5, 0.5, 0.5]  # sd 0: the minimum drop makes the band
    assert band_low(steady, params) == pytest.approx(0.49)
    assert band_low([0.3, 0.3], params) is None  # too little history
    assert band_low(h * 5, SignalParams(min_history=3, history_weeks=4, band_k=2.0,
                                        band_min_drop=0.01)) == pytest.approx(expected)


def test_summary_quartiles_and_verdicts() -> None:
    params = SignalParams(min_history=2, band_k=3.0, band_min_drop=0.05)
    values = [0.1, 0.2, 0.4, 0.8, 0.9]
    pairs = pl.DataFrame({"model": ["a"] * 5 + ["b"] * 5 + ["c"],
                          "prompt_id": [f"p{i}" for i in range(11)], "sample_index": [0] * 11,
                          "ngram_dice": [None] * 11, "rouge_l": values + [0.6] * 5 + [0.9]},
                         schema_overrides={"ngram_dice": pl.Float64})
    got = {s.model: s for s in summarise(pairs, {"a": [0.62, 0.60, 0.61], "b": [0.6, 0.62],
                                                 "c": [0.9]}, params)}
    a = got["a"]
    assert (a.median, a.n_pairs) == (0.4, 5)
    assert (a.q1, a.q3) == pytest.approx(tuple(np.quantile(values, [0.25, 0.75])))
    assert a.verdict == "below" and a.band_low == pytest.approx(0.61 - 0.05)
    assert got["b"].verdict == "within"
    assert got["c"].verdict == "no_band" and "1 of 2 earlier weeks" in got["c"].reason(params)
