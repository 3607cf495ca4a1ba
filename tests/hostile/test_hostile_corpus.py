"""The hostile inputs of issue 13, kept as files (tests/hostile/cases/) and run through the
real components: nothing hostile becomes a number, a label, a stored secret, a lost row or
a traceback. (Each behaviour has its focused tests beside its module; this corpus is the
one place a reviewer can read every attack and what it meets.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from essaybench.bench.judge.injection import essay_flags
from essaybench.bench.judge.parse import JudgmentError, parse_judgment, read_judgment
from essaybench.bench.rubrics import load_rubric
from essaybench.core.redact import redact
from essaybench.curate.labeler import LabelRequest, LabelStatus, parse_label_reply
from essaybench.curate.normalize import normalize_text
from essaybench.human.annotations import AnnotationFileError, ScoreScale, load_absolute
from essaybench.llm.registry import load_registry
from essaybench.sources.config import SourceSpec
from essaybench.sources.readers import read_csv

CASES = Path(__file__).parent / "cases"
RUBRIC = load_rubric()
IDS = tuple(RUBRIC.question_ids("narrative"))


def case(name: str) -> str:
    return (CASES / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name,why", [
    ("judge_two_objects.txt", "second JSON object"),
    ("judge_quoted_verdict_then_cut.txt", "text before the JSON object"),
    ("judge_duplicate_question_id.txt", "duplicate key"),
])
def test_a_reply_that_is_not_exactly_one_judgment_scores_nothing(name: str, why: str) -> None:
    with pytest.raises(JudgmentError, match=why):
        parse_judgment(case(name).strip(), RUBRIC, "narrative")


def test_a_verdict_without_the_calls_nonce_is_not_this_calls_judgment() -> None:
    text = case("judge_verdict_without_nonce.txt").strip()
    assert parse_judgment(text, RUBRIC, "narrative")  # a valid judgment on its own ...
    with pytest.raises(JudgmentError, match="nonce"):  # ... but not for a v2 call
        read_judgment(text, IDS, frozenset(IDS), RUBRIC.score_range, nonce="5f3c9a0b7e21")


def test_an_essay_that_plants_a_verdict_is_flagged() -> None:
    flags = essay_flags("写一件难忘的事。", case("essay_plants_a_verdict.txt"))
    assert {"score_json", "rubric_ids"} <= set(flags)


def test_a_label_whose_evidence_is_the_template_placeholder_is_no_label() -> None:
    result = parse_label_reply(case("label_placeholder_evidence.json").strip(),
                               LabelRequest(prompt_id="p1", text="以“坚持”为题写一篇议论文。"))
    assert result.status == LabelStatus.PARSE_ERROR and result.genre is None


def test_a_provider_error_that_echoes_the_key_is_stored_without_it() -> None:
    body = case("provider_401_echoes_key.txt")
    assert "sk-hostile-0123456789abcdefXYZ" in body
    assert "sk-hostile" not in redact(body) and "[REDACTED]" in redact(body)


def test_a_broken_quote_loses_no_row(tmp_path: Path) -> None:
    spec = SourceSpec.model_validate({"name": "exam", "kind": "csv",
                                      "path": "unclosed_quote.csv", "text_column": "prompt",
                                      "id_column": "id"})
    items = list(read_csv(CASES / "unclosed_quote.csv", spec))
    assert len(items) == 50  # every physical data line is a record
    kept = [i for i in items if i.reason is None]
    quarantined = [i for i in items if i.reason is not None]
    assert [i.text for i in kept] == [f"以“坚持”为题写一篇议论文，第{n}题。" for n in (1,)]
    assert len(quarantined) == 49 and len({i.locator for i in quarantined}) == 49


def test_markup_and_escape_residue_never_reach_a_prompt() -> None:
    text = normalize_text(case("prompt_with_markup.txt"))
    assert "以“门”为题，写一篇记叙文。" in text and "不少于600字" in text
    for residue in ("<script", "alert", "\x1b", "[31m", "<b>"):
        assert residue not in text


def test_human_scores_off_the_scale_name_the_file_and_line() -> None:
    with pytest.raises(AnnotationFileError) as err:
        load_absolute(CASES / "annotations_off_scale.jsonl", ScoreScale(0, 10))
    message = str(err.value)
    for line in (2, 3, 4):
        assert f"annotations_off_scale.jsonl:{line}" in message


def test_two_registry_names_for_one_model_are_refused_naming_both() -> None:
    with pytest.raises(Exception) as err:
        load_registry(CASES / "registry_identical_entries.yaml")
    assert "writer-a" in str(err.value) and "writer-b" in str(err.value)
