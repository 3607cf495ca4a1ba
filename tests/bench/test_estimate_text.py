"""Token counts from text alone (issue 26 item 5): the fake family's ratios against the fake
server's own counting of real requests, a judgment's size from its answer schema, and (slow)
SmolLM2's ratios against its real tokenizer, llama.cpp's /tokenize."""

from __future__ import annotations

import json

import httpx
import pytest

from essaybench.bench.estimate_text import essay_tokens, expected_reply, reply_tokens
from essaybench.bench.judge.request import JudgeParams, load_scoring, make_renderer
from essaybench.core.contracts import GENRES
from essaybench.core.paths import resource
from essaybench.llm.fake.protocol import count_tokens, parse_chat
from essaybench.llm.token_text import script_counts, token_ratios

PROMPT = "阅读下面的材料，根据要求写作。（60分）……要求：选准角度，自拟标题，不少于800字。"
EXAM = resource("data", "raw", "exam_prompts.md").read_text(encoding="utf-8")


def _renderer(prompt: str = "judge_prompt.v3.yaml", analysis: int = 60):  # type: ignore[no-untyped-def]
    params = JudgeParams(judges=["j"], judge_prompt=prompt, analysis_max_chars=analysis)
    return make_renderer(params, load_scoring(params))


def test_scripts_partition_the_text() -> None:
    text = "春天来了。Spring is here, 2025年！{\"A1\": 7}"
    counts = script_counts(text)
    assert sum(counts.values()) == len(text)
    assert counts["cjk"] == sum(1 for c in "春天来了。年！")
    assert counts["latin"] == len("SpringishereA")  # the A of "A1" too
    assert counts["other"] == len(text) - 7 - 13


@pytest.mark.parametrize("prompt", ["judge_prompt.v2.yaml", "judge_prompt.v3.yaml"])
def test_fake_family_counts_requests_as_the_fake_server_does(prompt: str) -> None:
    """The estimate's count of a judge request equals the fake server's usage (its own
    rule, rounded up per text) within a token per message."""
    fake = token_ratios().families["fake"]
    renderer = _renderer(prompt)
    for genre in GENRES:
        messages, _ = renderer.call(genre, PROMPT, EXAM[:1500])
        served = parse_chat({"model": "m", "messages": messages})
        assert not isinstance(served, str)
        assert fake.request_tokens(messages) == pytest.approx(served.prompt_tokens,
                                                              abs=2 * len(messages))


def test_a_judgment_is_sized_from_its_schema() -> None:
    """v3 with analysis ≤ 60 characters: a nonce, 30 characters of analysis and one score
    per sub-question; far under max_tokens, unlike the old guess (max_tokens itself)."""
    renderer = _renderer()
    fake = token_ratios().families["fake"]
    for genre in GENRES:
        _, schema = renderer.call(genre, PROMPT, "")
        reply = json.loads(expected_reply(schema))
        keys = renderer.reply_keys(genre)
        assert keys is not None and sorted(reply["scores"]) == sorted(keys)
        assert len(reply["analysis"]) == 30 and reply["nonce"] == schema[
            "properties"]["nonce"]["enum"][0]
        text = json.dumps(reply, ensure_ascii=False)
        assert reply_tokens(schema, fake, 1200) == pytest.approx(count_tokens(text), abs=2)
        assert reply_tokens(schema, fake, 40) == 40  # capped at max_tokens
    # A 4,000-character analysis is assumed half written, at most 1,000 characters.
    _, schema = _renderer("judge_prompt.v2.yaml", 4000).call("narrative", PROMPT, "")
    assert len(json.loads(expected_reply(schema))["analysis"]) == 1000


def test_essays_as_long_as_asked_in_the_writers_tokens() -> None:
    table = token_ratios()
    fake, smollm = table.families["fake"], table.families["smollm"]
    assert essay_tokens(PROMPT, fake, None) == pytest.approx(960 * 0.625)  # 800 + 20%
    assert essay_tokens(PROMPT, smollm, 400) == 400  # SmolLM2's 1.8 tokens a character: cut
    assert essay_tokens("以“门”为题写一篇记叙文。", fake, None) == pytest.approx(800 * 0.625)
    assert table.for_family("doubao")[0] == table.default  # an unmeasured family


@pytest.mark.slow
def test_smollm_ratios_match_its_real_tokenizer() -> None:
    """The smollm ratios count real text within 1.25x of llama.cpp's /tokenize."""
    from essaybench.llm.embedded import EmbeddedServer, EmbeddedServerError, locate_gguf

    try:
        locate_gguf()
    except (EmbeddedServerError, FileNotFoundError) as exc:
        pytest.skip(f"no embedded model: {exc}")
    smollm = token_ratios().families["smollm"]
    renderer = _renderer("judge_prompt.v2.yaml", 4000)
    texts = [EXAM[:3000], PROMPT, *("\n".join(m["content"] for m in renderer.messages(
        g, PROMPT, EXAM[:800])) for g in GENRES)]
    with EmbeddedServer() as server, httpx.Client(timeout=60) as client:
        root = server.base_url.removesuffix("/v1")
        for text in texts:
            reply = client.post(f"{root}/tokenize", json={"content": text})
            actual = len(reply.json()["tokens"])
            assert 1 / 1.25 <= smollm.tokens(text) / actual <= 1.25, text[:40]


def test_a_writer_stopped_at_a_line_break_writes_one_paragraph() -> None:
    """The demo's writers stop at "\\n": one paragraph (98 characters, the mean of real
    essays' paragraphs), not the 960 characters the prompt asks for."""
    from essaybench.bench.estimate_text import PARAGRAPH_CHARS, stops_at_newline
    from essaybench.llm.registry import load_registry

    registry = load_registry(resource("configs", "models.yaml"))
    assert stops_at_newline(registry.get("smollm2-135m-para"))
    assert not stops_at_newline(registry.get("smollm2-135m"))
    smollm = token_ratios().families["smollm"]
    assert essay_tokens(PROMPT, smollm, 400, one_paragraph=True) == pytest.approx(
        PARAGRAPH_CHARS * smollm.cjk)
