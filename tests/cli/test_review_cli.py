"""``essaybench curate review``: curate, review, curate again (issue 15, item 6).

A small chat log is curated through the library (no Prefect: the flow test of the same
loop is tests/flows/test_curate_review_flow.py); two of its prompts name no genre, so
classification leaves them unclassified. The command lists them, writes decisions to
the override file the curate config names, and the next classify labels them "manual".
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner, Result

from essaybench.cli import app
from essaybench.cli.review import review_interactively
from essaybench.curate.config import load_curate_config
from essaybench.curate.funnel import CURATE_STAGES
from essaybench.curate.labeler import Genre, PromptSetLabel
from essaybench.curate.overrides import OverrideEntry, load_overrides
from essaybench.curate.review import review_items
from essaybench.stages.curate import publish_prompt_set, run_curation_stage
from essaybench.store import Store
from tests.helpers import copy_store

CHAT = [
    "请写一篇作文，题目自拟，不少于600字。",  # no genre word: unclassified
    "请以“门”为题写一篇文章，不少于700字。",  # no genre word: unclassified
    "帮我写一篇关于坚持的议论文，800字左右",
    "写一篇说明文，介绍大熊猫的生活习性",
    "以“那一刻，我长大了”为题写一篇记叙文",
    "你好",
]


def _project(folder: Path) -> Path:
    """A chat log, its sources config, an empty override file and the curate config."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "chat.jsonl").write_text("".join(
        json.dumps({"id": f"a{i}", "query": q}, ensure_ascii=False) + "\n"
        for i, q in enumerate(CHAT)), encoding="utf-8")
    (folder / "sources.yaml").write_text(
        "sources:\n  - {name: chat, kind: chat_jsonl, path: chat.jsonl}\n", encoding="utf-8")
    (folder / "overrides.yaml").write_text("version: 1\noverrides:\n", encoding="utf-8")
    config = folder / "curate.yaml"
    config.write_text("sources: sources.yaml\nclassify: {mode: rules, overrides_path: "
                      "overrides.yaml}\n", encoding="utf-8")
    return config


def _curate(store: Store, config: Path, run_id: str, from_stage: str = "collect") -> str:
    """The curation chain through the library; the published prompt set's version."""
    cfg = load_curate_config(config)
    snap = store.latest_ok_snapshot(CURATE_STAGES[CURATE_STAGES.index(from_stage) - 1]) \
        if from_stage != "collect" else None
    for stage in CURATE_STAGES[CURATE_STAGES.index(from_stage):]:
        snap = run_curation_stage(store, run_id, stage, cfg, snap)
    assert snap is not None
    return publish_prompt_set(store, run_id, snap).version


@pytest.fixture(scope="module")
def curated_once(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Store, str]:
    folder = tmp_path_factory.mktemp("byod")
    config = _project(folder / "project")
    store = Store(folder / "store")
    return config, store, _curate(store, config, "first")


@pytest.fixture
def project(curated_once: tuple[Path, Store, str], tmp_path: Path) -> tuple[Path, Store, str]:
    """A private copy (config folder and store) to write to."""
    config, store, version = curated_once
    shutil.copytree(config.parent, tmp_path / "project")
    return tmp_path / "project" / "curate.yaml", copy_store(store, tmp_path / "store"), version


def review(config: Path, store: Store, *args: str) -> Result:
    return CliRunner().invoke(app, ["curate", "review", "--config", str(config), "--store",
                                    str(store.root), *args], terminal_width=200)


def _unclassified(store: Store) -> list[str]:
    classified = store.latest_ok_snapshot("classify")
    assert classified is not None
    table = classified.read()
    return table.filter(table["decision"] == "unclassified")["prompt_id"].to_list()


def _classified_row(store: Store, prompt_id: str) -> dict[str, object]:
    classified = store.latest_ok_snapshot("classify")
    assert classified is not None
    table = classified.read()
    return table.filter(table["prompt_id"] == prompt_id).row(0, named=True)


def test_review_lists_the_unclassified_prompts_with_evidence_and_reason(
    curated_once: tuple[Path, Store, str],
) -> None:
    config, store, _ = curated_once
    pending = _unclassified(store)
    assert len(pending) >= 2  # the two prompts that name no genre
    result = review(config, store)
    assert result.exit_code == 0, result.output
    for prompt_id in pending:
        assert prompt_id in result.output
    assert "needs genre" in result.output and "genre_undecided" in result.output
    assert "题目自拟" in result.output and "chat line 1" in result.output
    assert f"{len(pending)} prompt(s) to review" in result.output


def test_the_listing_shows_the_records_own_id(curated_once: tuple[Path, Store, str]) -> None:
    """Issue 29: a reviewer finds the record in the raw source by its own id (the chat log's
    "id" field), besides the source and line."""
    config, store, _ = curated_once
    result = review(config, store, "--list")
    assert result.exit_code == 0, result.output
    assert "chat line 1 (id a0)" in result.output and "chat line 2 (id a1)" in result.output


def test_curate_review_decide_then_curate_again_labels_them_manual(
    project: tuple[Path, Store, str],
) -> None:
    config, store, first_version = project
    pending = _unclassified(store)
    kept = _classified_row(store, next(
        p for p in store.latest_ok_snapshot("classify").read()["prompt_id"]  # type: ignore[union-attr]
        if p not in pending))
    decisions = [f"{pending[0]}=narrative", f"{pending[1]}=记叙文,open"]
    # a wrong rule label can be corrected too: the kept prompt becomes descriptive
    decisions.append(f"{kept['prompt_id']}=descriptive")
    result = review(config, store, *(f"--decide={d}" for d in decisions),
                    "--reviewer", "li", "--note", "reviewed")
    assert result.exit_code == 0, result.output
    assert "wrote 3 decision(s)" in result.output
    written = load_overrides(config.parent / "overrides.yaml")
    assert written[pending[0]] == OverrideEntry(genre=Genre.NARRATIVE, note="reviewed",
                                                reviewer="li")
    assert written[pending[1]].prompt_set == PromptSetLabel.OPEN

    again = _curate(store, config, "second", from_stage="classify")
    assert _unclassified(store) == []
    for prompt_id in pending:
        row = _classified_row(store, prompt_id)
        assert (row["decision"], row["genre"], row["genre_source"]) == (
            "kept", "narrative", "manual")
        assert str(row["genre_evidence"]).startswith("manual (li): reviewed | was undecided")
    row = _classified_row(store, str(kept["prompt_id"]))
    assert (row["genre"], row["genre_source"]) == ("descriptive", "manual")
    assert f"was rule:{kept['genre']}" in str(row["genre_evidence"])
    assert _classified_row(store, pending[1])["set_source"] == "manual"
    assert again != first_version
    record = store.get_prompt_set(again)
    assert record is not None and record["funnel"]["unclassified"] == 0
    published = [json.loads(line) for line in (store.root / record["jsonl_path"])
                 .read_text(encoding="utf-8").splitlines()]
    assert {p["prompt_id"] for p in published} >= set(pending)
    # nothing is left to review
    assert "nothing to review" in review(config, store).output


def test_export_then_apply(project: tuple[Path, Store, str], tmp_path: Path) -> None:
    config, store, _ = project
    pending = _unclassified(store)
    sheet = tmp_path / "review.yaml"
    result = review(config, store, "--export", str(sheet))
    assert result.exit_code == 0, result.output
    doc = yaml.safe_load(sheet.read_text(encoding="utf-8"))
    assert [item["prompt_id"] for item in doc["items"]] == pending
    doc["items"][0]["genre"] = "说明文"
    doc["items"][0]["note"] = "介绍一件事物"
    sheet.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    result = review(config, store, "--apply", str(sheet), "--reviewer", "wang")
    assert result.exit_code == 0, result.output
    assert load_overrides(config.parent / "overrides.yaml") == {
        pending[0]: OverrideEntry(genre=Genre.EXPOSITORY, note="介绍一件事物", reviewer="wang")}
    # the decided prompt is no longer listed; --all lists it with the decision
    listed = review(config, store).output
    assert pending[0] not in listed and pending[1] in listed
    assert "override file says: expository" in review(config, store, "--all").output


def test_review_of_a_published_version_and_of_a_run(project: tuple[Path, Store, str]) -> None:
    config, store, version = project
    pending = _unclassified(store)
    for args in (["--version", version], ["--run", "first"]):
        result = review(config, store, *args)
        assert result.exit_code == 0, result.output
        assert all(p in result.output for p in pending)


def _error(result: Result) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


def test_mistakes_are_one_line_and_exit_2(project: tuple[Path, Store, str],
                                         tmp_path: Path) -> None:
    config, store, _ = project
    pending = _unclassified(store)[0]
    unknown = "p" + "0" * 15
    assert _error(review(config, store, "--decide", f"{unknown}=narrative")) == (
        f"error: --decide: {unknown}: not a prompt of classify snapshot "
        f"{store.latest_ok_snapshot('classify').snapshot_id}; the ids are those "  # type: ignore[union-attr]
        "essaybench curate review lists")
    assert _error(review(config, store, "--decide", f"{pending}=poem")).startswith(
        f"error: invalid value for --decide: '{pending}=poem': 'poem' is neither a genre nor")
    blocked = tmp_path / "file"
    blocked.write_text("", encoding="utf-8")
    assert _error(review(config, store, "--overrides", str(blocked / "o.yaml"), "--decide",
                         f"{pending}=n")).startswith(
        f"error: cannot write override file {blocked / 'o.yaml'}: ")
    assert _error(review(config, store, "--version", "ps-nope")).startswith(
        "error: no prompt set 'ps-nope' in")
    assert _error(review(config, store, "--run", "nope")).startswith(
        "error: cannot review: no successful 'classify' snapshot in run nope of")
    assert _error(review(config, store, "--export", "x.yaml", "--decide", f"{pending}=n")) == (
        "error: give one of --decide, --export and --apply")
    result = CliRunner().invoke(app, ["curate", "--store", str(store.root), "review"])
    assert _error(result) == (
        "error: --store given before 'review' applies to the curation run, not to it; put the "
        "subcommand's options after its name (essaybench curate review --help)")
    assert load_overrides(config.parent / "overrides.yaml") == {}  # nothing was written


def test_curate_is_still_a_command_with_options(tmp_path: Path) -> None:
    """``essaybench curate [options]`` keeps working: its options reach the curation."""
    result = CliRunner().invoke(app, ["curate", "--from-stage", "nope", "--store",
                                      str(tmp_path)])
    assert _error(result).startswith("error: invalid value for --from-stage: 'nope'; choose")
    helped = CliRunner().invoke(app, ["curate", "--help"], terminal_width=200)
    assert helped.exit_code == 0 and "--from-stage" in helped.output
    assert "review" in helped.output


def test_interactive_review_writes_each_answer_at_once(
    curated_once: tuple[Path, Store, str],
) -> None:
    _, store, _ = curated_once
    classified = store.latest_ok_snapshot("classify")
    assert classified is not None
    items = review_items(classified.read(), {})
    written: list[Mapping[str, OverrideEntry]] = []

    def write(decisions: Mapping[str, OverrideEntry]) -> Mapping[str, OverrideEntry]:
        written.append(dict(decisions))
        return decisions

    out = Console(file=io.StringIO(), width=120)
    # item 1: a wrong word, then narrative with a note; item 2: skipped; then quit
    answers = io.StringIO("poem\nnarrative\n题目只给了话题\n\nq\n")
    count = review_interactively(items, write, out, reviewer="li", stream=answers)
    assert count == 1
    assert written == [{items[0].prompt_id: OverrideEntry(
        genre=Genre.NARRATIVE, note="题目只给了话题", reviewer="li")}]
    shown = out.file.getvalue()  # type: ignore[attr-defined]
    assert "'poem' is neither a genre nor a set" in shown
    assert items[0].text[:8] in shown and items[0].genre_evidence[:20] in shown


def test_decide_not_an_essay_any_and_a_choice_then_curate_again(
    project: tuple[Path, Store, str],
) -> None:
    config, store, _ = project
    pending = _unclassified(store)
    refused = review(config, store, "--decide", f"{pending[0]}=not_essay")
    assert _error(refused).startswith(
        f"error: invalid value for --decide: '{pending[0]}=not_essay': not_essay needs the "
        "reviewer's reason")
    result = review(config, store, "--decide", f"{pending[0]}=not_essay:只是一个标题，不是作文",
                    "--decide", f"{pending[1]}=文体不限", "--reviewer", "li")
    assert result.exit_code == 0, result.output
    assert "wrote 2 decision(s)" in result.output and "still needs" not in result.output
    written = load_overrides(config.parent / "overrides.yaml")
    assert written[pending[0]] == OverrideEntry(not_essay=True, note="只是一个标题，不是作文",
                                                reviewer="li")
    assert written[pending[1]] == OverrideEntry(allowed_genres=("any",), reviewer="li")
    assert "nothing to review" in review(config, store).output  # both settled
    listed = review(config, store, "--all").output
    assert "override file says: not an essay (只是一个标题，不是作文)" in listed
    assert "override file says: any genre" in listed

    version = _curate(store, config, "second", from_stage="classify")
    removed, open_genre = (_classified_row(store, p) for p in pending)
    assert (removed["decision"], removed["reason"]) == ("unclassified", "reviewed_not_essay")
    assert "manual (li): 只是一个标题，不是作文" in str(removed["detail"])
    assert (open_genre["decision"], open_genre["allowed_genres"]) == ("kept", ["any"])
    record = store.get_prompt_set(version)
    assert record is not None
    published = {json.loads(line)["prompt_id"] for line in (store.root / record["jsonl_path"])
                 .read_text(encoding="utf-8").splitlines()}
    assert pending[1] in published and pending[0] not in published
    # a choice of two genres replaces the open genre
    result = review(config, store, "--decide", f"{pending[1]}=argumentative,narrative")
    assert result.exit_code == 0, result.output
    assert load_overrides(config.parent / "overrides.yaml")[pending[1]].allowed_genres == (
        "argumentative", "narrative")


def test_an_exported_file_with_allowed_genres_any_or_not_essay_is_applied(
    project: tuple[Path, Store, str], tmp_path: Path,
) -> None:
    config, store, _ = project
    pending = _unclassified(store)
    sheet = tmp_path / "review.yaml"
    assert review(config, store, "--export", str(sheet)).exit_code == 0
    doc = yaml.safe_load(sheet.read_text(encoding="utf-8"))
    doc["items"][0]["allowed_genres"] = ["any"]
    doc["items"][1].update(not_essay=True, note="新闻稿")
    sheet.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    result = review(config, store, "--apply", str(sheet))
    assert result.exit_code == 0, result.output
    assert "wrote 2 decision(s)" in result.output
    assert load_overrides(config.parent / "overrides.yaml") == {
        pending[0]: OverrideEntry(allowed_genres=("any",)),
        pending[1]: OverrideEntry(not_essay=True, note="新闻稿")}


def test_the_listing_shows_what_the_labeller_answered(
    curated_once: tuple[Path, Store, str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    import polars as pl

    from essaybench.cli.common import console
    from essaybench.cli.review import print_items

    _, store, _ = curated_once
    classified = store.latest_ok_snapshot("classify")
    assert classified is not None
    note = ("llm parse_error: evidence '流' shows nothing (at least 4 characters holding a "
            "cue): labels argumentative rejected")
    table = classified.read().with_columns(pl.lit(note).alias("llm_answer"))
    monkeypatch.setattr(console, "_width", 80)
    with console.capture() as captured:
        print_items(review_items(table, {}), classified, Path("o.yaml"), 0)
    shown = " ".join(captured.get().split())
    assert "labeller: llm parse_error: evidence '流' shows nothing" in shown
