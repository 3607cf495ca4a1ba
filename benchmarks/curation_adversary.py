"""Adversarial labellers on the fake server (issue 30, item 6), for curation_quality.py.

Each labeller stays inside the answer schema of classify_prompt v3 and answers, for every
prompt it is asked about, "essay" and genre "argumentative" (and set "open" when asked):

- ``always_genre``: evidence quoted from the prompt's task (the first task passage);
- ``placeholder``: the template's own evidence placeholder, as a small model copies it;
- ``material``: evidence quoted from the material (a quotation inside the task or
  requirements first — a letter the task quotes —, else the material segment).

What it may publish is what classify lets through: the figures are the non-essays it
gets into the prompt set. The replies are scripted per prompt (``ReplyRule``: the first
user message holds the prompt's text and says which labels are asked).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from essaybench.curate.classify import ClassifyParams
from essaybench.curate.evidence import quoted_spans
from essaybench.curate.filter import FilterParams
from essaybench.curate.labeler import LabelRequest, load_label_template, render_label_prompt
from essaybench.curate.llm_labeler import GatewayLabeler
from essaybench.curate.prompt_parts import split_prompt
from essaybench.curate.quality import filter_and_classify
from essaybench.curate.quality_heldout import LabelledText, LeakReport, leak_report
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.registry import ModelSpec, Registry
from essaybench.llm.session import open_gateway

MODES = ("always_genre", "placeholder", "material")
EVIDENCE_CHARS = 30
# what the rendered user message holds when the genre / the set is asked
_GENRE_ASKED, _SET_ASKED = "【文体 / genre】", "【题目类型 / set】"


def placeholder() -> str:
    user = render_label_prompt(load_label_template(),
                               LabelRequest(prompt_id="x", text="x", need_essay=True)).user
    line = next(x for x in user.splitlines() if '"evidence": "' in x)
    return line.split('"evidence": "', 1)[1].rsplit('"', 1)[0]


def _passage(text: str, segments: set[str]) -> str | None:
    parts = split_prompt(text).parts
    spans = [(p.start, p.end) for p in parts if p.segment in segments
             and text[p.start:p.end].strip()]
    if not spans:
        return None
    a, b = spans[0]
    return text[a:b].strip()[:EVIDENCE_CHARS] or None


def evidence_for(text: str, mode: str) -> str:
    """The evidence the ``mode`` adversary quotes for ``text``."""
    task = _passage(text, {"task", "requirements"}) or text[:EVIDENCE_CHARS]
    if mode == "always_genre":
        return task
    if mode == "placeholder":
        return placeholder()
    parts = split_prompt(text)
    for a, b in quoted_spans(text):
        if parts.segment_at(a) in ("task", "requirements") and b - a > 6:
            return text[a + 1:b - 1][:EVIDENCE_CHARS]
    return _passage(text, {"material"}) or task


def _reply(essay: str | None, genre: str | None, pset: str | None, evidence: str) -> str:
    return json.dumps({"essay": essay, "genre": genre, "prompt_set": pset,
                       "evidence": evidence}, ensure_ascii=False)


def scenario(texts: Sequence[str], mode: str) -> FakeScenario:
    rules: list[dict[str, Any]] = []
    for text in sorted(set(texts), key=len, reverse=True):  # a longer prompt first
        ev = evidence_for(text, mode)
        rules += [
            {"contains": [text, _GENRE_ASKED, _SET_ASKED],
             "reply": _reply("essay", "argumentative", "open", ev)},
            {"contains": [text, _GENRE_ASKED], "reply": _reply("essay", "argumentative", None, ev)},
            {"contains": [text, _SET_ASKED], "reply": _reply(None, None, "open", ev)},
        ]
    return FakeScenario.model_validate({"models": {"*": {"rules": rules}}})


def adversary_report(items: Sequence[LabelledText], mode: str, filter_params: FilterParams,
                     classify_params: ClassifyParams) -> LeakReport:
    """``items`` through filter and classify in rules+llm mode with the ``mode`` labeller."""
    _, rules_only = filter_and_classify([(i.id, i.text) for i in items], filter_params,
                                        classify_params)
    texts = [str(t) for t in rules_only.table["text"].to_list()]
    params = classify_params.model_copy(update={"mode": "rules+llm", "llm_model": mode})
    with run_fake_server(scenario(texts, mode)) as server, \
            tempfile.TemporaryDirectory() as tmp:
        spec = ModelSpec(name=mode, provider="fake", base_url=server.base_url,
                         model_id=f"adversary-{mode}", family="fake",
                         structured_output="json_schema", max_reasks=0, max_retries=0)
        with open_gateway(Registry(models={mode: spec}), Path(tmp), [mode]) as session:
            return leak_report(items, filter_params, params,
                               GatewayLabeler(session.gateway, mode))
