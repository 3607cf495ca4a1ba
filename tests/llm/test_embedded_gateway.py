"""The embedded model end to end through the gateway: no key, no network, no server by hand.

Fails (does not skip) when xllamacpp or the model package is missing: the README's
main command depends on both.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from essaybench.llm.registry import load_registry
from essaybench.llm.retry import TRANSPORT_KINDS
from essaybench.llm.session import LEDGER_FILE, open_gateway
from essaybench.llm.types import CallStatus, ChatRequest, Message

pytestmark = pytest.mark.slow
MODEL = "smollm2-135m"
SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "integer", "enum": [1, 2, 3, 4, 5]},
                   "reason": {"type": "string", "maxLength": 40}},
    "required": ["score", "reason"], "additionalProperties": False,
}


def test_runtime_and_model_are_installed() -> None:
    import xllamacpp  # type: ignore[import-untyped]  # noqa: F401  (an ImportError fails it)

    from essaybench.llm.embedded import locate_gguf

    assert locate_gguf().is_file()


def test_generation_and_structured_reply_via_gateway(tmp_path: Path) -> None:
    requests = [
        ChatRequest(model=MODEL, stage="generate", tag="short",
                    params={"temperature": 0.0, "max_tokens": 24, "seed": 1},
                    messages=(Message(role="user", content="Write one sentence about autumn."),)),
        ChatRequest(model=MODEL, stage="judge", tag="json",
                    params={"temperature": 0.0, "max_tokens": 64, "seed": 1},
                    response_schema=SCHEMA,
                    messages=(Message(role="user", content=(
                        "Rate the sentence 'The leaves fall.' from 1 to 5. Answer in JSON "
                        "with keys score and reason.")),)),
    ]
    with open_gateway(load_registry(), tmp_path, [MODEL], log_dir=tmp_path / "logs") as s:
        first = s.run(requests)
        again = s.run(requests)
    short, judged = first
    assert short.status in (CallStatus.OK, CallStatus.TRUNCATED) and short.text
    assert short.usage.output_tokens and short.returned_model
    assert judged.status is CallStatus.OK, (judged.error, judged.text)
    assert judged.parsed["score"] in range(1, 6) and len(judged.parsed["reason"]) <= 40
    assert [r.from_ledger for r in again] == [short.ok, True]
    with duckdb.connect(str(tmp_path / LEDGER_FILE), read_only=True) as con:
        rows = con.execute("select model_id, endpoint from llm_calls").fetchall()
    assert {r[1] for r in rows} == {"embedded"}
    assert all("@sha256:" in r[0] for r in rows)  # keyed on the model file's hash


def test_judge_answer_schema_is_a_grammar_llama_cpp_accepts(tmp_path: Path) -> None:
    # At maxLength 4000 llama.cpp's grammar parser gave up and the server died mid-run:
    # the judge's schema for a local model must stay within what it can compile.
    from essaybench.bench.judge.request import JudgeParams
    from essaybench.bench.rubrics import load_rubric

    limit = JudgeParams(judges=[MODEL], analysis_max_chars=300).analysis_max_chars
    schema = load_rubric().answer_schema("argumentative", limit)
    request = ChatRequest(model=MODEL, stage="judge", response_schema=schema,
                          params={"temperature": 0.0, "max_tokens": 600, "seed": 1},
                          messages=(Message(role="user", content="Score the essay 'Hi.' "
                                            "on every question, in JSON."),))
    with open_gateway(load_registry(), tmp_path, [MODEL], log_dir=tmp_path / "logs") as s:
        [result] = s.run([request])
    assert result.error_kind not in (*TRANSPORT_KINDS, "http_500"), result.error
    assert result.status in (CallStatus.OK, CallStatus.TRUNCATED)
