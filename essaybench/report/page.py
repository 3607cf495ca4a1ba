"""The report page: the template filled in with a run's sections, as one HTML string.

Every string from the run (essays, prompts, judge analyses, errors, model names) reaches
the page through Jinja2 with autoescaping on (``&<>"'`` escaped, as ``html.escape``
does), so no run text becomes markup or script. What the template inserts unescaped
(``|safe``) is made here: the charts (SVG drawn by matplotlib, checked in ``svg.py``), the
essay browser's and the pairwise view's indexes (``browser.py``, ``pairs.py``: JSON with
every ``<`` escaped, in ``<script type="application/json">`` elements the browser never
runs) and the page's own CSS and script, read from ``templates/``. The essays' texts and
the pairwise analyses are not in the page: they go to chunk files beside it
(``browser.py`` says why and how), which ``write.py`` writes. The page's
Content-Security-Policy allows no network load at all, only the script whose hash it
names, and the scripts that one creates (the chunks: ``'strict-dynamic'``).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import polars as pl
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from essaybench.bench.compliance import compliance_table
from essaybench.core.paths import resource
from essaybench.llm.cost_basis import upper_bound_note
from essaybench.report.adaptive import adaptive_view
from essaybench.report.agreement import LENGTH_CONTROL_NOTE, AgreementView, agreement_view
from essaybench.report.browser import (
    CHUNK_BYTES,
    PER_PAGE,
    Chunk,
    json_for_script,
)
from essaybench.report.charts_profile import compliance_chart
from essaybench.report.data import RunData
from essaybench.report.essays_job import PROCESS_FROM_ESSAYS, EssaysInput, EssaysJob
from essaybench.report.format import coverage, number, percent, signed
from essaybench.report.labels import labels_for
from essaybench.report.sections import JudgeSection, judge_section
from essaybench.report.spot_trend import spot_trend_view
from essaybench.report.svg import ChartIds, font_note
from essaybench.report.tables import LeaderRow, failures, judges_of, model_facts
from essaybench.store import Store

TEMPLATES = resource("templates", package="essaybench.report")


# The position-bias table's columns (bench/pairwise/tables.position_bias) as the page
# heads them: (column, heading, "count" | "rate")
POSITION_BIAS_COLUMNS = (
    ("pairs_ok", "pairs judged in both orders", "count"),
    ("swap_flips", "verdict changed when swapped", "count"),
    ("swap_flip_rate", "swap-flip rate", "rate"),
    ("calls_ok", "calls ok", "count"),
    ("first_wins", "first position won", "count"),
    ("second_wins", "second position won", "count"),
    ("ties", "ties", "count"),
    ("first_position_win_rate", "first-position win rate (ties left out)", "rate"),
)


@dataclass(frozen=True)
class DecisionRow:
    model: str
    quality: list[LeaderRow | None]  # per judge, in the page's judge order
    facts: dict[str, Any]


@lru_cache(maxsize=1)
def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                      keep_trailing_newline=True)
    env.filters.update(num=number, pct=percent, cov=coverage, signed=signed)
    return env


def script_hash(script: str) -> str:
    """The CSP source of an inline script (``'sha256-…'``)."""
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def _decisions(model_facts: pl.DataFrame, sections: list[JudgeSection]) -> list[DecisionRow]:
    facts = {r["model"]: r for r in model_facts.iter_rows(named=True)}
    boards = [{r.model: r for r in s.leaderboard} for s in sections]
    models = sorted(set(facts) | {m for b in boards for m in b})
    return [DecisionRow(m, [b.get(m) for b in boards], facts.get(m, {})) for m in models]


def _agreement(data: RunData, sections: list[JudgeSection]) -> AgreementView | None:
    raw = {s.judge: {r.model: r.mean for r in s.leaderboard} for s in sections}
    controlled: dict[str, dict[str, float | None]] = {
        s.judge: (dict(s.length_control.models.select("model", "controlled_mean").iter_rows())
                  if s.length_control is not None else {}) for s in sections}
    return agreement_view(data.judgments, raw, controlled)


def _options(values: list[str]) -> list[str]:
    return sorted({v for v in values if v})


def context(data: RunData, chunk_bytes: int = CHUNK_BYTES, *,
            essays: EssaysJob | None = None) -> tuple[dict[str, Any], list[Chunk]]:
    """What the template shows, from a run's data, and the essay chunks beside the page
    (``essays``: the essay browser's job, started by the caller; else started here, in a
    process of its own from ``PROCESS_FROM_ESSAYS`` essays)."""
    labels = labels_for(data.judgments)
    ids = ChartIds()
    judges = judges_of(data.judgments)
    # every essay's length verdict, once (the drill-down and the model facts read it)
    checked = compliance_table(data.essays, prompt_column="prompt_text")
    # the essay browser, in a process of its own at scale, while the charts are drawn here
    with contextlib.ExitStack() as own:
        if essays is None:
            essays = own.enter_context(EssaysJob(
                process=data.essays.height >= PROCESS_FROM_ESSAYS))
        essays.send(EssaysInput(data.essays, data.judgments, data.pairwise, labels, checked,
                                judges, chunk_bytes))
        sections = [judge_section(ids, data, judge, labels) for judge in judges]
        facts = model_facts(data.essays, checked)
        made = essays.result()
    browser, pairs = made.browser, made.pairs
    return {
        "data": data, "judges": sections, "decisions": _decisions(facts, sections),
        "agreement": _agreement(data, sections), "length_control_note": LENGTH_CONTROL_NOTE,
        "facts": facts.to_dicts(), "compliance_svg": compliance_chart(ids, facts),
        "cost_bound_note": upper_bound_note(dict(facts.select("model", "cost_upper_bound")
                                                 .iter_rows())),
        "failures": failures(data.essays, data.judgments).to_dicts(),
        "essay_index": json_for_script(browser.index), "n_essays": browser.n_essays,
        "n_chunks": len(browser.chunks), "per_page": PER_PAGE, "filter_options": browser.options,
        "judge_names": [s.judge for s in sections],
        "pairs": pairs, "pair_index": json_for_script(pairs.index) if pairs else None,
        "position_bias": (data.stats["position_bias"].to_dicts()
                          if "position_bias" in data.stats else []),
        "position_bias_columns": POSITION_BIAS_COLUMNS,
        # only the judges that compared pairwise get a heading there
        "pairwise_judges": [s for s in sections
                            if s.win_rate_svg or s.bt_svg or s.bradley_terry],
        "comparison": (data.alerts.comparison.to_dicts() if data.alerts is not None
                       and data.alerts.comparison is not None else []),
        "font_note": font_note(),
        "code_versions": _options([r.code_version for r in data.stage_runs]),
        "adaptive": adaptive_view(Store(data.store_root), data.run_id),
        "spot_trend": spot_trend_view(data.store_root, data.run_id, ids),
    }, browser.chunks + (pairs.chunks if pairs else [])


@dataclass(frozen=True)
class Report:
    """The page, piece by piece as the template renders it (a page is written as it is
    made, never held whole), and the essay chunks to write beside it."""

    pieces: Iterator[str]
    chunks: list[Chunk]


def build_report(data: RunData, *, chunk_bytes: int = CHUNK_BYTES,
                 essays: EssaysJob | None = None) -> Report:
    """The page for ``data`` and its essay chunks (``essays``: as for ``context``)."""
    env = environment()
    script = (TEMPLATES / "report.js").read_text(encoding="utf-8")
    style = (TEMPLATES / "report.css").read_text(encoding="utf-8")
    shown, chunks = context(data, chunk_bytes, essays=essays)
    # The template marks what it inserts unescaped with |safe: the charts, the essay
    # index (escaped JSON), the style and the script, all made here (see the module doc).
    pieces = env.get_template("report.html").generate(
        **shown, script=script, style=style, script_hash=script_hash(script))
    return Report(pieces, chunks)


def render_report(data: RunData) -> str:
    """The whole page for ``data`` (without its chunks: ``build_report``)."""
    return "".join(build_report(data).pieces)
