"""The registry's batch field, the options, and what a batch refuses before sending."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from essaybench.llm.batch import BatchOptions, BatchRunner
from essaybench.llm.batch.anthropic_api import message_params
from essaybench.llm.batch.wire import BatchItem, check_custom_id
from essaybench.llm.ledger import Ledger
from essaybench.llm.registry import RegistryError, load_registry
from tests.llm.batch.conftest import gateway, requests
from tests.llm.conftest import fake_spec

ENTRY = """models:
  judge-a:
    provider: openai
    base_url: https://api.openai.com/v1
    model_id: gpt-4o
    family: openai
"""


def test_registry_batch_field_defaults_to_none_and_names_model_and_field(
        tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_text(ENTRY, encoding="utf-8")
    assert load_registry(path).get("judge-a").batch == "none"
    path.write_text(ENTRY + "    batch: anthropic\n", encoding="utf-8")
    assert load_registry(path).get("judge-a").batch == "anthropic"
    path.write_text(ENTRY + "    batch: opnai\n", encoding="utf-8")
    with pytest.raises(RegistryError) as caught:
        load_registry(path)
    assert str(caught.value) == (f"{path}:7: model registry: models.judge-a.batch: Input "
                                 "should be 'openai', 'anthropic' or 'none'")


def test_polls_back_off_exponentially_up_to_the_cap() -> None:
    options = BatchOptions(poll_initial_s=5, poll_factor=2, poll_max_s=60)
    assert [options.delay(i) for i in range(6)] == [5, 10, 20, 40, 60, 60]
    assert options.delay(10_000) == 60
    with pytest.raises(ValueError, match="poll_max_s"):
        BatchOptions(poll_initial_s=10, poll_max_s=5)


def test_a_model_without_batch_is_refused_before_anything_is_sent(
        serve: Any, tmp_path: Path) -> None:
    fake = serve()
    with Ledger(tmp_path / "l.duckdb") as ledger:
        runner = BatchRunner(gateway(fake, ledger, batch="none"))
        with pytest.raises(ValueError, match="model 'w' has batch: none"):
            asyncio.run(runner.submit(requests(1)))
    assert fake.stats().batch.files_uploaded == 0


def test_anthropic_params_need_max_tokens_and_take_no_unknown_parameter() -> None:
    [req] = requests(1)
    spec = fake_spec("w", default_params={})
    with pytest.raises(ValueError, match="need max_tokens"):
        message_params(spec, BatchItem("k", req))
    spec = fake_spec("w", default_params={"max_tokens": 9, "logprobs": True,
                                          "temperature": 0.2})
    with pytest.raises(ValueError, match="take no logprobs"):
        message_params(spec, BatchItem("k", req))
    # a seed (every essay request and judge repeat has one) is not sent: the Messages API
    # has none; it stays in the call's key
    spec = fake_spec("w", default_params={"max_tokens": 9, "seed": 3, "temperature": 0.2})
    assert message_params(spec, BatchItem("k", req)) == {
        "model": "gpt-x", "system": "你是作文老师。", "max_tokens": 9, "temperature": 0.2,
        "messages": [{"role": "user", "content": "写一篇作文0"}]}
    params = message_params(fake_spec("w"), BatchItem("k", req))
    assert params == {"model": "gpt-x", "system": "你是作文老师。", "max_tokens": 256,
                      "messages": [{"role": "user", "content": "写一篇作文0"}]}


def test_custom_ids_follow_anthropics_rule() -> None:
    assert check_custom_id("a" * 32) == "a" * 32
    for bad in ("", "a" * 65, "a.b", "键"):
        with pytest.raises(ValueError):
            check_custom_id(bad)
