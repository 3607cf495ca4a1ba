"""The report's adaptive-sampling section: what an adaptive run decided, when, and why it
stopped (the ``adaptive`` snapshot, ``stages/adaptive.py``). None for a full run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from essaybench.store import Store

STAGE = "adaptive"


@dataclass(frozen=True)
class AdaptiveView:
    """The section's data: one row per question, the run's sampling summary, the note on
    the leaderboard's intervals."""

    questions: list[dict[str, Any]]
    stop: str
    sampled: int
    of: int
    rounds: int
    baseline: str | None
    baseline_reason: str | None
    note: str
    sampled_prompts: list[str]


def adaptive_view(store: Store, run_id: str) -> AdaptiveView | None:
    """The run's adaptive decisions, or None when it sampled every prompt."""
    snap = store.latest_ok_snapshot(STAGE, run_id)
    if snap is None:
        return None
    meta = snap.meta or {}
    return AdaptiveView(
        questions=snap.read().to_dicts(), stop=str(meta.get("stop", "")),
        sampled=int(meta.get("sampled", 0)), of=int(meta.get("of", 0)),
        rounds=int(meta.get("rounds", 0) if isinstance(meta.get("rounds"), int)
                   else len(meta.get("rounds", []))),
        baseline=meta.get("baseline"), baseline_reason=meta.get("baseline_reason"),
        note=str(meta.get("note", "")),
        sampled_prompts=[str(p) for p in meta.get("sampled_prompts", [])])


def adaptive_lines(view: AdaptiveView) -> list[str]:
    """The section as plain lines (the CLI's run summary)."""
    decided = sum(q["outcome"] != "undecided" for q in view.questions)
    lines = [f"adaptive sampling: {view.sampled} of {view.of} prompts in {view.rounds} "
             f"rounds, stopped: {view.stop}; {decided} of {len(view.questions)} questions "
             "decided"]
    for q in view.questions:
        what = (f"{q['first']} vs {q['second']}" if q["kind"] == "pair"
                else f"{q['first']} since {view.baseline}")
        when = (f"at {q['decided_at_prompts']} prompts" if q["decided_at_prompts"] is not None
                else f"after {view.sampled} prompts")
        lines.append(f"  {what}: {q['label']} {when} (difference {q['estimate']:+.1f}, "
                     f"sequence [{q['lo']:+.1f}, {q['hi']:+.1f}])")
    lines.append(f"  {view.note}")
    return lines
