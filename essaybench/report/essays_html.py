"""The drill-down's markup: one ``<article>`` per prompt, one ``<details>`` per essay with
its judgments (``drilldown.PromptView``), for ``report_essays.html`` to insert.

Built here rather than in the template because it is the page's only part that grows with
the run: at the paper's scale (10,920 essays) the template's per-field escaping made ~800k
``Markup`` objects and took most of the page's time. Every string from the run goes
through :func:`escape` (the characters Jinja's autoescape escapes, spelled as it spells
them); numbers are formatted here; nothing else reaches the markup.
"""

from __future__ import annotations

from functools import lru_cache

from markupsafe import Markup

from essaybench.report.drilldown import EssayView, JudgmentView, PromptView
from essaybench.report.format import number, percent, signed

__all__ = ["escape", "essays_html"]


def escape(text: object) -> str:
    """``text`` as HTML text or attribute value: ``& < > " '`` escaped (as Jinja does)."""
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&#34;").replace("'", "&#39;"))


@lru_cache(maxsize=4096)
def _name(text: str) -> str:
    """:func:`escape` of a short string that repeats (model, judge, status, trait names)."""
    return escape(text)


def _judgment(j: JudgmentView) -> str:
    head = f"Judge {_name(j.judge)}: {_name(j.status)}"
    if j.score_weighted is not None:
        head += (f" · weighted {number(j.score_weighted)}"
                 f" · w/o WT {number(j.score_unweighted)}")
    if j.genre_source == "judge":
        chosen = escape(j.essay_genre or "not decided (genre call failed)")
        head += (f' · <span class="genre-chosen">genre {chosen}, the essay\'s choice as '
                 "this judge saw it</span>")
    out = [f'      <div class="judgment">\n        <h4>{head}</h4>\n']
    if j.flags:
        flags = "".join(f'<span class="flag">{_name(f)}</span> ' for f in j.flags)
        out.append(f"        <p>{flags}</p>\n")
    if j.second_judge:
        if j.second_score is not None:
            said = number(j.second_score)
            if j.score_weighted is not None:
                said += f" ({signed(j.second_score - j.score_weighted)} against the first)"
        else:
            said = _name(str(j.second_status))
            if j.second_error:
                said += f": {escape(j.second_error)}"
        out.append(f'        <p class="second-opinion">Second opinion (judge '
                   f"{_name(j.second_judge)}): {said}</p>\n")
    if j.error:
        out.append(f'        <p class="error">{escape(j.error)}</p>\n')
    if j.analysis:
        out.append(f'        <div class="text analysis" lang="zh">{escape(j.analysis)}</div>\n')
    if j.traits:
        rows = "".join(
            f"<tr><th>{_name(t.trait)}</th><td>"
            + "".join(f'<span class="q">{_name(q)} <b>{_name(v)}</b></span> '
                      for q, v in t.scores)
            + "</td></tr>" for t in j.traits)
        out.append(f'        <table class="subscores"><tbody>\n{rows}\n'
                   f"        </tbody></table>\n")
    out.append("      </div>\n")
    return "".join(out)


def _essay(e: EssayView, genre: str) -> str:
    model, row_status = _name(e.model), _name(e.row_status)
    summary = f'<span class="model">{model}</span>'
    if e.sample_index:
        summary += f" #{e.sample_index}"
    state = "ok" if e.row_status == "ok" else "failed"
    summary += f'\n        <span class="status status-{state}">{row_status}</span>\n        '
    for j in e.judgments:
        if j.score_weighted is not None:
            summary += f'<span class="score">{_name(j.judge)} {number(j.score_weighted)}</span>'
        if j.second_score is not None:
            summary += (f'<span class="score second">second {_name(str(j.second_judge))} '
                        f"{number(j.second_score)}</span>")
    summary += "\n"
    if e.grid_chars is not None:
        summary += f'        <span class="muted">{e.grid_chars} chars'
        if e.verdict and e.verdict not in ("compliant", "no_requirement", "off_language"):
            summary += f" ({_name(e.verdict)} {percent(e.deviation)})"
        summary += "</span>\n"
    if e.off_language:
        summary += '        <span class="flag">off-language</span>\n'
    status = _name(e.status)
    if e.finish_reason:
        status += f" (finish: {_name(e.finish_reason)})"
    error = f'<dt>error</dt><dd class="error">{escape(e.error)}</dd>\n' if e.error else ""
    grid = "—" if e.grid_chars is None else e.grid_chars
    chinese = "—" if e.chinese_chars is None else e.chinese_chars
    length = (f"{grid} grid characters, {chinese} Chinese; "
              f"{_name((e.verdict or '—').replace('_', ' '))}")
    if e.deviation:
        length += f" ({percent(e.deviation)})"
    text = (f'<div class="text essay-text" lang="zh">{escape(e.text)}</div>'
            if e.text is not None else '<p class="empty">No essay text.</p>')
    return (f'    <details class="essay" data-model="{model}" data-genre="{genre}" '
            f'data-status="{row_status}">\n      <summary>{summary}      </summary>\n'
            f'      <dl class="facts">\n        <dt>status</dt><dd>{status}</dd>\n'
            f"        {error}        <dt>length</dt><dd>{length}</dd>\n"
            f"        <dt>latency · cost</dt><dd>{number(e.latency_s)} s · "
            f"{number(e.cost_usd, 6)} USD</dd>\n      </dl>\n      {text}\n"
            + "".join(_judgment(j) for j in e.judgments) + "    </details>\n")


def _prompt(p: PromptView) -> str:
    genre = _name(p.genre)
    head = f"<code>{escape(p.prompt_id)}</code> {genre}"
    if p.genre_zh:
        head += f' <span class="zh">{_name(p.genre_zh)}</span>'
    head += f" · {_name(p.prompt_set)} · {escape(p.requirement)}"
    if p.allowed_genres:
        head += f" · the essay chooses: {escape(p.allowed_genres)}"
    constraints = ""
    if p.constraints:
        constraints = ('    <p class="constraints">' + "".join(
            f'<span class="constraint">{_name(kind)}: <span lang="zh">{escape(words)}'
            f"</span></span> " for kind, words in p.constraints) + "</p>\n")
    return (f'  <article class="prompt" data-genre="{genre}">\n    <h3>{head}</h3>\n'
            f'    <div class="text prompt-text" lang="zh">{escape(p.text)}</div>\n'
            f"{constraints}" + "".join(_essay(e, genre) for e in p.essays)
            + "  </article>\n")


def essays_html(prompts: list[PromptView]) -> Markup:
    """The drill-down's articles, every run string escaped (module doc)."""
    return Markup("".join(_prompt(p) for p in prompts))
