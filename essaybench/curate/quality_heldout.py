"""Held-out real prompts (issue 30): does any non-essay reach the prompt set?

``data/eval/shared_heldout_labels.v1.jsonl`` labels, by reference only, real writing
requests of ``../shared/data`` the team had not used (WritingBench queries by line,
WritingPreferenceBench prompts by ``question_id``) as essay or not; the texts are read
from there (:func:`load_shared_heldout`) and never copied into the project. It was
labelled before the rules of issue 30 changed (data/eval/README.md).

:func:`leak_report` runs such items through the real filter and classify stages and
counts what a labeller could do harm with: the non-essays the rules leave undecided (what
``rules+llm`` sends to the labeller), the non-essays published, and of those the ones a
labeller's answer published.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from essaybench.core.contracts import Decision
from essaybench.curate.classify import ClassifyParams
from essaybench.curate.filter import FilterParams
from essaybench.curate.labeler import PromptLabeler
from essaybench.curate.quality import (
    filter_and_classify,
    read_jsonl_models,
    writingbench_query,
)

WB_FILE = Path("writingbench_zh_queries") / "zh_queries.jsonl"
WPB_FILE = Path("writingpreferencebench") / "prompts.jsonl"


class HeldoutLabel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    source: Literal["writingbench_zh_queries", "writingpreferencebench"]
    line: int | None = Field(default=None, ge=1)  # WritingBench: line of zh_queries.jsonl
    key: str  # WritingBench: the query's index (checked); WritingPreferenceBench: question_id
    is_essay: bool
    note: str = ""


@dataclass(frozen=True)
class LabelledText:
    id: str
    text: str
    is_essay: bool
    note: str = ""


def _jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def load_shared_heldout(labels: Path, shared_data: Path) -> list[LabelledText]:
    """The labelled items with their texts read from ``shared_data`` (../shared/data);
    ValueError when a referenced row is missing or its key does not match."""
    wanted = read_jsonl_models(labels, HeldoutLabel)
    wb = (shared_data / WB_FILE).read_text(encoding="utf-8").splitlines()
    wpb = {str(r["question_id"]): str(r["prompt"]) for r in _jsonl(shared_data / WPB_FILE)}
    items = []
    for label in wanted:
        if label.source == "writingbench_zh_queries":
            if label.line is None:
                raise ValueError(f"{labels}: a {label.source} label needs its line")
            text = writingbench_query(wb, label.line, label.key, labels, shared_data / WB_FILE)
            items.append(LabelledText(f"wb-line{label.line}", text, label.is_essay,
                                      label.note))
        else:
            if label.key not in wpb:
                raise ValueError(f"{labels}: question_id {label.key} is not in "
                                 f"{shared_data / WPB_FILE}")
            items.append(LabelledText(f"wpb-{label.key[:8]}", wpb[label.key], label.is_essay,
                                      label.note))
    return items


@dataclass
class LeakReport:
    n: int
    non_essays: int
    essays: int
    essays_kept: int
    reached_classify: int  # non-essays past the filter
    undecided: list[str]  # non-essays the rules left genre_undecided (a labeller is asked)
    published: list[str]  # non-essays in the prompt set
    published_by_llm: list[str]  # ... whose genre came from the labeller
    reasons: Counter[str] = field(default_factory=Counter)  # of non-essays left out
    llm_status: dict[str, int] = field(default_factory=dict)

    def lines(self) -> list[str]:
        return [
            f"non-essays published            {len(self.published)}/{self.non_essays}"
            + (f" ({', '.join(self.published[:8])}{' …' if len(self.published) > 8 else ''})"
               if self.published else ""),
            f"  of them by the labeller       {len(self.published_by_llm)}"
            + (f" ({', '.join(self.published_by_llm)})" if self.published_by_llm else ""),
            f"non-essays the labeller is asked {len(self.undecided)} (rules: genre_undecided)",
            "non-essays left out, by reason  "
            + ", ".join(f"{k} {v}" for k, v in sorted(self.reasons.items())),
            f"essays published                {self.essays_kept}/{self.essays}",
        ]


def leak_report(items: Sequence[LabelledText], filter_params: FilterParams,
                classify_params: ClassifyParams,
                labeler: PromptLabeler | None = None) -> LeakReport:
    filtered, stage = filter_and_classify([(i.id, i.text) for i in items], filter_params,
                                          classify_params, labeler)
    rows = {r["record_id"]: r for r in stage.table.iter_rows(named=True)}
    dropped = {r["record_id"]: r for r in filtered.iter_rows(named=True)
               if r["decision"] != Decision.KEPT.value}
    non = [i for i in items if not i.is_essay]
    reasons: Counter[str] = Counter()
    for item in non:
        row = rows.get(item.id) or dropped[item.id]
        if row["decision"] != Decision.KEPT.value:
            reasons[str(row["reason"])] += 1
    published = [i.id for i in non if i.id in rows
                 and rows[i.id]["decision"] == Decision.KEPT.value]
    # what rules alone would leave undecided is what a labeller sees: read from the detail
    undecided = [i.id for i in non if i.id in rows
                 and "rule: undecided" in str(rows[i.id]["genre_evidence"])
                 and "the task asks for" not in str(rows[i.id]["genre_evidence"])]
    return LeakReport(
        n=len(items), non_essays=len(non), essays=len(items) - len(non),
        essays_kept=sum(1 for i in items if i.is_essay and i.id in rows
                        and rows[i.id]["decision"] == Decision.KEPT.value),
        reached_classify=sum(i.id in rows for i in non), undecided=undecided,
        published=published,
        published_by_llm=[p for p in published if rows[p]["genre_source"] == "llm"],
        reasons=reasons, llm_status=dict(stage.meta["llm"]["status"]))
