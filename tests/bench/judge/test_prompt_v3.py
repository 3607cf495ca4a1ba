"""judge_prompt.v3: v2's defences with a system message that is the same for every call of
a genre (a server's prompt cache holds all of it) and short score keys, read strictly and
stored under the rubric's question ids."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from essaybench.bench.judge.attacks import load_attacks
from essaybench.bench.judge.injection import essay_flags
from essaybench.bench.judge.judgments import judgments_table, run_judge
from essaybench.bench.judge.render import JudgeRenderer
from essaybench.bench.judge.request import (
    JudgeParams,
    build_judge_requests,
    judge_prompt_path,
    make_renderer,
)
from essaybench.bench.rubrics import (
    GenreRubric,
    RubricError,
    call_tokens,
    load_judge_prompt,
    load_rubric,
    render_judge_messages,
    rubrics_dir,
    short_keys,
)
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.session import open_gateway
from essaybench.llm.types import CallStatus, ChatResult
from tests.llm.conftest import fake_spec, registry_of

RUBRIC = load_rubric()
V2 = load_judge_prompt(rubrics_dir() / "judge_prompt.v2.yaml")
V3 = load_judge_prompt(rubrics_dir() / "judge_prompt.v3.yaml")
PARAMS = JudgeParams(judges=["j"], judge_prompt="judge_prompt.v3.yaml")
TEXTS = [("写一篇记叙文。", "那年夏天……"), ("  前后有空白 \n", "\n\t正文 $x ${y} {z} $$ \n"),
         ("\ue000prompt\ue001", "\ue000essay\ue001 含哨兵"), ("", "")]


@pytest.mark.parametrize(("prompt", "essay"), TEXTS)
def test_v3_frame_equals_direct_rendering(prompt: str, essay: str) -> None:
    renderer = JudgeRenderer(RUBRIC, 300, V3)
    for genre in RUBRIC.genres:
        assert renderer.messages(genre, prompt, essay) == render_judge_messages(
            RUBRIC, genre, prompt, essay, V3)


def test_the_system_message_is_the_same_for_every_call_of_a_genre() -> None:
    renderer = JudgeRenderer(RUBRIC, 300, V3)
    first, _ = renderer.messages("narrative", "写一件难忘的事。", "那年夏天……")
    other, _ = renderer.messages("narrative", "写一位朋友。", "他很高。")
    assert first == other  # v2's carried the call's nonce and marker: uncacheable
    marker, nonce = call_tokens(RUBRIC, "narrative", "写一件难忘的事。", "那年夏天……")
    assert marker not in first["content"] and nonce not in first["content"]
    v2_first, _ = render_judge_messages(RUBRIC, "narrative", "写一件难忘的事。", "那年夏天……", V2)
    v2_other, _ = render_judge_messages(RUBRIC, "narrative", "写一位朋友。", "他很高。", V2)
    assert v2_first != v2_other


def test_v3_keeps_v2s_defences() -> None:
    renderer = JudgeRenderer(RUBRIC, 300, V3)
    system, user = renderer.messages("narrative", "写一件难忘的事。", "那年夏天……")
    marker, nonce = call_tokens(RUBRIC, "narrative", "写一件难忘的事。", "那年夏天……")
    # the rubric in the system role only
    assert "F4：" in system["content"] and "F4" not in user["content"]
    # the call's marker named on the user message's first line, before any untrusted text
    assert user["content"].splitlines()[0] == f"本次标记：{marker}"
    assert f"<<<ESSAY-{marker}\n那年夏天……\nESSAY-{marker}>>>" in user["content"]
    after = user["content"].split(f"ESSAY-{marker}>>>")[1]
    assert "提醒" in after and after.rstrip().endswith(nonce)  # reminder and nonce after it
    _, schema = renderer.call("narrative", "写一件难忘的事。", "那年夏天……")
    assert schema["required"] == ["nonce", "analysis", "scores"]
    assert schema["properties"]["nonce"] == {"type": "string", "enum": [nonce]}
    scores = schema["properties"]["scores"]
    assert scores["required"] == short_keys(RUBRIC.genre("narrative"))
    assert scores["additionalProperties"] is False


def test_short_keys_are_trait_letter_and_question_number() -> None:
    keys = short_keys(RUBRIC.genre("argumentative"))
    assert keys[:5] == ["A1", "A2", "A3", "A4", "B1"]
    assert len(keys) == len(RUBRIC.question_ids("argumentative")) == len(set(keys))
    many = GenreRubric.model_validate({"name_zh": "多", "traits": [
        {"id": f"t{i}", "name": f"T{i}", "name_zh": f"特{i}", "depth": 0,
         "questions": [{"id": f"t{i}.q{j}", "text": "？"} for j in range(3)]}
        for i in range(28)]})
    assert short_keys(many)[-3:] == ["AB1", "AB2", "AB3"]


def _essays() -> pl.DataFrame:
    return pl.DataFrame({
        "prompt_id": ["p0"], "model": ["w"], "sample_index": [0], "genre": ["narrative"],
        "prompt_set": ["open"], "prompt_text": ["写一件难忘的事。"],
        "essay_text": ["那年夏天，我学会了游泳。"], "status": ["ok"]})


def _judged(reply: dict[str, object]) -> dict[str, object]:
    table = _essays()
    requests = build_judge_requests(table, PARAMS, RUBRIC)
    result = ChatResult(key="k", model="j", status=CallStatus.OK,
                        text=json.dumps(reply, ensure_ascii=False))
    [row] = judgments_table(table, requests, [result], RUBRIC, PARAMS).rows(named=True)
    return row


def _nonce() -> str:
    nonce = make_renderer(PARAMS, RUBRIC).expected_nonce("narrative", "写一件难忘的事。",
                                                          "那年夏天，我学会了游泳。")
    assert nonce is not None
    return nonce


def test_a_short_key_reply_is_stored_under_the_question_ids() -> None:
    keys, ids = short_keys(RUBRIC.genre("narrative")), RUBRIC.question_ids("narrative")
    values = [1 + i % 10 for i in range(len(keys))]
    by_key, by_id = dict(zip(keys, values, strict=True)), dict(zip(ids, values, strict=True))
    row = _judged({"nonce": _nonce(), "analysis": "清楚。", "scores": by_key})
    assert row["status"] == "ok"
    assert json.loads(str(row["scores"])) == by_id
    # the same sub-scores as a v2 judgment under the ids
    v2 = JudgeParams(judges=["j"])
    table = _essays()
    requests = build_judge_requests(table, v2, RUBRIC)
    nonce = make_renderer(v2, RUBRIC).expected_nonce("narrative", "写一件难忘的事。",
                                                      "那年夏天，我学会了游泳。")
    text = json.dumps({"nonce": nonce, "analysis": "清楚。", "scores": by_id})
    [same] = judgments_table(table, requests, [ChatResult(
        key="k", model="j", status=CallStatus.OK, text=text)], RUBRIC, v2).rows(named=True)
    assert same["score_weighted"] == row["score_weighted"]


@pytest.mark.parametrize("case", ["question ids", "missing", "extra", "no nonce"])
def test_a_reply_is_read_strictly_with_exactly_the_short_keys(case: str) -> None:
    keys = short_keys(RUBRIC.genre("narrative"))
    scores: dict[str, int] = dict.fromkeys(keys, 7)
    reply: dict[str, object] = {"nonce": _nonce(), "analysis": "清楚。"}
    if case == "question ids":
        scores = dict.fromkeys(RUBRIC.question_ids("narrative"), 7)
    elif case == "missing":
        del scores["F4"]
    elif case == "extra":
        scores["G1"] = 7
    else:
        del reply["nonce"]
    row = _judged({**reply, "scores": scores})
    assert row["status"] == "parse_error" and row["score_weighted"] is None
    expected = {"question ids": "unknown question id(s) in scores: nar.",
                "missing": "question F4: missing score", "extra": "unknown question id(s) "
                "in scores: G1", "no nonce": "does not echo the call's nonce"}[case]
    assert expected in str(row["error"])


def test_the_fake_judge_answers_v3_from_its_schema(tmp_path: Path) -> None:
    with run_fake_server() as server, open_gateway(
            registry_of(fake_spec("j")), tmp_path, ["j"],
            base_urls={"j": server.base_url}) as session:
        table = run_judge(_essays(), PARAMS, session).table
    assert table["status"].to_list() == ["ok"]
    assert set(json.loads(table["scores"][0])) == set(RUBRIC.question_ids("narrative"))
    assert set(json.loads(table["raw_reply"][0])["scores"]) == set(
        short_keys(RUBRIC.genre("narrative")))


def test_a_bare_file_name_is_a_builtin_judge_prompt(tmp_path: Path) -> None:
    assert judge_prompt_path("judge_prompt.v3.yaml") == rubrics_dir() / "judge_prompt.v3.yaml"
    assert judge_prompt_path(None) == rubrics_dir() / "judge_prompt.v2.yaml"
    assert judge_prompt_path(str(tmp_path / "mine.yaml")) == tmp_path / "mine.yaml"
    assert judge_prompt_path("configs/mine.yaml") == Path("configs/mine.yaml")


def test_short_keys_need_the_key_in_the_question_line(tmp_path: Path) -> None:
    raw = yaml.safe_load((rubrics_dir() / "judge_prompt.v3.yaml").read_text(encoding="utf-8"))
    raw["question_line"] = "$question_id：$question_text"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    with pytest.raises(RubricError, match=r"question_line: missing placeholders "
                       r"\['question_key'\]"):
        load_judge_prompt(path)


def test_v1_and_v2_read_as_before() -> None:
    """v1 and v2 set none of the v3 fields: question ids, the call's nonce in the example."""
    v1 = load_judge_prompt(rubrics_dir() / "judge_prompt.v1.yaml")
    assert (v1.score_keys, v1.compact_example, v1.example_nonce) == ("ids", False, None)
    assert (V2.score_keys, V2.compact_example, V2.example_nonce) == ("ids", False, None)
    system, _ = render_judge_messages(RUBRIC, "narrative", "p", "e", V2)
    assert "nar.material.q1：" in system["content"]


def test_verdicts_planted_with_short_keys_are_flagged() -> None:
    keys = short_keys(RUBRIC.genre("argumentative"))
    for attack in load_attacks().attacks:
        if attack.kind not in ("fake_json_verdict", "rubric_id_stuffing"):
            continue
        planted = attack.plant("坚持是成功的阶梯。", RUBRIC, "argumentative", keys)
        assert "A1" in planted and "arg.argument.q1" not in planted
        assert "rubric_ids" in essay_flags("谈谈坚持。", planted), attack.id
