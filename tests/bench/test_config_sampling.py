"""The benchmark config's ``sampling:`` section: default full, validated, documented."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from essaybench.bench.config import BenchmarkConfigError, load_benchmark_config
from essaybench.core.paths import PROJECT_ROOT

BASE = {"generate": {"models": ["w"]}, "judge": {"judges": ["j"]}}


def _write(tmp_path: Path, sampling: object) -> Path:
    path = tmp_path / "benchmark.yaml"
    path.write_text(yaml.safe_dump({**BASE, "sampling": sampling}), encoding="utf-8")
    return path


def test_the_default_is_full_and_the_shipped_config_documents_every_field() -> None:
    config = load_benchmark_config(PROJECT_ROOT / "configs" / "benchmark.yaml")
    assert config.sampling.mode == "full"
    text = (PROJECT_ROOT / "configs" / "benchmark.yaml").read_text(encoding="utf-8")
    section = yaml.safe_load(text)["sampling"]
    assert set(section) == set(type(config.sampling).model_fields)  # every field written out
    for field, info in type(config.sampling).model_fields.items():
        assert info.description, field


def test_an_adaptive_section_is_read(tmp_path: Path) -> None:
    config = load_benchmark_config(_write(tmp_path, {
        "mode": "adaptive", "seed": 7, "round_size": 10, "max_prompts": 200,
        "ask": "pairs", "min_effect": 2.5}))
    s = config.sampling
    assert (s.mode, s.seed, s.round_size, s.max_prompts, s.ask, s.min_effect) == (
        "adaptive", 7, 10, 200, "pairs", 2.5)


@pytest.mark.parametrize(("sampling", "field"), [
    ({"mode": "sometimes"}, "sampling.mode"),
    ({"round_size": 0}, "sampling.round_size"),
    ({"floor_per_stratum": -1}, "sampling.floor_per_stratum"),
    ({"max_prompts": 0}, "sampling.max_prompts"),
    ({"max_calls": 0}, "sampling.max_calls"),
    ({"alpha": 1.5}, "sampling.alpha"),
    ({"alpha_per": "week"}, "sampling.alpha_per"),
    ({"ask": "everything"}, "sampling.ask"),
    ({"method": "t"}, "sampling.method"),
    ({"min_effect": 101}, "sampling.min_effect"),
    ({"rounds": 3}, "sampling.rounds"),
])
def test_a_bad_value_is_one_line_naming_the_field(tmp_path: Path, sampling: dict[str, object],
                                                   field: str) -> None:
    with pytest.raises(BenchmarkConfigError) as err:
        load_benchmark_config(_write(tmp_path, sampling))
    message = str(err.value)
    assert "\n" not in message and field in message and "benchmark.yaml:" in message
