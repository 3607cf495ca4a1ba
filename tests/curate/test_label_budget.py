"""The labeller's max_tokens comes from its answer schema and the tokenizer's tokens per
character (issue 30, item 5), never a fixed 256."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml

from essaybench.core.paths import PROJECT_ROOT
from essaybench.curate.label_budget import answer_max_tokens, longest_answer
from essaybench.curate.labeler import LabelRequest
from essaybench.curate.llm_labeler import EVIDENCE_MAX_CHARS, GatewayLabeler, label_schema
from essaybench.llm.fake.protocol import count_tokens
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.gateway import Gateway
from essaybench.llm.ledger import Ledger
from essaybench.llm.structured import validate
from tests.llm.conftest import fake_spec, registry_of

WIDEST = LabelRequest(prompt_id="p", text="", need_genre=True, need_set=True, need_essay=True)
SCHEMA = label_schema(WIDEST)
RATIOS = yaml.safe_load((PROJECT_ROOT / "configs" / "token_ratios.yaml").read_text("utf-8"))


def test_the_longest_answer_is_one_the_schema_allows() -> None:
    text = longest_answer(SCHEMA)
    validate(json.loads(text), SCHEMA)
    assert len(json.loads(text)["evidence"]) == EVIDENCE_MAX_CHARS
    assert len(json.loads(text)["genre"]) == 4  # a choice of every genre is the longest


@pytest.mark.parametrize("family", ["smollm", "openai", "deepseek", "qwen", "fake"])
def test_the_evidence_alone_fits_at_the_familys_tokens_per_character(family: str) -> None:
    budget = answer_max_tokens(SCHEMA, family)
    assert budget >= EVIDENCE_MAX_CHARS * RATIOS["families"][family]["cjk"] + 50
    if family == "smollm":  # ~1.8 tokens per Chinese character: 256 cut replies off
        assert budget > 256 + 100


def test_an_unlisted_family_is_counted_at_the_highest_ratios() -> None:
    assert answer_max_tokens(SCHEMA, "mystery") >= answer_max_tokens(SCHEMA, "smollm")


def test_the_fake_servers_own_count_of_the_longest_answer_fits() -> None:
    # the fake counts 1.6 CJK characters per token (llm/fake/protocol.py), independently
    assert count_tokens(longest_answer(SCHEMA)) <= answer_max_tokens(SCHEMA, "fake")


def test_the_labeller_sends_the_derived_budget(tmp_path: Path) -> None:
    text = "请以“门”为题写一篇作文，" + "要求写出真情实感，" * 30
    evidence = text[: EVIDENCE_MAX_CHARS]
    reply = json.dumps({"essay": "essay", "genre": "narrative", "prompt_set": None,
                        "evidence": evidence}, ensure_ascii=False)
    scenario = FakeScenario.model_validate({"models": {"*": {
        "structured": "script", "structured_script": [reply], "enforce_max_tokens": True}}})
    with run_fake_server(scenario) as server, Ledger(tmp_path / "l.duckdb") as ledger:
        gateway = Gateway(registry_of(fake_spec(family="smollm")), ledger,
                          base_urls={"fake": server.base_url})
        labeller = GatewayLabeler(gateway, "fake")
        request = LabelRequest(prompt_id="p", text=text, need_essay=True)
        assert labeller.chat_request(request).params["max_tokens"] == answer_max_tokens(
            label_schema(WIDEST, True), "smollm") > 256
        result = asyncio.run(labeller.label(request))
        with pytest.raises(ValueError, match="max_tokens 256 is below"):
            GatewayLabeler(gateway, "fake", max_tokens=256)
    assert (result.status.value, result.evidence) == ("ok", evidence)
