"""One prompt's labels while the classify stage decides them, and the two steps that
change them after the rules: the labeller's answer (:func:`apply_llm`) and a reviewer's
override (:func:`apply_override`). The stage itself (plan, calls, decisions, the table)
is :mod:`essaybench.curate.classify`.

What a labeller's answer may change (issue 30): ``not_essay`` keeps the prompt out with
its evidence as the reason and ``unsure`` sends it to review (``llm_verdict``); a genre,
``any`` or a choice counts only when its evidence passes ``curate.evidence`` (a passage of
at least four characters holding a cue the rules know, in the task or requirements,
outside quotation marks) and the prompt carries an essay-task cue
(``evidence.essay_task_cue``). ``llm_note`` records what it answered and what became of it
(the ``llm_answer`` column, shown by ``curate review``).
"""

from __future__ import annotations

from dataclasses import dataclass

from essaybench.curate.evidence import EvidenceCheck, check_evidence, essay_task_cue
from essaybench.curate.genre_rules import ANY_GENRE, RuleGenre
from essaybench.curate.labeler import EssayAnswer, LabelResult, LabelStatus
from essaybench.curate.overrides import OverrideEntry


@dataclass
class ClassifyRow:
    prompt_id: str
    text: str
    genre: str | None
    genre_source: str | None
    genre_evidence: str
    prompt_set: str | None
    set_source: str | None
    set_evidence: str
    constraints: str
    binding_kinds: frozenset[str]
    allowed: tuple[str, ...] = ()
    genre_open: bool = False
    genre_segment: str | None = None
    genre_span: str | None = None
    rule: RuleGenre | None = None
    llm_note: str = ""
    removed: str | None = None  # a reviewer's reason: not an essay, out of the prompt set
    llm_verdict: EssayAnswer | None = None  # the labeller's not_essay / unsure, when accepted
    set_deferred: bool = False  # rules+llm: a long prompt's set was left to the labeller

    @property
    def llm_answer(self) -> str | None:
        """What the labeller answered and what became of it (the review listing shows it)."""
        return self.llm_note or None

    @property
    def allowed_genres(self) -> list[str]:
        return list(self.allowed)

    @property
    def not_essay(self) -> bool:
        """The rules found the task asks for a non-essay product: no genre to ask for."""
        return self.genre is None and self.rule is not None and self.rule.not_essay

    @property
    def genre_choice(self) -> bool:
        """The rules found an open genre or a choice: nothing for a labeler to decide."""
        return self.genre is None and bool(self.allowed)



def apply_llm(row: ClassifyRow, result: LabelResult | None) -> bool:
    """Fill what the request asked for; False if the labeler left something asked
    unanswered (or answered it in a way that is not accepted)."""
    if result is None:
        return True
    asked_genre = row.genre is None and not (row.genre_choice or row.not_essay)
    asked_set = row.prompt_set is None
    if result.status != LabelStatus.OK:
        row.llm_note = f"llm {result.status.value}: {result.error or ''}".strip()
        return True
    shown = f"{result.evidence[:80]!r}"
    if result.essay is EssayAnswer.UNSURE:
        row.llm_verdict = EssayAnswer.UNSURE
        row.llm_note = f"llm unsure whether this is an essay request: {shown}"
        return True
    if result.essay is EssayAnswer.NOT_ESSAY:
        check = _check(row, result.evidence)
        if check.problem is not None:
            row.llm_note = f"llm not_essay rejected: its evidence {shown} {check.problem}"
            return False
        row.llm_verdict = EssayAnswer.NOT_ESSAY
        row.llm_note = f"llm not_essay: {shown}"
        return True
    allowed = (result.genre.value,) if result.genre is not None else result.allowed_genres
    if asked_genre and allowed:
        label = "|".join(allowed)
        check = _check(row, result.evidence)
        cue = _essay_cue(row)
        if check.problem is not None or cue is None:
            why = (f"its evidence {shown} {check.problem}" if check.problem is not None
                   else "the prompt holds no essay-task cue the rules know (作文, 文章, 写一篇, "
                        "a body length, a title instruction)")
            row.llm_note = f"llm genre {label} rejected: {why}"
            return False
        row.genre = result.genre.value if result.genre is not None else None
        row.genre_source, row.allowed = "llm", tuple(allowed)
        row.genre_open = row.allowed == (ANY_GENRE,)
        row.genre_segment, row.genre_span = check.segment, result.evidence
        row.genre_evidence = f"llm: {result.evidence} | {row.genre_evidence}"
        row.llm_note = f"llm genre {label} accepted: {shown} (essay cue {cue})"
    if asked_set and result.prompt_set is not None:
        row.prompt_set, row.set_source = result.prompt_set.value, "llm"
        row.set_evidence = f"llm: {result.evidence} | {row.set_evidence}"
    complete = (row.genre is not None or row.genre_choice) and row.prompt_set is not None
    if not complete:
        row.llm_note = "llm ok but did not give every label asked for"
    return complete


def _check(row: ClassifyRow, evidence: str) -> EvidenceCheck:
    if row.rule is None or row.rule.parts is None:
        return EvidenceCheck("cannot be placed: the prompt was not split")
    return check_evidence(evidence, row.text, row.rule.parts)


def _essay_cue(row: ClassifyRow) -> str | None:
    if row.rule is None or row.rule.parts is None:
        return None
    return essay_task_cue(row.text, row.rule.parts)


def apply_override(row: ClassifyRow, entry: OverrideEntry) -> None:
    who = f"manual ({entry.reviewer})" if entry.reviewer else "manual"
    note = f": {entry.note}" if entry.note else ""
    was = (f"{row.genre_source}:{row.genre}" if row.genre
           else f"allows {', '.join(row.allowed)}" if row.allowed else "undecided")
    if entry.not_essay:
        row.removed = f"{who}: {entry.note}"
        row.genre, row.genre_source, row.allowed, row.genre_open = None, "manual", (), False
        row.genre_segment, row.genre_span = None, None
        row.genre_evidence = f"{who}: not an essay{note} | was {was}; {row.genre_evidence}"
        return
    decided = ((None, entry.allowed_genres) if entry.allowed_genres is not None
               else (entry.genre.value, (entry.genre.value,)) if entry.genre is not None
               else None)
    if decided is not None:
        row.genre, allowed = decided
        row.genre_source, row.allowed = "manual", allowed
        row.genre_open = allowed == (ANY_GENRE,)
        row.genre_segment, row.genre_span = None, None
        row.genre_evidence = f"{who}{note} | was {was}; {row.genre_evidence}"
    if entry.prompt_set is not None:
        was = f"{row.set_source}:{row.prompt_set}" if row.prompt_set else "undecided"
        row.prompt_set, row.set_source = entry.prompt_set.value, "manual"
        row.set_evidence = f"{who}{note} | was {was}; {row.set_evidence}"


def set_fallback(row: ClassifyRow) -> None:
    """A long prompt whose set was left to the labeller and that got none (a failed call,
    a refusal, an answer not taken) is open, as rules alone call it: rules+llm is never
    worse than rules only (issue 30); the evidence says so."""
    if row.prompt_set is None and row.set_deferred:
        why = row.llm_note or "no answer"
        row.prompt_set, row.set_source = "open", "rule"
        row.set_evidence = (f"rule: no constraint found; open as in rules-only mode, the "
                            f"labeller gave no set ({why[:120]}) | {row.set_evidence}")
