"""The essay browser's data (browser.py): the page's index and the chunk files beside it.
Every essay is in the index once and in exactly one chunk, with its prompt; run text stays
data (JSON that no ``<`` in it can break out of); the written folder holds exactly the
page's chunks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from essaybench.report.browser import browser_data, chunk_data, essay_id, json_for_script
from essaybench.report.data import load_run
from essaybench.report.drilldown import (
    EssayView,
    JudgmentView,
    PromptView,
    TraitScores,
    drilldown,
)
from essaybench.report.labels import labels_for
from essaybench.report.write import chunks_folder, copy_report, remove_stale, write_chunks
from tests.report.conftest import HOSTILE, ReportedRuns

EVIL = '"></script><script>alert(1)</script><!--<img src=x onerror=\'y\'>&amp;\u2028'


def _hostile_prompt() -> PromptView:
    judgment = JudgmentView(
        judge=f"j{EVIL}", status=f"parse_error{EVIL}", score_weighted=71.25,
        score_unweighted=70.0, analysis=f"analysis{EVIL}", error=f"error{EVIL}",
        traits=[TraitScores(f"trait{EVIL}", [(f"q{EVIL}", f"7{EVIL}")])],
        flags=[f"flag{EVIL}"], essay_genre=f"genre{EVIL}", genre_source="judge",
        second_judge=f"second{EVIL}", second_status=f"api_error{EVIL}",
        second_error=f"refused{EVIL}")
    essay = EssayView(
        model=f"m{EVIL}", sample_index=2, status=f"ok{EVIL}", row_status=f"judge {EVIL}",
        error=f"why{EVIL}", text=f"essay{EVIL}", grid_chars=812, chinese_chars=790,
        verdict=f"over_{EVIL}", deviation=0.25, off_language=True,
        finish_reason=f"length{EVIL}", latency_s=1.5, cost_usd=0.000123,
        judgments=[judgment])
    return PromptView(prompt_id=f"p{EVIL}", genre=f"g{EVIL}", genre_zh=f"记叙{EVIL}",
                      prompt_set=f"open{EVIL}", text=f"prompt{EVIL}",
                      requirement=f"about 800 characters{EVIL}",
                      constraints=[(f"kind{EVIL}", f"words{EVIL}")], essays=[essay],
                      allowed_genres=f"any{EVIL}")


def test_hostile_run_text_is_json_data_and_comes_back_whole() -> None:
    browser = browser_data([_hostile_prompt()], [f"j{EVIL}"])
    page_json = json_for_script(browser.index)
    body = browser.chunks[0].body.decode("utf-8")
    for text in (page_json, body):  # nothing can close a <script> or open a comment
        assert "<" not in text and "\u2028" not in text
    assert json.loads(page_json) == browser.index
    name, data = chunk_data(browser.chunks[0].body)
    assert name == browser.chunks[0].name
    [essay], [prompt] = data["essays"], data["prompts"]
    [j] = essay["judgments"]
    assert (essay["text"], essay["error"], essay["finish"]) == (
        f"essay{EVIL}", f"why{EVIL}", f"length{EVIL}")
    assert (prompt["text"], prompt["requirement"], prompt["allowed"], prompt["constraints"]) == (
        f"prompt{EVIL}", f"about 800 characters{EVIL}", f"any{EVIL}",
        [[f"kind{EVIL}", f"words{EVIL}"]])
    assert (j["analysis"], j["error"], j["flags"], j["genre"], j["second_error"]) == (
        f"analysis{EVIL}", f"error{EVIL}", [f"flag{EVIL}"], f"genre{EVIL}", f"refused{EVIL}")
    assert j["traits"] == [[f"trait{EVIL}", [[f"q{EVIL}", f"7{EVIL}"]]]]
    index = browser.index
    [row] = index["essays"]
    assert row[0] == essay_id(f"p{EVIL}", f"m{EVIL}", 2) and re.fullmatch("[0-9a-f]{12}", row[0])
    assert index["models"][row[2]] == f"m{EVIL}"
    assert index["statuses"][row[4]] == f"judge {EVIL}"
    assert [index["flags"][f] for f in row[5]] == [f"flag{EVIL}", "off-language"]
    assert row[6:] == [812, 0, 0.25, [71.25]]


@pytest.fixture(scope="module")
def views(reported_runs: ReportedRuns) -> tuple[list[PromptView], list[str]]:
    """r2's drill-down (19 prompts, 57 essays, one judge) and its judges."""
    data = load_run(reported_runs.store, "r2")
    prompts = drilldown(data.essays, data.judgments, labels_for(data.judgments))
    return prompts, sorted(set(data.judgments["judge"].to_list()))


@pytest.mark.parametrize("chunk_bytes", [1, 3_000, 10**9])
def test_every_essay_is_in_the_index_once_and_in_one_chunk(
        views: tuple[list[PromptView], list[str]], chunk_bytes: int) -> None:
    prompts, judges = views
    essays = [(p.prompt_id, e) for p in prompts for e in p.essays]
    browser = browser_data(prompts, judges, chunk_bytes=chunk_bytes)
    index = browser.index
    assert browser.n_essays == len(index["essays"]) == len(essays) == 57
    ids = [r[0] for r in index["essays"]]
    assert ids == [essay_id(pid, e.model, e.sample_index) for pid, e in essays]
    assert len(set(ids)) == len(ids)
    expected_chunks = {1: 19, 10**9: 1}.get(chunk_bytes)  # a prompt per chunk, or one
    assert expected_chunks is None or len(browser.chunks) == expected_chunks
    assert 1 < len(browser.chunks) < 19 or expected_chunks
    seen: list[int] = []
    for c, chunk in enumerate(browser.chunks):
        name, data = chunk_data(chunk.body)
        assert name == chunk.name == index["chunks"][c]
        for k, essay in enumerate(data["essays"]):
            at = data["first"] + k
            seen.append(at)
            row = index["essays"][at]
            prompt_row = index["prompts"][row[1]]
            pid, view = essays[at]
            assert prompt_row[0] == data["prompts"][essay["prompt"]]["id"] == pid
            assert prompt_row[3] == c  # the index sends the reader to this chunk
            assert essay.get("text") == view.text and index["models"][row[2]] == view.model
            assert [j["judge"] for j in essay["judgments"]] == [
                j.judge for j in view.judgments]
    assert seen == list(range(len(essays)))  # each exactly once, in the index's order


def test_the_folder_holds_the_chunks_and_no_stale_one(
        views: tuple[list[PromptView], list[str]], tmp_path: Path) -> None:
    prompts, judges = views
    many = browser_data(prompts, judges, chunk_bytes=3_000).chunks
    folder = tmp_path / "report_files"
    write_chunks(folder, many)
    assert sorted(p.name for p in folder.iterdir()) == sorted(c.name for c in many)
    assert all((folder / c.name).read_bytes() == c.body for c in many)
    stranger = folder / "notes.txt"
    stranger.write_text("mine", encoding="utf-8")
    [one] = browser_data(prompts, judges, chunk_bytes=10**9).chunks
    write_chunks(folder, [one])
    remove_stale(folder, [one])  # what write_report does once the new page is in place
    assert sorted(p.name for p in folder.iterdir()) == sorted([one.name, "notes.txt"])
    _, data = chunk_data((folder / one.name).read_bytes())
    assert sum(e.get("text", "").startswith(HOSTILE) for e in data["essays"]) == 19


def test_a_copy_of_the_page_takes_its_chunks_along(report_pages: dict[str, Path],
                                                   tmp_path: Path) -> None:
    """``essaybench report`` in a project copies the page to the project's reports folder:
    its chunks go with it, and an earlier copy's are removed."""
    page = report_pages["r2"]
    to = tmp_path / "reports" / "r2"
    earlier = chunks_folder(to / page.name)
    earlier.mkdir(parents=True)
    (earlier / ("0" * 16 + ".js")).write_text("old", encoding="utf-8")
    copy = copy_report(page, to)
    assert copy == to / "report.html" and copy.read_bytes() == page.read_bytes()
    source = sorted(p.name for p in chunks_folder(page).iterdir())
    assert sorted(p.name for p in chunks_folder(copy).iterdir()) == source == sorted(
        _named(copy))
    assert all((chunks_folder(copy) / n).read_bytes() == (chunks_folder(page) / n).read_bytes()
               for n in source)


def _named(page: Path) -> list[str]:
    """The chunk files the page names: the essays' and the pairwise view's."""
    html = page.read_text(encoding="utf-8")
    names: list[str] = []
    for which in ("essay-index", "pair-index"):
        raw = html.split(f'<script type="application/json" id="{which}">', 1)[1]
        names += json.loads(raw.split("</script>", 1)[0])["chunks"]
    return names
