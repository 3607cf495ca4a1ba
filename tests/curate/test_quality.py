"""The curation quality benchmark's rules-only evaluation, held to issue 15's targets.

``data/eval/curation_eval.v1.jsonl`` is the team's labelled set; the WritingBench part is
read from ``../shared`` and skips where that is absent. The rules were improved with this
set in view, so these figures guard against regressions (see data/eval/README.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.curation_quality import EVAL_SET, WB_LABELS, WB_QUERIES, format_report
from essaybench.core.paths import PROJECT_ROOT
from essaybench.curate.classify import ClassifyParams
from essaybench.curate.config import load_curate_config
from essaybench.curate.quality import (
    EvalItem,
    Outcome,
    evaluate,
    load_eval_set,
    load_writingbench_labels,
    quality_report,
    targets_met,
)


def _run(items: list[EvalItem]) -> list[Outcome]:
    config = load_curate_config(PROJECT_ROOT / "configs" / "curate.yaml")
    params = ClassifyParams(keep_genre_choice=config.classify.keep_genre_choice)
    return evaluate(items, config.filter, params).outcomes


@pytest.fixture(scope="module")
def team_set() -> list[Outcome]:
    return _run(load_eval_set(EVAL_SET))


def test_the_set_has_the_kinds_the_issue_asks_for() -> None:
    items = load_eval_set(EVAL_SET)
    assert len(items) >= 150
    kinds = {i.kind for i in items}
    assert {"exam", "multi", "chat", "nonessay"} <= kinds
    assert sum(i.genre_open for i in items) >= 10
    assert sum(len(i.allowed_genres) > 1 for i in items) >= 8
    assert sum(not i.is_essay for i in items) >= 40


def test_rules_only_meet_the_targets_on_the_team_set(team_set: list[Outcome]) -> None:
    report = quality_report(team_set)
    met = targets_met(report)
    assert all(met.values()), (met, format_report("rules only", report, team_set, 50))


def test_rules_only_meet_the_targets_with_the_writingbench_sample() -> None:
    if not WB_QUERIES.is_file():
        pytest.skip(f"../shared/data not present ({WB_QUERIES} missing): the WritingBench "
                    "sample's texts are read from there")
    outcomes = _run(load_writingbench_labels(WB_LABELS, WB_QUERIES))
    report = quality_report(outcomes)
    assert report.n == 50
    assert all(targets_met(report).values()), format_report("wb", report, outcomes, 50)


def test_report_figures_match_a_hand_count(team_set: list[Outcome]) -> None:
    report = quality_report(team_set)
    essays = [o for o in team_set if o.item.is_essay]
    decided = [o for o in team_set if o.pred_class not in ("undecided", "dropped")]
    assert report.decided == len(decided)
    assert report.decided_correct == sum(
        sorted(o.allowed) == sorted(o.item.allowed_genres) for o in decided)
    assert report.essays_decided == sum(o in decided for o in essays)
    assert sum(sum(row.values()) for row in report.confusion.values()) == len(team_set)
    precision, recall, support = report.per_class["non_essay"]
    dropped = [o for o in team_set if o.pred_class == "dropped"]
    assert support == sum(not o.item.is_essay for o in team_set)
    assert recall == sum(not o.item.is_essay for o in dropped) / support
    assert precision == sum(not o.item.is_essay for o in dropped) / len(dropped)


@pytest.mark.parametrize(("line", "message"), [
    ('{"id": "x", "kind": "chat", "text": "t", "is_essay": false, "genre": "narrative"}',
     "a non-essay carries no genre"),
    ('{"id": "x", "kind": "chat", "text": "t", "is_essay": true, "allowed_genres": ["any"], '
     '"genre_open": false, "prompt_set": "open"}', "genre_open is true exactly when"),
    ('{"id": "x", "kind": "chat", "text": "t", "is_essay": true, "genre": "narrative", '
     '"allowed_genres": ["argumentative"], "prompt_set": "open"}', "genre is set exactly"),
    ('{"id": "x", "kind": "chat", "text": "t", "is_essay": true, "allowed_genres": ["poem"], '
     '"prompt_set": "open"}', "are not genres"),
])
def test_bad_label_is_one_error_naming_file_and_line(tmp_path: Path, line: str,
                                                     message: str) -> None:
    good = ('{"id": "ok", "kind": "chat", "text": "写一篇议论文", "is_essay": true, '
            '"genre": "argumentative", "allowed_genres": ["argumentative"], '
            '"prompt_set": "open"}')
    path = tmp_path / "set.jsonl"
    path.write_text(good + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"set\.jsonl:2: .*{message}"):
        load_eval_set(path)


def test_benchmark_measures_a_registry_labeler(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """--labeler-model: the rules+LLM run goes through the gateway to that registry model
    (here the fake server, answering narrative for every prompt it is asked about)."""
    from benchmarks.curation_quality import main
    from essaybench.llm.fake.scenario import FakeScenario
    from essaybench.llm.fake.server import run_fake_server

    tied = "写一篇作文，介绍你最喜欢的一本书，并说说你喜欢它的理由"  # rules: a tie
    eval_set = tmp_path / "set.jsonl"
    eval_set.write_text("\n".join([
        f'{{"id": "a", "kind": "chat", "text": "{tied}", "is_essay": true, '
        '"genre": "narrative", "allowed_genres": ["narrative"], "prompt_set": "open"}',
        '{"id": "b", "kind": "chat", "text": "写一篇议论文，谈谈诚信", "is_essay": true, '
        '"genre": "argumentative", "allowed_genres": ["argumentative"], "prompt_set": "open"}',
    ]) + "\n", encoding="utf-8")
    answer = ('{"essay": "essay", "genre": "narrative", "prompt_set": null, '
              '"evidence": "写一篇作文"}')
    scenario = FakeScenario.model_validate(
        {"models": {"*": {"structured": "script", "structured_script": [answer]}}})
    with run_fake_server(scenario) as server:
        registry = tmp_path / "models.yaml"
        registry.write_text(
            "models:\n  labeler:\n    provider: fake\n"
            f"    base_url: {server.base_url}\n    api_key_env: null\n    model_id: m\n"
            "    family: fake\n    structured_output: json_schema\n    max_retries: 0\n"
            "    timeout_s: 10\n", encoding="utf-8")
        main(["--eval-set", str(eval_set), "--labeler-model", "labeler", "--registry",
              str(registry), "--store", str(tmp_path / "store"), "--skip-writingbench",
              "--skip-adversaries", "--set", "team"])
    out = capsys.readouterr().out
    rules, llm = out.split("== rules + labeler")
    assert "essays decided                  50.0% (1/2" in rules
    assert "essays decided                 100.0% (2/2" in llm
    assert "labeler: 1 requests, statuses {'ok': 1}" in llm
    assert "1 predictions differ from rules only" in llm


# --- issue 30: adversarial labellers and the held-out real prompts ------------------------

def _adversary(items: list[object], mode: str) -> object:
    from benchmarks.curation_adversary import adversary_report

    config = load_curate_config(PROJECT_ROOT / "configs" / "curate.yaml")
    params = ClassifyParams(keep_genre_choice=config.classify.keep_genre_choice)
    return adversary_report(items, mode, config.filter, params)  # type: ignore[arg-type]


ADVERSARY_SET = [
    # rules leave these undecided, so a rules+llm labeller is asked about them
    ("essay", "以“门”为题写一篇作文。", True),
    ("interview", "制定一份采访一位退休老教师的问题清单，目标是全面呈现她几十年来的教学经验与人生"
     "智慧，为刚入职的年轻教师提供参考，内容需要覆盖她初上讲台时遇到的挑战、最难忘的学生、教学方法"
     "的变化、对教育改革的看法、对年轻人的建议等方面，问题要简洁明了，具有启发性，能让受访者愿意分享"
     "真实的经历和感悟。", False),
]
LETTER = "请根据下面的信，帮我看看哪里写得不好：“老师您好，我想请三天假，因为我得了流感。”"


@pytest.mark.parametrize("mode", ["always_genre", "placeholder", "material"])
def test_an_adversarial_labeller_publishes_no_non_essay(mode: str) -> None:
    from essaybench.curate.quality_heldout import LabelledText

    items = [LabelledText(i, t, e) for i, t, e in ADVERSARY_SET]
    report = _adversary(items, mode)  # type: ignore[arg-type]
    assert report.published == [] and report.published_by_llm == []  # type: ignore[attr-defined]
    assert report.undecided == ["interview"]  # type: ignore[attr-defined]
    if mode == "always_genre":  # the essay it is asked about gets its genre
        assert report.essays_kept == 1  # type: ignore[attr-defined]


def test_the_adversaries_quote_the_task_the_placeholder_or_the_material() -> None:
    from benchmarks.curation_adversary import evidence_for, placeholder

    assert evidence_for(LETTER, "always_genre") in LETTER
    quoted = evidence_for(LETTER, "material")
    assert "老师您好" in quoted and quoted in LETTER  # the quoted letter
    assert evidence_for(LETTER, "placeholder") == placeholder() not in LETTER


def test_the_held_out_real_prompts_leak_nothing_through_an_always_genre_labeller() -> None:
    from benchmarks.curation_quality import HELDOUT_LABELS, SHARED_DATA
    from essaybench.curate.quality_heldout import load_shared_heldout

    if not SHARED_DATA.is_dir():
        pytest.skip(f"../shared/data not present ({SHARED_DATA} missing): the held-out "
                    "prompts' texts are read from there")
    items = load_shared_heldout(HELDOUT_LABELS, SHARED_DATA)
    assert len(items) == 85 and sum(not i.is_essay for i in items) == 54
    report = _adversary(items, "always_genre")  # type: ignore[arg-type]
    assert report.published_by_llm == []  # type: ignore[attr-defined]
    assert report.essays_kept >= 28  # type: ignore[attr-defined]
    # rules alone: 14 of the 54 published before issue 30's fiction, review, academic,
    # story, passage, post and quote kinds (written with this set in view), none after
    assert report.published == []  # type: ignore[attr-defined]


def test_held_out_items_are_read_by_reference_and_checked(tmp_path: Path) -> None:
    from essaybench.curate.quality_heldout import load_shared_heldout

    (tmp_path / "writingbench_zh_queries").mkdir()
    (tmp_path / "writingpreferencebench").mkdir()
    (tmp_path / "writingbench_zh_queries" / "zh_queries.jsonl").write_text(
        '{"index": "7", "query": "写一封信"}\n', encoding="utf-8")
    (tmp_path / "writingpreferencebench" / "prompts.jsonl").write_text(
        '{"question_id": "abcdef123", "prompt": "写一篇散文"}\n', encoding="utf-8")
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        '{"source": "writingbench_zh_queries", "line": 1, "key": "7", "is_essay": false}\n'
        '{"source": "writingpreferencebench", "key": "abcdef123", "is_essay": true}\n',
        encoding="utf-8")
    items = load_shared_heldout(labels, tmp_path)
    assert [(i.id, i.text, i.is_essay) for i in items] == [
        ("wb-line1", "写一封信", False), ("wpb-abcdef12", "写一篇散文", True)]
    labels.write_text('{"source": "writingbench_zh_queries", "line": 1, "key": "8", '
                      '"is_essay": false}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="has index '7', the label says '8'"):
        load_shared_heldout(labels, tmp_path)


def test_the_benchmark_skips_the_held_out_part_with_a_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    import benchmarks.curation_quality as bench

    monkeypatch.setattr(bench, "SHARED_DATA", tmp_path / "absent")
    assert bench.heldout_items() is None
    assert "skipping the held-out real prompts" in capsys.readouterr().err
