"""The pack's HTML form in a real browser (Debian's Chromium via Playwright, offline): no
dialog from hostile essay text, no network request, and "Save CSV" downloads a file the
importer reads back (pattern of tests/report/test_report_browser.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from essaybench.bench.rubrics import load_rubric
from essaybench.bench.spot.importer import read_filled
from tests.bench.spot.test_pack import _pack

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).is_file(), reason="chromium is not installed"),
]


def test_form_saves_a_csv_the_importer_reads(tmp_path: Path) -> None:
    from playwright.sync_api import Dialog, Request, sync_playwright

    key, folder = _pack(tmp_path)
    problems: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            context = browser.new_context(offline=True, accept_downloads=True)
            page = context.new_page()

            def on_dialog(d: Dialog) -> None:
                problems.append(f"dialog {d.message}")
                d.dismiss()

            def on_request(r: Request) -> None:
                if not r.url.startswith(("file:", "blob:")):
                    problems.append(f"request {r.url}")

            page.on("dialog", on_dialog)
            page.on("request", on_request)
            page.goto((folder / "form.html").as_uri(), wait_until="load")
            page.fill("#annotator", "wang, \"q\"")  # quoted in the CSV
            inputs = page.locator("input[type=number]")
            for i in range(inputs.count()):
                inputs.nth(i).fill(str(1 + i % 10))
            page.locator("input[type=checkbox]").first.check()
            page.locator("input[data-col=comment]").first.fill("好, 但\"结尾\"弱")
            with page.expect_download() as info:
                page.click("#save")
            saved = tmp_path / "saved.csv"
            info.value.save_as(saved)
        finally:
            browser.close()
    assert problems == []
    rubric = load_rubric()
    questions = read_filled(saved, key, rubric)
    assert set(questions["annotator"]) == {"wang, \"q\""}
    assert questions.height == (len(rubric.question_ids("narrative"))
                                + len(rubric.question_ids("argumentative")))
    first = questions.filter(questions["item_id"] == questions["item_id"][0])
    assert first["accept"].all() and first["comment"][0] == "好, 但\"结尾\"弱"
    assert sorted(set(questions["human"].to_list())) == list(range(1, 11))

