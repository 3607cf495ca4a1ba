"""The benchmark config's ``batch:`` section: the shipped config writes out every field with
its default, each field is documented, and a wrong value is one clear error."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from essaybench.bench.config import BenchmarkConfigError, load_benchmark_config
from essaybench.core.paths import PROJECT_ROOT
from essaybench.llm.batch import BatchOptions


def test_the_shipped_config_documents_every_field_at_its_default() -> None:
    path = PROJECT_ROOT / "configs" / "benchmark.yaml"
    config = load_benchmark_config(path)
    section = yaml.safe_load(path.read_text(encoding="utf-8"))["batch"]
    assert set(section) == set(BatchOptions.model_fields)
    assert config.batch == BatchOptions()
    for field, info in BatchOptions.model_fields.items():
        assert info.description, field


def test_a_wrong_value_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump({"generate": {"models": ["w"]}, "judge": {"judges": ["j"]},
                                    "batch": {"on_expired": "later"}}), encoding="utf-8")
    with pytest.raises(BenchmarkConfigError, match="on_expired"):
        load_benchmark_config(path)
