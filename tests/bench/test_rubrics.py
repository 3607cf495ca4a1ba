from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from essaybench.bench.rubrics import (
    Rubric,
    RubricError,
    load_align_score,
    load_judge_prompt,
    load_rubric,
    render_align_messages,
    render_judge_messages,
    rubrics_dir,
)

# DESIGN.md section 2, verbatim: genre -> [(trait, depth)]
EXPECTED = {
    "argumentative": [("Argument", 0), ("Evidence", 1), ("Argumentation Methods", 2),
                      ("Logical Development", 2), ("Expression", 3), ("Endings", 3)],
    "narrative": [("Language and Style", 0), ("Structural Layer and Narrative Techniques", 0),
                  ("Theme and Emotional Expression", 1),
                  ("Overall Structure and Plot Development", 2),
                  ("Characterization and Detail", 2), ("Choice of Material", 3)],
    "descriptive": [("Clarity of Subject and Central Theme", 0),
                    ("Rhythm and Overall Fluency", 1), ("Content and Unique Perspective", 1),
                    ("Structure and Organization", 2),
                    ("Emotional Expression and Atmosphere Description", 2),
                    ("Sensory Details", 3)],
    "expository": [("Clarity of Topic and Purpose", 0), ("Practicality and Relevance", 0),
                   ("Scientific Accuracy and Credibility", 0),
                   ("Logical Structure and Coherence", 1),
                   ("Clarity and Appropriateness of Language", 2),
                   ("Diversity and Appropriateness of Explanatory Methods", 3)],
}
NAMES_ZH = {"argumentative": "议论文", "narrative": "记叙文", "descriptive": "描写文",
            "expository": "说明文"}

BUILTIN = rubrics_dir() / "essaybench.v1.yaml"
BUSINESS = rubrics_dir() / "business_writing.example.v1.yaml"


@pytest.fixture(scope="module")
def rubric() -> Rubric:
    return load_rubric(BUILTIN)


def test_builtin_rubric_matches_the_design_table(rubric: Rubric) -> None:
    assert list(rubric.genres) == list(EXPECTED)
    for genre, expected in EXPECTED.items():
        g = rubric.genre(genre)
        assert g.name_zh == NAMES_ZH[genre]
        assert [(t.name, t.depth) for t in g.traits] == expected
    assert rubric.alpha_default == 3
    assert rubric.score_range == (1, 10)


def test_builtin_rubric_ids_unique_and_question_counts(rubric: Rubric) -> None:
    ids: list[str] = []
    for genre in rubric.genres.values():
        for trait in genre.traits:
            assert trait.name_zh.strip()
            assert 3 <= len(trait.questions) <= 5
            assert all(q.text.strip() and q.id.startswith(trait.id + ".") for q in trait.questions)
            ids += [trait.id, *(q.id for q in trait.questions)]
    assert len(ids) == len(set(ids))


def test_default_path_is_the_builtin(rubric: Rubric) -> None:
    assert load_rubric().fingerprint == rubric.fingerprint


def test_unknown_genre_is_a_clear_key_error(rubric: Rubric) -> None:
    with pytest.raises(KeyError, match="poetry"):
        rubric.genre("poetry")


def _reply(ids: list[str], **overrides: Any) -> dict[str, Any]:
    scores: dict[str, Any] = dict.fromkeys(ids, 7)
    scores.update(overrides)
    return {"analysis": "论点明确，论据充分。", "scores": scores}


def test_answer_schema_accepts_a_correct_reply(rubric: Rubric) -> None:
    schema = rubric.answer_schema("argumentative")
    jsonschema.Draft202012Validator.check_schema(schema)
    ids = rubric.question_ids("argumentative")
    assert list(schema["properties"]["scores"]["properties"]) == ids
    assert schema["properties"]["analysis"]["maxLength"] == 4000
    jsonschema.validate(_reply(ids), schema)
    jsonschema.validate(_reply(ids, **{ids[0]: 1, ids[1]: 10}), schema)


@pytest.mark.parametrize("case", ["missing", "extra", "eleven", "zero", "float", "no_analysis"])
def test_answer_schema_rejects_bad_replies(rubric: Rubric, case: str) -> None:
    schema = rubric.answer_schema("descriptive")
    ids = rubric.question_ids("descriptive")
    reply = _reply(ids)
    if case == "missing":
        del reply["scores"][ids[-1]]
    elif case == "extra":
        reply["scores"]["arg.argument.q1"] = 5
    elif case == "eleven":
        reply["scores"][ids[0]] = 11
    elif case == "zero":
        reply["scores"][ids[0]] = 0
    elif case == "float":
        reply["scores"][ids[0]] = 7.5
    else:
        del reply["analysis"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(reply, schema)


def test_render_judge_messages_lists_every_question_and_the_essay(rubric: Rubric) -> None:
    essay = "那是一个下雨的傍晚，我在车站等了 $5 的公交。"
    prompt = "以《难忘的一天》为题，写一篇记叙文。"
    messages = render_judge_messages(rubric, "narrative", prompt, essay)
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert essay in user and prompt in user
    for qid in rubric.question_ids("narrative"):
        assert qid in user
    assert "arg.argument.q1" not in user
    assert "记叙文" in messages[0]["content"]
    assert "$" not in messages[0]["content"]


def test_judge_prompt_and_align_score_load() -> None:
    assert load_judge_prompt().fingerprint
    align = load_align_score()
    assert align.score_ids() == ["factuality", "user_need", "coherence", "creativity",
                                 "richness", "overall"]
    schema = align.answer_schema()
    jsonschema.validate({"analysis": "好", "scores": dict.fromkeys(align.score_ids(), 8)},
                        schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"analysis": "好", "scores": {"overall": 8}}, schema)
    messages = render_align_messages(align, "题目文本", "作文文本")
    assert "作文文本" in messages[1]["content"]
    assert all(i in messages[1]["content"] for i in align.score_ids())


def test_business_example_rubric_loads() -> None:
    business = load_rubric(BUSINESS)
    assert list(business.genres) == ["business"]
    traits = business.genre("business").traits
    assert [t.name for t in traits] == ["Normativity", "Faithfulness", "Register", "Structure",
                                        "Culture", "Long-form Consistency",
                                        "Constraint Compliance"]
    assert all(len(t.questions) == 3 for t in traits)
    messages = render_judge_messages(business, "business", "写一封会议通知。", "各位同事：……")
    assert "biz.constraints.q3" in messages[1]["content"]


# --- validation errors name the file and the entry ---------------------------------


def _builtin_raw() -> dict[str, Any]:
    raw = yaml.safe_load(BUILTIN.read_text(encoding="utf-8"))
    assert isinstance(raw, dict)
    return raw


def _first_trait(raw: dict[str, Any]) -> dict[str, Any]:
    trait = raw["genres"]["argumentative"]["traits"][0]
    assert isinstance(trait, dict)
    return trait


def _write(tmp_path: Path, raw: Any) -> Path:
    path = tmp_path / "broken.v1.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


def _unknown_field(raw: dict[str, Any]) -> None:
    _first_trait(raw)["weight"] = 2


def _bad_depth(raw: dict[str, Any]) -> None:
    _first_trait(raw)["depth"] = 4


def _two_questions(raw: dict[str, Any]) -> None:
    _first_trait(raw)["questions"] = _first_trait(raw)["questions"][:2]


def _six_questions(raw: dict[str, Any]) -> None:
    qs = _first_trait(raw)["questions"]
    _first_trait(raw)["questions"] = qs + [{"id": f"arg.argument.x{i}", "text": "？"}
                                           for i in range(2)]


def _empty_text(raw: dict[str, Any]) -> None:
    _first_trait(raw)["questions"][1]["text"] = "  "


def _duplicate_id(raw: dict[str, Any]) -> None:
    raw["genres"]["narrative"]["traits"][0]["questions"][0]["id"] = "arg.argument.q2"


def _bad_range(raw: dict[str, Any]) -> None:
    raw["score_range"] = [10, 1]


def _bad_genre_name(raw: dict[str, Any]) -> None:
    raw["genres"]["Poetry-2"] = raw["genres"].pop("narrative")


def _missing_name_zh(raw: dict[str, Any]) -> None:
    del _first_trait(raw)["name_zh"]


BROKEN = [
    (_unknown_field, "genres.argumentative.traits[arg.argument].weight"),
    (_bad_depth, "genres.argumentative.traits[arg.argument].depth"),
    (_two_questions, "genres.argumentative.traits[arg.argument].questions"),
    (_six_questions, "genres.argumentative.traits[arg.argument].questions"),
    (_empty_text, "traits[arg.argument].questions[arg.argument.q2].text"),
    (_duplicate_id, "arg.argument.q2"),
    (_bad_range, "score_range"),
    (_bad_genre_name, "Poetry-2"),
    (_missing_name_zh, "genres.argumentative.traits[arg.argument].name_zh"),
]


@pytest.mark.parametrize(("breaker", "entry"), BROKEN, ids=[b.__name__ for b, _ in BROKEN])
def test_rubric_errors_name_file_and_entry(tmp_path: Path, breaker: Any, entry: str) -> None:
    raw = _builtin_raw()
    breaker(raw)
    path = _write(tmp_path, raw)
    with pytest.raises(RubricError) as info:
        load_rubric(path)
    assert str(path) in str(info.value)
    assert entry in str(info.value)


def test_yaml_duplicate_key_names_file(tmp_path: Path) -> None:
    path = tmp_path / "dup.v1.yaml"
    path.write_text("id: a\nid: b\n", encoding="utf-8")
    with pytest.raises(RubricError, match="duplicate key 'id'") as info:
        load_rubric(path)
    assert str(path) in str(info.value)


def test_judge_prompt_errors_name_file_and_field(tmp_path: Path) -> None:
    raw = yaml.safe_load((rubrics_dir() / "judge_prompt.v1.yaml").read_text(encoding="utf-8"))
    raw["user"] = raw["user"].replace("$essay_text", "").replace("$prompt_text", "$prompt")
    path = _write(tmp_path, raw)
    with pytest.raises(RubricError) as info:
        load_judge_prompt(path)
    message = str(info.value)
    assert str(path) in message and "user: unknown placeholders ['prompt']" in message


def test_align_score_errors_name_file_and_entry(tmp_path: Path) -> None:
    raw = yaml.safe_load((rubrics_dir() / "align_score.v1.yaml").read_text(encoding="utf-8"))
    raw["dimensions"][1]["colour"] = "red"
    path = _write(tmp_path, raw)
    with pytest.raises(RubricError) as info:
        load_align_score(path)
    assert str(path) in str(info.value) and "dimensions[user_need].colour" in str(info.value)


def test_fingerprint_tracks_content_not_formatting(tmp_path: Path, rubric: Rubric) -> None:
    raw = _builtin_raw()
    same = _write(tmp_path, raw)
    assert load_rubric(same).fingerprint == rubric.fingerprint  # comments and layout dropped
    _first_trait(raw)["questions"][0]["text"] += "（请举例说明）"
    changed = tmp_path / "changed.v1.yaml"
    changed.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    assert load_rubric(changed).fingerprint != rubric.fingerprint


def test_a_file_read_again_is_parsed_once_and_an_edit_is_seen(tmp_path: Path) -> None:
    raw = _builtin_raw()
    path = _write(tmp_path, raw)
    first = load_rubric(path)
    assert load_rubric(path) is first  # the same bytes: validated once
    raw["id"] = "edited"
    _write(tmp_path, raw)
    edited = load_rubric(path)
    assert edited.id == "edited" and edited.fingerprint != first.fingerprint
    # the same bytes read as another kind of file are validated as that kind
    with pytest.raises(RubricError):
        load_judge_prompt(path)
