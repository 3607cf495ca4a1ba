from __future__ import annotations

from typing import Any

from essaybench.llm.registry import ModelSpec, Registry


def fake_spec(name: str = "fake", **overrides: Any) -> ModelSpec:
    """A registry entry for the fake server; the URL is dialled via base_urls, not keyed."""
    fields: dict[str, Any] = {
        "name": name, "provider": "fake", "base_url": "http://fake.invalid/v1",
        "model_id": "gpt-x", "family": "fake", "structured_output": "json_schema",
        "max_concurrency": 8, "price_input_per_mtok": 1.0, "price_output_per_mtok": 2.0,
        "timeout_s": 5, "connect_timeout_s": 2, "max_retries": 3, "max_reasks": 2,
        "default_params": {"max_tokens": 256},
    }
    fields.update(overrides)
    return ModelSpec(**fields)


def registry_of(*specs: ModelSpec) -> Registry:
    return Registry(models={s.name: s for s in specs})
