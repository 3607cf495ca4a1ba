"""Registry prices for cached input, batch and off-peak (issue 26 item 2): validation, and
the one cost rule (llm.pricing) against hand computations."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from essaybench.llm.pricing import OffPeak
from essaybench.llm.registry import ModelSpec, RegistryError, load_registry
from tests.llm.conftest import fake_spec

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _spec(**overrides: Any) -> ModelSpec:
    return fake_spec(price_input_per_mtok=2.0, price_output_per_mtok=8.0, **overrides)


def test_cached_input_is_billed_at_its_own_price() -> None:
    spec = _spec(price_cached_input_per_mtok=0.5)
    # 10,000 input tokens, 6,000 of them cached, 1,000 out
    hand = (4_000 * 2.0 + 6_000 * 0.5 + 1_000 * 8.0) / 1e6
    assert spec.cost_usd(10_000, 1_000, 6_000) == pytest.approx(hand, rel=1e-12)
    # not reported: every input token at the input price (the old rule, an upper bound)
    assert spec.cost_usd(10_000, 1_000) == pytest.approx((10_000 * 2.0 + 8_000) / 1e6)
    # an entry without a cached price bills cached tokens at the input price
    assert _spec().cost_usd(10_000, 1_000, 6_000) == pytest.approx((20_000 + 8_000) / 1e6)


def test_batch_and_off_peak_factors_multiply_the_cost() -> None:
    spec = _spec(price_cached_input_per_mtok=0.5, batch_price_factor=0.5,
                 off_peak={"start": "16:30", "end": "00:30", "price_factor": 0.25})
    base = (4_000 * 2.0 + 6_000 * 0.5 + 1_000 * 8.0) / 1e6
    peak = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    late = datetime(2026, 12, 3, 23, 59, tzinfo=UTC)
    after_midnight = datetime(2026, 12, 4, 0, 29, tzinfo=UTC)
    assert spec.cost_usd(10_000, 1_000, 6_000, finished_at=peak) == pytest.approx(base)
    assert spec.cost_usd(10_000, 1_000, 6_000, batch=True, finished_at=peak) == \
        pytest.approx(base * 0.5)
    for at in (late, after_midnight):
        assert spec.cost_usd(10_000, 1_000, 6_000, finished_at=at) == pytest.approx(base / 4)
    assert spec.cost_usd(10_000, 1_000, 6_000, batch=True, finished_at=late) == \
        pytest.approx(base / 8)
    # the window's end is exclusive, its start inclusive; another time zone is converted
    assert spec.cost_usd(10_000, 1_000, 6_000,
                         finished_at=datetime(2026, 12, 4, 0, 30, tzinfo=UTC)) == \
        pytest.approx(base)
    assert spec.cost_usd(10_000, 1_000, 6_000, finished_at=datetime.fromisoformat(
        "2026-12-04T00:30:00+08:00")) == pytest.approx(base / 4)  # 16:30 UTC


def test_off_peak_periods_by_weekday_first_match_wins() -> None:
    # peak 01:00-04:00 and 06:00-10:00 UTC on weekdays, half price otherwise
    weekdays = ["mon", "tue", "wed", "thu", "fri"]
    spec = _spec(off_peak=[
        {"start": "00:00", "end": "00:00", "price_factor": 0.5, "days": ["sat", "sun"]},
        {"start": "10:00", "end": "01:00", "price_factor": 0.5, "days": weekdays},
        {"start": "04:00", "end": "06:00", "price_factor": 0.5, "days": weekdays}])
    full = spec.cost_usd(1_000_000, 0)
    assert full == pytest.approx(2.0)
    thursday, saturday = datetime(2026, 12, 3, tzinfo=UTC), datetime(2026, 12, 5, tzinfo=UTC)
    for hour, expected in [(0, 1.0), (1, 2.0), (3, 2.0), (4, 1.0), (5, 1.0), (6, 2.0),
                           (9, 2.0), (10, 1.0), (23, 1.0)]:
        assert spec.cost_usd(1_000_000, 0, finished_at=thursday.replace(hour=hour)) == \
            pytest.approx(expected), hour
        assert spec.cost_usd(1_000_000, 0, finished_at=saturday.replace(hour=hour)) == \
            pytest.approx(1.0), hour


def test_unknown_stays_unknown_and_free_stays_free() -> None:
    assert fake_spec(price_input_per_mtok=None).cost_usd(10, 10, 5) is None
    assert _spec(price_cached_input_per_mtok=1.0).cost_usd(None, 10, 5) is None
    assert fake_spec(price_input_per_mtok=0.0, price_output_per_mtok=0.0,
                     batch_price_factor=0.5).cost_usd(None, None) == 0.0


@pytest.mark.parametrize(("fields", "message"), [
    ({"batch_price_factor": 0}, "batch_price_factor"),
    ({"batch_price_factor": 1.5}, "batch_price_factor"),
    ({"price_cached_input_per_mtok": -1}, "price_cached_input_per_mtok"),
    ({"price_cached_input_per_mtok": 3.0}, "must not exceed"),
    ({"price_input_per_mtok": None, "price_cached_input_per_mtok": 0.1}, "needs"),
    ({"off_peak": {"start": "16:30", "end": "00:30", "price_factor": 0}}, "price_factor"),
    ({"off_peak": {"start": "16:30", "end": "00:30", "price_factor": 1.2}}, "price_factor"),
    ({"off_peak": {"start": "25:00", "end": "00:30", "price_factor": 0.5}}, "HH:MM"),
    ({"off_peak": {"start": "16:30", "end": "0:30", "price_factor": 0.5}}, "HH:MM"),
    ({"off_peak": {"start": "16:30", "end": "00:30", "price_factor": 0.5,
                   "days": ["mon", "mon"]}}, "repeat"),
    ({"off_peak": {"start": "16:30", "end": "00:30", "price_factor": 0.5,
                   "days": ["monday"]}}, "days"),
    ({"off_peak": {"start": "16:30", "price_factor": 0.5}}, "end"),
])
def test_pricing_fields_are_validated(fields: dict[str, Any], message: str) -> None:
    base: dict[str, Any] = {"price_input_per_mtok": 2.0, "price_output_per_mtok": 8.0}
    with pytest.raises(ValidationError, match=message):
        fake_spec(**{**base, **fields})


def test_an_unquoted_yaml_time_is_a_clear_registry_error(tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  m:\n    provider: p\n    base_url: http://localhost:1/v1\n"
                    "    model_id: x\n    family: fam\n    price_input_per_mtok: 1\n"
                    "    price_output_per_mtok: 1\n"
                    "    off_peak: {start: 16:30, end: '00:30', price_factor: 0.5}\n",
                    encoding="utf-8")
    with pytest.raises(RegistryError, match="quoted") as exc:
        load_registry(path)
    assert "models.yaml" in str(exc.value)


def test_the_examples_file_carries_each_pricing_field() -> None:
    registry = load_registry(CONFIGS / "models.examples.yaml")
    specs = registry.models.values()
    assert any(s.price_cached_input_per_mtok is not None for s in specs)
    assert any(s.batch_price_factor is not None for s in specs)
    assert any(s.off_peak for s in specs)


def test_off_peak_naive_time_is_utc() -> None:
    period = OffPeak(start="22:00", end="24:00", price_factor=0.5)
    assert period.holds(datetime(2026, 12, 3, 23, 59))
    assert not period.holds(datetime(2026, 12, 3, 21, 59))
