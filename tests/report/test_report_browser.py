"""The report page in a real browser: Debian's Chromium driven by Playwright, offline.

Loaded from disk, the page makes no request but its own, logs no error, runs no script of
the essays (no dialog opens), shows the leaderboard and its charts, filters the essays by
model and status, and draws Chinese with a CJK font (the font Chromium actually used for a
prompt's text, asked over the DevTools protocol — ``document.fonts.check`` answers true
even for a font that is not installed). A screenshot of the top of the page is saved in
the test's tmp directory. ``./dev test`` installs ``chromium`` and ``fonts-noto-cjk`` (apt)
when they are missing.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.report.conftest import HOSTILE

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, ConsoleMessage, Dialog, Page, Route

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [
    pytest.mark.slow,  # a browser start and a page of ~50 essays: a few seconds
    pytest.mark.skipif(not Path(CHROMIUM).is_file(),
                       reason="chromium is not installed (./dev test installs it with apt "
                              "when run as root: apt-get install chromium fonts-noto-cjk)"),
]
CJK_FACES = ("CJK", "Source Han", "WenQuanYi", "PingFang", "YaHei", "SimHei", "SimSun")


def _visible_essays(page: Page) -> list[dict[str, str]]:
    return list(page.evaluate("""() => Array.from(document.querySelectorAll('details.essay'))
        .filter(e => e.offsetParent !== null).map(e => ({...e.dataset}))"""))


class Watch:
    """What the page asks for and complains about."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.requests: list[str] = []
        self.routed: list[str] = []
        self.problems: list[str] = []

    def route(self, found: Route) -> None:
        # Anything but the page itself that reaches the network layer stops here.
        self.routed.append(found.request.url)
        if found.request.url == self.url:
            found.continue_()
        else:
            found.abort()

    def console(self, msg: ConsoleMessage) -> None:
        if msg.type in ("error", "warning"):
            self.problems.append(f"console {msg.type}: {msg.text}")

    def dialog(self, opened: Dialog) -> None:  # alert(1) from an essay would open one
        self.problems.append(f"dialog: {opened.message}")
        opened.dismiss()

    def attach(self, context: BrowserContext) -> Page:
        context.route("**/*", self.route)
        page = context.new_page()
        page.on("request", lambda request: self.requests.append(request.url))
        page.on("console", self.console)
        page.on("pageerror", lambda exc: self.problems.append(f"page error: {exc}"))
        page.on("dialog", self.dialog)
        return page


def test_the_report_in_chromium_offline(report_pages: dict[str, Path], tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    url = report_pages["r2"].resolve().as_uri()
    watch = Watch(url)
    started = time.perf_counter()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            context = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})
            page = watch.attach(context)
            page.goto(url, wait_until="load")

            # The leaderboard and a chart are on screen.
            board = page.locator("table.leaderboard").first
            assert board.is_visible() and "deepseek-writer" in board.inner_text()
            chart = page.locator("figure.chart svg").first
            chart.scroll_into_view_if_needed()
            box = chart.bounding_box()
            assert chart.is_visible() and box is not None and box["width"] > 100
            assert page.locator("figure.chart svg").count() >= 8

            # Every essay (3 writers × 19 prompts, 3 of them open-genre), then only the
            # chosen model's, then only the failures.
            assert len(_visible_essays(page)) == 57
            page.select_option("#filter-model", "gpt-writer")
            shown = _visible_essays(page)
            assert len(shown) == 19 and {e["model"] for e in shown} == {"gpt-writer"}
            assert page.locator("#filter-count").inner_text() == "19 of 57 essays"
            page.select_option("#filter-model", "")
            page.select_option("#filter-status", "api_error")
            failed = _visible_essays(page)
            assert failed and {(e["model"], e["status"]) for e in failed} == {
                ("deepseek-writer", "api_error")}
            hidden_prompts = page.locator("article.prompt[hidden]").count()
            assert 0 < hidden_prompts < 19  # prompts without a failure are hidden whole
            page.select_option("#filter-status", "")

            # The hostile essay is text on the page, not markup.
            essay = page.locator("details.essay[data-model='qwen-writer']").first
            essay.locator("summary").click()
            assert essay.locator(".essay-text").inner_text().startswith(HOSTILE)
            assert page.evaluate("document.scripts.length") == 1

            # Chinese is drawn with a CJK font, not boxes.
            prompt = page.locator(".prompt-text").first
            prompt.scroll_into_view_if_needed()
            box = prompt.bounding_box()
            assert box is not None and box["width"] > 0 and box["height"] > 0
            assert page.evaluate("document.fonts.check('16px \"Noto Sans CJK SC\"', '中文')")
            # Asking the DevTools protocol is the test's doing, not the page's: CSS.enable
            # makes some Chromium versions (Debian's 150) fetch the file again and log
            # "Unsafe attempt to load URL <it> from frame with URL <it>". Exactly that is
            # set aside below; anything else still counts.
            asked_from, requested = len(watch.problems), len(watch.requests)
            cdp = context.new_cdp_session(page)
            cdp.send("DOM.enable")
            cdp.send("CSS.enable")
            root = cdp.send("DOM.getDocument")["root"]["nodeId"]
            node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": ".prompt-text"})
            fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node["nodeId"]})["fonts"]
            cjk = [f for f in fonts if any(face in f["familyName"] for face in CJK_FACES)]
            assert cjk and cjk[0]["glyphCount"] > 0, fonts

            shot = tmp_path / "report.png"  # the top of the page: title and leaderboard
            page.evaluate("window.scrollTo(0, 0)")
            page.screenshot(path=str(shot))
            assert shot.stat().st_size > 10_000
        finally:
            browser.close()
    devtools_reload = f"console error: Unsafe attempt to load URL {url} from frame with URL {url}."
    assert watch.problems[:asked_from] == []
    assert [p for p in watch.problems[asked_from:] if not p.startswith(devtools_reload)] == []
    assert watch.requests[:requested] == [url]  # the page itself, once, nothing else
    assert set(watch.requests[requested:]) <= {url}
    assert set(watch.routed) <= {url}
    print(f"browser test: {time.perf_counter() - started:.1f} s; screenshot {shot}")


def test_the_watch_sees_a_page_that_loads_or_fails(tmp_path: Path) -> None:
    """The checks above are not vacuous: a page that fetches an image and logs an error is
    caught (the offline context and the route stop the fetch)."""
    from playwright.sync_api import sync_playwright

    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><img src="https://example.invalid/x.png">'
                   '<script>console.error("boom")</script>', encoding="utf-8")
    watch = Watch(bad.as_uri())
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = watch.attach(browser.new_context(offline=True))
            page.goto(watch.url, wait_until="load")
        finally:
            browser.close()
    assert "https://example.invalid/x.png" in watch.requests
    assert any("boom" in p for p in watch.problems)
