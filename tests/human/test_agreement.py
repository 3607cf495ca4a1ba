"""Agreement statistics against textbook formulas written out here."""

from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from essaybench.human.agreement import (
    agreement_table,
    annotator_pairs,
    exact_agreement,
    fleiss_kappa,
    fleiss_kappa_long,
    kendall,
    rater_agreement,
    spearman,
    weighted_kappa,
    within_one,
)

# Fleiss (1971) as tabulated on Wikipedia: 10 subjects, 14 raters, 5 categories, κ = 0.210.
WIKI_COUNTS = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0],
               [2, 2, 8, 1, 1], [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2],
               [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]


def labels_from_counts(counts: list[list[int]]) -> list[list[str]]:
    return [[f"c{j}" for j, n in enumerate(row) for _ in range(n)] for row in counts]


def textbook_fleiss(labels: list[list[str]]) -> float:
    categories = sorted({c for row in labels for c in row})
    n = len(labels[0])
    counts = np.array([[row.count(c) for c in categories] for row in labels], dtype=float)
    p_i = (np.sum(counts ** 2, axis=1) - n) / (n * (n - 1))
    p_j = counts.sum(axis=0) / counts.sum()
    p_bar, p_e = p_i.mean(), np.sum(p_j ** 2)
    return float((p_bar - p_e) / (1 - p_e))


def textbook_weighted_kappa(a: list[int], b: list[int], power: int) -> float:
    cats = list(range(min(a + b), max(a + b) + 1))
    k = len(cats)
    observed = np.zeros((k, k))
    for x, y in zip(a, b, strict=True):
        observed[cats.index(x), cats.index(y)] += 1
    observed /= observed.sum()
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    w = np.array([[abs(i - j) ** power for j in range(k)] for i in range(k)], dtype=float)
    return float(1 - (w * observed).sum() / (w * expected).sum())


def test_fleiss_matches_published_example() -> None:
    result = fleiss_kappa(labels_from_counts(WIKI_COUNTS))
    assert result.kappa == pytest.approx(0.210, abs=5e-4)
    assert (result.n_items, result.n_raters) == (10, 14)


def test_fleiss_matches_textbook_formula_on_random_labels() -> None:
    rng = np.random.default_rng(3)
    labels = [[str(v) for v in row] for row in rng.choice(["A", "B", "tie"], size=(40, 3),
                                                         p=[0.5, 0.3, 0.2])]
    assert fleiss_kappa(labels).kappa == pytest.approx(textbook_fleiss(labels), abs=1e-12)


def test_fleiss_perfect_agreement_and_bad_shapes() -> None:
    assert fleiss_kappa([["A", "A"], ["B", "B"], ["A", "A"]]).kappa == pytest.approx(1.0)
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa([["A", "A"], ["B"]])
    with pytest.raises(ValueError, match="≥ 2"):
        fleiss_kappa([["A"], ["B"]])


def test_fleiss_long_drops_items_with_another_rater_count() -> None:
    rows = []
    full = [["A", "A", "B"], ["B", "B", "B"], ["tie", "A", "A"], ["A", "B", "tie"]]
    for i, labels in enumerate(full):
        rows += [{"item": f"i{i}", "rater": r, "label": lab} for r, lab in enumerate(labels)]
    rows += [{"item": "short", "rater": 0, "label": "A"}, {"item": "short", "rater": 1,
                                                           "label": "B"}]
    result = fleiss_kappa_long(pl.DataFrame(rows), items=["item"], label="label")
    assert (result.n_items, result.n_raters, result.n_items_dropped) == (4, 3, 1)
    assert result.kappa == pytest.approx(textbook_fleiss(full), abs=1e-12)
    with pytest.raises(ValueError, match="no item has two or more raters"):
        fleiss_kappa_long(pl.DataFrame(rows[:1]), items=["item"], label="label")


def test_weighted_kappa_by_hand_on_tiny_table() -> None:
    a, b = [0, 1, 2, 3, 3, 1], [0, 2, 2, 3, 2, 0]
    # Hand count, linear weights |i-j|/3 cancel: observed Σw·O = 3/6 = 0.5;
    # row margins (1,2,1,2)/6, column margins (2,0,3,1)/6.
    rows, cols = np.array([1, 2, 1, 2]) / 6, np.array([2, 0, 3, 1]) / 6
    expected = sum(rows[i] * cols[j] * abs(i - j) for i in range(4) for j in range(4))
    assert weighted_kappa(a, b, "linear") == pytest.approx(1 - 0.5 / expected, abs=1e-12)
    assert weighted_kappa(a, b, "linear") == pytest.approx(textbook_weighted_kappa(a, b, 1))
    assert weighted_kappa(a, b, "quadratic") == pytest.approx(textbook_weighted_kappa(a, b, 2))


def test_weighted_kappa_keeps_unused_scale_points() -> None:
    # Nobody used 2: 1 vs 3 is still two steps apart on the 1–3 scale.
    a, b = [1, 1, 3, 3, 1], [1, 3, 3, 1, 1]
    assert weighted_kappa(a, b, "linear") == pytest.approx(textbook_weighted_kappa(a, b, 1))
    assert weighted_kappa(a, b, "quadratic") == pytest.approx(textbook_weighted_kappa(a, b, 2))
    assert math.isnan(weighted_kappa([2, 2], [2, 2], "linear"))  # one category: undefined


def test_exact_and_within_one() -> None:
    a, b = [0, 1, 2, 3, 3], [0, 2, 0, 3, 1]
    assert exact_agreement(a, b) == pytest.approx(2 / 5)
    assert within_one(a, b) == pytest.approx(3 / 5)
    with pytest.raises(ValueError, match="equal length"):
        exact_agreement([1, 2], [1])
    with pytest.raises(ValueError, match="finite"):
        within_one([1, float("nan")], [1, 2])


def test_spearman_is_pearson_on_ranks_with_t_test_p() -> None:
    rng = np.random.default_rng(7)
    x = rng.integers(0, 4, 30).astype(float)
    y = x + rng.integers(-1, 2, 30)
    rx, ry = stats.rankdata(x), stats.rankdata(y)
    r = float(np.corrcoef(rx, ry)[0, 1])
    t = r * math.sqrt((30 - 2) / (1 - r * r))
    result = spearman(x, y)
    assert result.statistic == pytest.approx(r, abs=1e-12)
    assert result.p_value == pytest.approx(2 * stats.t.sf(abs(t), 28), rel=1e-9)
    assert result.n == 30
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]).statistic)


def brute_tau_b(x: list[float], y: list[float]) -> float:
    c = d = tx = ty = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        sx, sy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
        if sx == 0 and sy == 0:
            continue
        if sx == 0:
            tx += 1
        elif sy == 0:
            ty += 1
        elif sx == sy:
            c += 1
        else:
            d += 1
    return (c - d) / math.sqrt((c + d + tx) * (c + d + ty))


def test_kendall_tau_b_by_pair_counting_and_exact_p_by_permutation() -> None:
    x, y = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2.0, 1.0, 4.0, 3.0, 6.0, 5.0]
    result = kendall(x, y)
    assert result.statistic == pytest.approx(brute_tau_b(x, y), abs=1e-12)
    taus = [brute_tau_b(x, list(p)) for p in itertools.permutations(y)]
    p_exact = np.mean([abs(t) >= abs(result.statistic) - 1e-12 for t in taus])
    assert result.p_value == pytest.approx(p_exact, abs=1e-9)
    with_ties = [0.0, 1.0, 1.0, 2.0, 3.0, 3.0, 0.0], [1.0, 1.0, 2.0, 2.0, 3.0, 2.0, 0.0]
    assert kendall(*with_ties).statistic == pytest.approx(brute_tau_b(*with_ties), abs=1e-12)


def test_agreement_table_per_group_then_overall() -> None:
    df = pl.DataFrame({"m": ["x"] * 4 + ["y"] * 4,
                       "a": [0, 1, 2, 3, 3, 2, 1, None],
                       "b": [0, 1, 3, 3, 1, 2, 2, 0]})
    table = agreement_table(df, "a", "b", by="m")
    assert table["group"].to_list() == ["x", "y", "overall"]
    assert table["n"].to_list() == [4, 3, 7]  # the null score is left out
    overall = table.row(2, named=True)
    a, b = [0, 1, 2, 3, 3, 2, 1], [0, 1, 3, 3, 1, 2, 2]
    assert overall["exact"] == pytest.approx(4 / 7)
    assert overall["within_one"] == pytest.approx(6 / 7)
    assert overall["kappa_quadratic"] == pytest.approx(textbook_weighted_kappa(a, b, 2))
    assert overall["kappa"] == pytest.approx(textbook_kappa(a, b), abs=1e-12)
    assert rater_agreement(a, b).spearman.statistic == pytest.approx(overall["spearman"])
    with pytest.raises(ValueError, match="missing column"):
        agreement_table(df, "a", "c")


def textbook_kappa(a: list[int], b: list[int]) -> float:
    """Cohen's unweighted κ = (p_o − p_e) / (1 − p_e) from the marginal shares."""
    n = len(a)
    p_o = sum(x == y for x, y in zip(a, b, strict=True)) / n
    p_e = sum((a.count(c) / n) * (b.count(c) / n) for c in set(a) | set(b))
    return (p_o - p_e) / (1 - p_e)


def test_unweighted_kappa_by_hand_and_by_sklearn() -> None:
    """Issue 16: the unweighted κ beside the weighted ones; a 0-vs-3 disagreement costs
    as much as a 2-vs-3 one."""
    rng = np.random.default_rng(3)
    a = rng.integers(0, 4, 200).tolist()
    b = [int(np.clip(x + rng.integers(-1, 2), 0, 3)) for x in a]
    result = rater_agreement(a, b)
    assert result.kappa == pytest.approx(textbook_kappa(a, b), abs=1e-12)
    assert result.kappa == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    assert result.kappa < result.kappa_linear < result.kappa_quadratic  # near misses


def test_annotator_pairs_over_shared_items() -> None:
    df = pl.DataFrame({
        "prompt_id": ["p1"] * 6 + ["p2"] * 4,
        "model": ["m1", "m2", "m3"] * 2 + ["m1", "m2"] * 2,
        "annotator": ["zhang"] * 3 + ["li"] * 3 + ["zhang", "zhang", "wang", "wang"],
        "score": [3, 2, 0, 3, 1, 1, 2, 2, 2, 1]})
    table = annotator_pairs(df)
    assert table["group"].to_list() == ["li vs zhang", "wang vs zhang"]
    li, zhang = [3, 1, 1], [3, 2, 0]  # p1, models m1..m3
    row = table.row(0, named=True)
    assert row["n"] == 3
    assert row["exact"] == pytest.approx(1 / 3)
    assert row["kappa_linear"] == pytest.approx(textbook_weighted_kappa(li, zhang, 1))
    assert table.row(1, named=True)["exact"] == pytest.approx(1 / 2)
    with pytest.raises(ValueError, match="no item was scored by two"):
        annotator_pairs(df.filter(pl.col("annotator") == "li"))
