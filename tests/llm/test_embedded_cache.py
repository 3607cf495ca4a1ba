"""The embedded server's prompt cache and seeds (slow, real llama.cpp server): a judge's
rubric is read once although calls alternate rubrics, and a reply does not depend on the
calls before it (the ledger keys a call by its request, not by its place in a run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from essaybench.llm.embedded import EmbeddedServer

pytestmark = pytest.mark.slow

# Two "rubrics" (~480 tokens each) sharing their first words, as the real ones do.
RUBRIC_1 = "你是作文评分员。评分标准：" + "立意深刻，结构严谨，语言流畅，论据充分。" * 12
RUBRIC_2 = "你是作文评分员。记叙文标准：" + "情节生动，人物鲜明，细节真实，感情真挚。" * 12


def _call(server: EmbeddedServer, rubric: str, essay: str, **params: Any) -> tuple[str, int]:
    """(reply, prompt tokens the server took from its cache) of one sampled call."""
    reply = httpx.post(f"{server.base_url}/chat/completions", timeout=300, trust_env=False,
                       json={"model": "x", "max_tokens": 24, "temperature": 0.9, **params,
                             "messages": [{"role": "system", "content": rubric},
                                          {"role": "user", "content": essay}]})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    return body["choices"][0]["message"]["content"], \
        body["usage"]["prompt_tokens_details"]["cached_tokens"]


def _alternating(server: EmbeddedServer) -> list[tuple[str, int]]:
    """Four calls alternating two rubrics; the last two are the ones compared."""
    return [_call(server, RUBRIC_1, "作文一：春天来了。"),
            _call(server, RUBRIC_2, "作文四：夏天。", seed=3),
            _call(server, RUBRIC_1, "作文二：秋天到了。", seed=7),  # its own seed
            _call(server, RUBRIC_2, "作文三：冬天很冷。")]  # none: the server's default


def test_rubrics_are_reused_and_replies_do_not_depend_on_earlier_calls(
        tmp_path: Path) -> None:
    with EmbeddedServer(tmp_path) as fresh:  # the two compared calls, first on a server
        alone = [_call(fresh, RUBRIC_1, "作文二：秋天到了。", seed=7),
                 _call(fresh, RUBRIC_2, "作文三：冬天很冷。")]
    with EmbeddedServer(tmp_path) as server:
        calls = _alternating(server)
    # Each rubric came back from the RAM cache (not only the slot's last prompt: the
    # other rubric was read in between), the essay alone was read.
    assert all(cached >= 450 for _, cached in calls[2:]), calls
    assert alone[1][1] < 50  # in `fresh` the rubrics share only their first words
    # The same reply, seeded by the request or by the server's default, whether the
    # rubric was read with the essay or restored from the cache.
    assert [text for text, _ in calls[2:]] == [text for text, _ in alone]


def test_without_the_ram_cache_an_alternating_rubric_is_read_again(tmp_path: Path) -> None:
    with EmbeddedServer(tmp_path, cache_mib=0) as server:
        calls = _alternating(server)
    assert all(cached < 50 for _, cached in calls[2:]), calls
