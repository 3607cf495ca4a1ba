"""The elbow rule on hand-computed curves."""

from __future__ import annotations

import math

import numpy as np
import pytest

from essaybench.curate.elbow import choose_elbow, chord_distances


def test_obvious_elbow() -> None:
    # x = 0, .25, .5, .75, 1; y = (I - 10) / 90 = 1, 1/9, 1/18, 1/45, 0; chord y = 1 - x.
    # Gaps below the chord: .75 - 1/9, .5 - 1/18, .25 - 1/45; distance = gap / sqrt(2).
    ks, inertias = [1, 2, 3, 4, 5], [100.0, 20.0, 15.0, 12.0, 10.0]
    expected = [0.0, (0.75 - 1 / 9) / math.sqrt(2), (0.5 - 1 / 18) / math.sqrt(2),
                (0.25 - 1 / 45) / math.sqrt(2), 0.0]
    assert chord_distances(ks, inertias) == pytest.approx(expected, abs=1e-12)
    assert choose_elbow(ks, inertias) == 2


def test_elbow_on_uneven_k_spacing() -> None:
    # x = 0, 1/9, 4/9, 1; y = 1, 0.2, 0.1, 0; chord y = 1 - x: gaps 8/9 - .2, 5/9 - .1.
    ks, inertias = [2, 4, 10, 20], [50.0, 18.0, 14.0, 10.0]
    assert chord_distances(ks, inertias)[1] == pytest.approx((8 / 9 - 0.2) / math.sqrt(2))
    assert choose_elbow(ks, inertias) == 4


def test_straight_line_has_no_elbow_and_returns_the_smallest_k() -> None:
    ks, inertias = [2, 4, 6, 8, 10], [10.0, 8.0, 6.0, 4.0, 2.0]
    assert chord_distances(ks, inertias) == pytest.approx([0.0] * 5, abs=1e-12)
    assert choose_elbow(ks, inertias) == 2


def test_flat_and_concave_curves_return_the_smallest_k() -> None:
    assert choose_elbow([3, 5, 7], [4.0, 4.0, 4.0]) == 3
    # Concave: every interior point lies above the chord (negative distance).
    concave = [100.0, 95.0, 80.0, 50.0, 0.0]
    assert all(d <= 0 for d in chord_distances([1, 2, 3, 4, 5], concave))
    assert choose_elbow([1, 2, 3, 4, 5], concave) == 1


def test_two_point_curve_returns_the_first_k() -> None:
    assert chord_distances([3, 7], [5.0, 1.0]) == [0.0, 0.0]
    assert choose_elbow([3, 7], [5.0, 1.0]) == 3


def test_single_point_returns_its_k() -> None:
    assert choose_elbow([4], [12.5]) == 4


def test_non_monotone_noise_counts_only_points_below_the_chord() -> None:
    # y = (I - 10) / 40 = 1, .5, .575, .25, 0 at x = 0, .25, .5, .75, 1; chord 1 - x.
    # Gaps: .25, -.075, 0 -> k = 4.
    assert choose_elbow([2, 4, 6, 8, 10], [50.0, 30.0, 33.0, 20.0, 10.0]) == 4
    # A bump above the chord (k=2: gap -.23) is farther from the chord than the real dip
    # (k=3: gap .1), but it is not an elbow: the rule is signed.
    ks, inertias = [1, 2, 3, 4, 5], [100.0, 98.0, 40.0, 30.0, 0.0]
    distances = chord_distances(ks, inertias)
    assert abs(distances[1]) > abs(distances[2])
    assert choose_elbow(ks, inertias) == 3


def test_a_curve_that_rises_at_the_end() -> None:
    # Last inertia above the first (a bad K-means run): y = 0.5, 0, 1 at x = 0, .5, 1.
    # Chord y = .5 + .5x; at x = .5 the chord is .75, the point 0 lies .75 below it.
    ks, inertias = [1, 2, 3], [5.0, 0.0, 10.0]
    assert chord_distances(ks, inertias)[1] == pytest.approx(0.75 / math.hypot(1, 0.5))
    assert choose_elbow(ks, inertias) == 2


def test_ties_go_to_the_smallest_k() -> None:
    # x = 0, 1/3, 2/3, 1; y = 1, 5/12, 1/12, 0; gaps 2/3 - 5/12 = 1/3 - 1/12 = 1/4.
    ks, inertias = [1, 2, 3, 4], [12.0, 5.0, 1.0, 0.0]
    d = chord_distances(ks, inertias)
    assert d[1] == pytest.approx(d[2])
    assert choose_elbow(ks, inertias) == 2


def test_choice_is_invariant_to_scaling_and_shifting_inertia() -> None:
    rng = np.random.default_rng(3)
    ks = [2, 5, 9, 14, 20, 27, 35]
    for _ in range(20):
        inertias = np.sort(rng.uniform(1, 100, size=len(ks)))[::-1].tolist()
        base = choose_elbow(ks, inertias)
        assert choose_elbow(ks, [3.5 * v + 7 for v in inertias]) == base


def test_numpy_integers_are_accepted() -> None:
    assert choose_elbow(list(np.array([1, 2, 3])), [9.0, 1.0, 0.0]) == 2


@pytest.mark.parametrize(("ks", "inertias", "message"), [
    ([], [], "empty"),
    ([1, 2], [3.0], "2 k values but 1 inertias"),
    ([2, 2, 3], [3.0, 2.0, 1.0], "strictly increasing"),
    ([3, 2], [3.0, 2.0], "strictly increasing"),
    ([0, 1], [3.0, 2.0], "integer >= 1"),
    ([1.5, 2], [3.0, 2.0], "integer >= 1"),
    ([True, 2], [3.0, 2.0], "integer >= 1"),
    ([1, 2], [float("nan"), 2.0], "finite"),
    ([1, 2], [3.0, float("inf")], "finite"),
    ([1, 2], [3.0, -1.0], ">= 0"),
])
def test_invalid_input_raises_a_clear_value_error(
    ks: list[int], inertias: list[float], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        choose_elbow(ks, inertias)
