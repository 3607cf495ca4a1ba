"""Whether a labeller's evidence can carry its answer (issue 30, item 3).

The labeller quotes the prompt to show why it answered as it did (``parse_label_reply``
already checks that the quote is a passage of the prompt). A passage can still show
nothing: one character (``"流"`` for a leave letter about 流感), digits or punctuation, a
genre word inside the material, or a sentence of a letter the task quotes. So classify
accepts an answer only when its evidence

1. is a passage of the prompt, located in it;
2. has at least ``MIN_EVIDENCE_CHARS`` letters (a CJK character counts as one; digits,
   punctuation and spaces do not);
3. holds a cue the rules know (``genre_rules.rule_cues``: a genre word or cue, an
   open-genre phrase, an essay-task word such as 作文 or 写一篇, a non-essay product such
   as 请假条), and that cue sits in the task or the requirements segment
   (``prompt_parts``) and outside quotation marks: quoted text is material, wherever it
   stands (a letter quoted inside the task sentence of a correction exercise).

``llm_labeler.meaningful_evidence`` applies rule 2 to every gateway reply before classify
sees it; this module is the whole check, for every labeller.
"""

from __future__ import annotations

from dataclasses import dataclass

from essaybench.core.matching import matching_text
from essaybench.curate.genre_rules import ESSAY_TASK, rule_cues
from essaybench.curate.labeler import passage_at
from essaybench.curate.prompt_parts import PromptParts, Segment, quotations

MIN_EVIDENCE_CHARS = 4  # letters (a CJK character is one) in a labeller's evidence
_STRONG: frozenset[Segment] = frozenset({"task", "requirements"})


@dataclass(frozen=True)
class EvidenceCheck:
    """The verdict on one piece of evidence: ``problem`` is None when it is accepted."""

    problem: str | None
    span: tuple[int, int] | None = None  # where the evidence sits in the prompt
    segment: Segment | None = None  # the segment of the cue that carries it
    cue: str | None = None  # that cue


def quoted_spans(text: str) -> list[tuple[int, int]]:
    """The outermost quotations of ``text`` (quotation marks included, as the segmenter
    finds them: ``prompt_parts.quotations``); 《》 titles are names, not quotations."""
    return [(a, b) for a, b in quotations(text, 0, len(text)) if text[a] != "《"]


def _quoted(span: tuple[int, int], quotes: list[tuple[int, int]]) -> bool:
    """Whether ``span`` lies inside one of ``quotes`` (after its opening mark)."""
    x, y = span
    return any(q0 < x and y <= q1 for q0, q1 in quotes)


def letters(text: str) -> int:
    return sum(ch.isalpha() for ch in text)


def check_evidence(evidence: str, text: str, parts: PromptParts) -> EvidenceCheck:
    """Whether ``evidence`` can carry a labeller's answer about ``text`` (split into
    ``parts``); see the module docstring."""
    span = passage_at(evidence, text)  # ``text`` is normalised, as its offsets need
    if span is None:
        return EvidenceCheck("is not a passage of the prompt")
    a, b = span
    if letters(text[a:b]) < MIN_EVIDENCE_CHARS:
        return EvidenceCheck(f"shows nothing: fewer than {MIN_EVIDENCE_CHARS} characters that "
                             "are not digits or punctuation", span)
    cues = [(word, (x, y)) for word, (x, y) in rule_cues(text) if a <= x and y <= b]
    if not cues:
        return EvidenceCheck("holds no cue the rules know (a genre word or cue, an essay task "
                             "such as 写一篇 or 作文, a non-essay product)", span)
    quotes = quoted_spans(text)
    for word, (x, y) in cues:
        segment = parts.segment_at(x)
        if segment in _STRONG and not _quoted((x, y), quotes):
            return EvidenceCheck(None, span, segment, word)
    word, (x, _) = cues[0]
    where = ("inside quotation marks (quoted material)"
             if any(q0 < x < q1 for q0, q1 in quotes) else "in the material")
    return EvidenceCheck(f"has its cue {word!r} only {where}, not in the task or requirements",
                         span)


def essay_task_cue(text: str, parts: PromptParts) -> str | None:
    """The first essay-task word (``genre_rules.ESSAY_TASK``: 作文, 文章, 写一篇…, a body
    length, a title instruction) in the task or requirements of ``text``, outside quotation
    marks; None when the prompt holds none (issue 30, item 2: a labeller's genre is then
    not accepted)."""
    quotes = quoted_spans(text)
    for found in ESSAY_TASK.finditer(matching_text(text)):
        x, y = found.span()
        if parts.segment_at(x) in _STRONG and not _quoted((x, y), quotes):
            return text[x:y]
    return None
