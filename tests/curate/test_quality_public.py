"""Issue 29 item 5: the held-out public prompts (data/eval/heldout_public).

The set parses, every record carries its provenance and a label, and the figures the
benchmark prints equal a recount made straight from the filter and classify tables.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.curation_quality import PUBLIC_SET, public_section
from essaybench.core.paths import PROJECT_ROOT
from essaybench.curate.classify import ClassifyParams
from essaybench.curate.config import load_curate_config
from essaybench.curate.quality import Outcome, evaluate, filter_and_classify, quality_report
from essaybench.curate.quality_public import PublicItem, load_public_set, public_targets_met

PERMISSIVE = {"Apache-2.0", "MIT", "BSD-3-Clause", "BSD-2-Clause", "CC-BY-4.0", "CC0-1.0"}


@pytest.fixture(scope="module")
def items() -> list[PublicItem]:
    return load_public_set(PUBLIC_SET)


@pytest.fixture(scope="module")
def outcomes(items: list[PublicItem]) -> list[Outcome]:
    config = load_curate_config(PROJECT_ROOT / "configs" / "curate.yaml")
    params = ClassifyParams(keep_genre_choice=config.classify.keep_genre_choice)
    return evaluate(items, config.filter, params).outcomes


def test_every_record_has_provenance_a_permissive_licence_and_a_label(
        items: list[PublicItem]) -> None:
    assert len(items) >= 200
    assert len({i.id for i in items}) == len(items)
    for item in items:
        assert item.source.license in PERMISSIVE, item.id
        assert len(item.source.commit) == 40 and item.source.path and item.source.item
        assert item.note.strip()
        assert item.is_essay == bool(item.allowed_genres)
    essays = [i for i in items if i.is_essay]
    assert essays and len(essays) < len(items)
    # the README's table counts what the file holds
    readme = (PUBLIC_SET.parent / "README.md").read_text(encoding="utf-8")
    for path, n in Counter(i.source.path for i in items).items():
        assert path in readme, path
        assert n > 0
    assert f"{len(items)} prompts, {len(essays)} essays" in readme


def test_a_bad_record_is_refused_with_file_and_line(tmp_path: Path) -> None:
    good = PUBLIC_SET.read_text(encoding="utf-8").splitlines()[0]
    record = json.loads(good)
    cases = [
        ({**record, "is_essay": False, "allowed_genres": ["narrative"]}, "allows no genre"),
        ({**record, "is_essay": True, "allowed_genres": ["any", "narrative"]}, "alone"),
        ({**record, "source": {**record["source"], "commit": "abc"}}, "source.commit"),
        ({k: v for k, v in record.items() if k != "source"}, "source"),
    ]
    for bad, words in cases:
        path = tmp_path / "bad.jsonl"
        path.write_text(good + "\n" + json.dumps(bad, ensure_ascii=False) + "\n",
                        encoding="utf-8")
        with pytest.raises(ValueError, match=rf"bad\.jsonl:2: .*{words}|bad\.jsonl:2: {words}"):
            load_public_set(path)
    path = tmp_path / "dup.jsonl"
    path.write_text(good + "\n" + good + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="appears more than once"):
        load_public_set(path)


def test_the_printed_figures_match_a_recount_from_the_stage_tables(
        items: list[PublicItem], outcomes: list[Outcome]) -> None:
    config = load_curate_config(PROJECT_ROOT / "configs" / "curate.yaml")
    params = ClassifyParams(keep_genre_choice=config.classify.keep_genre_choice)
    filtered, stage = filter_and_classify([(i.id, i.text) for i in items], config.filter,
                                          params)
    rows = {r["record_id"]: r for r in stage.table.iter_rows(named=True)}
    label = {i.id: i for i in items}
    decided = correct = essays_decided = 0
    published_non_essays = []
    for rid, row in rows.items():
        allowed = set(row["allowed_genres"] or ([row["genre"]] if row["genre"] else []))
        if allowed:
            decided += 1
            correct += allowed == set(label[rid].allowed_genres)
            essays_decided += label[rid].is_essay
        if row["decision"] == "kept" and not label[rid].is_essay:
            published_non_essays.append(rid)
    assert len(filtered) == len(items)
    report = quality_report(outcomes)
    assert (report.decided, report.decided_correct) == (decided, correct)
    assert report.essays_decided == essays_decided
    assert sorted(report.leaked) == sorted(published_non_essays)
    assert report.set_checked == 0 and report.length_checked == 0  # not labelled here

    text, met, _ = public_section(PUBLIC_SET, config.filter, params, 5)
    assert f"({correct}/{decided}; a non-essay given a genre counts wrong)" in text
    assert f"({essays_decided}/{sum(i.is_essay for i in items)}; genre, choice" in text
    assert f"({len(published_non_essays)}/{sum(not i.is_essay for i in items)}" in text
    assert met == {f"public prompts (tuned since): {k}": v
                   for k, v in public_targets_met(report).items()}


def test_rules_keep_every_non_essay_out_and_decide_the_essays(
        outcomes: list[Outcome]) -> None:
    """A regression guard since the rules of issue 29 item 5 (after labelling; the rules were
    then changed with this set in view, so it is no held-out measure any more): all three
    targets are met since issue 30's reflection cue (a 个人心得 offering a view or a story
    is left to review instead of read as narrative only)."""
    report = quality_report(outcomes)
    met = public_targets_met(report)
    assert met["no non-essay published"], report.leaked
    assert met["decided >= 90%"], report.essays_decided
    assert met["genre precision >= 0.97"], (report.decided_correct, report.decided)


def test_an_always_genre_labeller_publishes_no_public_non_essay(
        items: list[PublicItem]) -> None:
    """Issue 30's target on the public set (the fake server answering "essay,
    argumentative" with evidence from the task for every prompt it is asked about): it
    published lw-lbw-067, a 写出一个有趣的故事 with a length, before stories asked for with
    no essay form named were no essays. The set was tuned against since: a guard."""
    from benchmarks.curation_adversary import adversary_report
    from essaybench.curate.quality_heldout import LabelledText

    config = load_curate_config(PROJECT_ROOT / "configs" / "curate.yaml")
    params = ClassifyParams(keep_genre_choice=config.classify.keep_genre_choice)
    report = adversary_report([LabelledText(i.id, i.text, i.is_essay) for i in items],
                              "always_genre", config.filter, params)
    assert report.undecided and report.llm_status.get("ok", 0) > 0  # it was asked
    assert report.published == [] and report.published_by_llm == []
