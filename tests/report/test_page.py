"""The report page of real runs: one file that loads nothing from the network (one script
allowed by its hash, and the essay chunks beside it that the script loads), every section
filled in or saying why not, and hostile text from essays and error bodies kept as data,
never markup."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.generate import GenerateParams
from essaybench.bench.judge.request import JudgeParams
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.session import open_gateway
from essaybench.report import write_report
from essaybench.report.browser import chunk_data
from essaybench.report.page import script_hash
from essaybench.report.write import chunks_folder
from essaybench.stages.aggregate import aggregate_stage
from essaybench.stages.generate import generate_stage
from essaybench.stages.judge import judge_stage
from essaybench.store import Store
from tests.conftest import JudgedRun
from tests.llm.conftest import fake_spec, registry_of
from tests.report.conftest import HOSTILE, HOSTILE_ERROR

LOADING_TAGS = {"link", "img", "iframe", "object", "embed", "audio", "video", "source",
                "base", "frame", "track", "image", "picture"}
URL_ATTRIBUTES = {"src", "href", "action", "formaction", "data", "poster", "srcset",
                  "background", "xlink:href", "ping"}
SECTIONS = ("leaderboard", "table5", "differences", "traits", "compliance", "length",
            "pairwise", "decision", "alerts", "failures", "essays")


class Page(HTMLParser):
    """Every tag with its attributes, the scripts' text and the text of each class."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self.script_types: list[str | None] = []
        self.texts: list[str] = []
        self._in_script = False
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")
            self.script_types.append(dict(attrs).get("type"))

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data
        else:
            self.texts.append(data)

    def text(self) -> str:
        """The page's text, whitespace collapsed."""
        return " ".join("".join(self.texts).split())

    def attrs(self, name: str) -> list[str]:
        return [a[name] or "" for _, a in self.tags if name in a]


def assert_self_contained(html: str) -> Page:
    page = Page(html)
    assert not {tag for tag, _ in page.tags} & LOADING_TAGS
    for tag, attrs in page.tags:
        for name, value in attrs.items():
            if name in URL_ATTRIBUTES:
                assert (value or "").startswith("#"), (tag, name, value)
            assert not name.startswith("on"), (tag, name, value)  # no event handler
    assert "http:" not in html and "https:" not in html and "@import" not in html
    assert not re.search(r"url\((?!#)", html)
    [csp] = [a["content"] or "" for t, a in page.tags
             if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert "default-src 'none'" in csp
    # ours, and only ours, allowed by its hash, and what it loads (the essay chunks)
    [script] = [s for s, t in zip(page.scripts, page.script_types, strict=True)
                if t != "application/json"]
    assert f"script-src {script_hash(script)} 'strict-dynamic'" in csp
    data = [s for s, t in zip(page.scripts, page.script_types, strict=True)
            if t == "application/json"]
    # the essay index and, where pairwise ran, the pairwise view's: data
    assert len(data) <= 2 and all(json.loads(d) for d in data)
    return page


def test_the_page_is_self_contained_and_complete(report_pages: dict[str, Path]) -> None:
    html = report_pages["r2"].read_text(encoding="utf-8")
    page = assert_self_contained(html)
    ids = page.attrs("id")
    assert all(s in ids for s in SECTIONS)
    assert html.count("<svg ") >= 8  # leaderboard, forest, traits ×2, compliance, scatter, …
    text = page.text()
    assert "Compared with run r1" in text and "calibrated" in text  # alerts, drift
    assert "indistinguishable" in text and "Bradley–Terry rating" in text
    assert "议论文" in text  # the rubric's Chinese genre names
    assert "57 of 57 essays" in text  # 3 writers × (16 + 3 open-genre prompts)
    assert "was not run" not in text and "did not run" not in text
    assert report_pages["r2"].stat().st_size < 2_000_000
    # the essays' texts are beside the page, in the chunk files its index names
    named = [name for s, t in zip(page.scripts, page.script_types, strict=True)
             if t == "application/json" for name in json.loads(s)["chunks"]]
    folder = chunks_folder(report_pages["r2"])
    assert len(named) > 1 and sorted(p.name for p in folder.iterdir()) == sorted(named)


def test_hostile_text_is_shown_as_text(report_pages: dict[str, Path]) -> None:
    html = report_pages["r2"].read_text(encoding="utf-8")
    for raw in ("<script>alert", "</textarea>", '"onmouseover', "<img src=x"):
        assert raw not in html  # as text they are escaped; as markup they would be there
    page = Page(html)
    assert [t for t, _ in page.tags].count("script") == 3  # the script and two indexes
    # The texts are data in the chunks (the browser puts them on the page as text:
    # test_report_browser), whole.
    chunks = [chunk_data(p.read_bytes())[1]
              for p in sorted(chunks_folder(report_pages["r2"]).iterdir())]
    essays = [e for c in chunks for e in c.get("essays", [])]  # (pair chunks have none)
    assert sum(e.get("text", "").startswith(HOSTILE) for e in essays) == 19  # qwen-writer's
    assert any(HOSTILE_ERROR in e.get("error", "") for e in essays)  # a provider's error


def test_sections_without_data_say_so(judged_copy: JudgedRun) -> None:
    store, judged, _ = judged_copy
    aggregate_stage(store, "r9", judged)  # a rerun with no pairwise, stats, alerts or drift
    html = write_report(store, "r9").read_text(encoding="utf-8")
    text = assert_self_contained(html).text()
    assert "pairwise was not run for run r9" in text
    assert "the stats stage did not run for run r9" in text
    assert "the alerts stage did not run for run r9" in text
    assert "The drift stage did not run" in text
    assert "Every essay and judgment came back ok" in text
    # Without intervals the leaderboard still ranks the means.
    assert "qwen-writer" in text and "—" in text
    again = write_report(store, "r9").read_text(encoding="utf-8")
    assert again == html  # reproducible: the same store gives the same page


JUDGE_DOWN = FakeScenario.model_validate({
    "models": {"*": {"reply": "template", "template": "{model}：{prompt}"}},
    "faults": [{"kind": "status", "status": 400, "models": ["judge"]}]})


def test_a_run_whose_judge_failed_every_essay(curated_copy: Store) -> None:
    store = curated_copy
    config = BenchmarkConfig(per_genre=1, generate=GenerateParams(models=("writer",)),
                             judge=JudgeParams(judges=["judge"]))
    models = ["writer", "judge"]
    with run_fake_server(JUDGE_DOWN) as server, open_gateway(
            registry_of(*(fake_spec(m, model_id=m) for m in models)), store.root, models,
            base_urls=dict.fromkeys(models, server.base_url)) as session:
        gen = generate_stage(store, "down", config, session)
        judge_stage(store, "down", config, gen, session)
    html = write_report(store, "down").read_text(encoding="utf-8")
    text = assert_self_contained(html).text()
    assert "No ok judgment carries trait scores" in text
    assert "No paired differences" in text
    assert "Judge judge: no ok judgment to plot" in text
    assert text.count("api_error") >= 4  # each failed judgment, in the failures list
