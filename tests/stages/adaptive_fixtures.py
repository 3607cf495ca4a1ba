"""A fake server whose judge scores each writer by a fixed pattern (the writer's marker in
the essay, the genre's first question in the judge prompt): the writers really differ,
and by how much is known in advance. Shared by the adaptive-sampling tests."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from essaybench.bench.rubrics import load_rubric, rubrics_dir
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.registry import ModelSpec, Registry

GENRES = ("argumentative", "narrative", "descriptive", "expository")
MARKS = {"writer-a": "【甲】", "writer-b": "【乙】", "writer-c": "【丙】"}
# sub-question scores (1-10) per writer: a > b > c by wide margins
LEVELS = {"writer-a": 9, "writer-b": 6, "writer-c": 3}
# The genre an open-genre prompt's essay chose, as the judge says.
CHOSEN = {"writer-a": "narrative", "writer-b": "expository", "writer-c": "argumentative"}
GENRE_QUESTION = "待判断的作文"
JUDGE_PROMPT_V1 = str(rubrics_dir() / "judge_prompt.v1.yaml")


def judge_rules(levels: Mapping[str, int] = LEVELS) -> list[dict[str, object]]:
    rubric = load_rubric()
    rules: list[dict[str, object]] = [
        {"contains": [MARKS[w], GENRE_QUESTION], "reply": json.dumps({"genre": g}),
         "echo_constants": True} for w, g in CHOSEN.items()]
    for genre in GENRES:
        ids = rubric.question_ids(genre)
        for writer, level in levels.items():
            # vary by question so the rubric's weights matter; the level sets the writer
            scores = {q: max(1, min(10, level + (i % 3) - 1)) for i, q in enumerate(ids)}
            rules.append({"contains": [MARKS[writer], ids[0] + "："], "reply": json.dumps(
                {"analysis": "结构清楚。", "scores": scores}, ensure_ascii=False)})
    return rules


def scenario(levels: Mapping[str, int] = LEVELS, latency_ms: float = 0.0) -> FakeScenario:
    writers = {w: {"reply": "template", "template": mark + "{prompt}",
                   "latency_ms": latency_ms} for w, mark in MARKS.items()}
    return FakeScenario.model_validate({"models": {
        **writers, "judge": {"rules": judge_rules(levels), "enforce_max_tokens": False,
                             "latency_ms": latency_ms}}})


def registry_yaml(base_url: str) -> dict[str, Any]:
    common = {"provider": "fake", "family": "fake", "structured_output": "json_schema",
              "max_concurrency": 4, "timeout_s": 10, "max_retries": 0, "max_reasks": 1,
              "price_input_per_mtok": 1.0, "price_output_per_mtok": 2.0}
    return {"models": {m: {**common, "base_url": base_url, "model_id": m}
                       for m in (*MARKS, "judge")}}


def config_yaml(sampling: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {"generate": {"models": list(MARKS)},
            "judge": {"judges": ["judge"], "judge_prompt": JUDGE_PROMPT_V1},
            "drift": None, **({"sampling": dict(sampling)} if sampling else {})}


def registry(base_url: str) -> Registry:
    return Registry(models={name: ModelSpec(name=name, **spec) for name, spec
                            in registry_yaml(base_url)["models"].items()})
