"""Filter: normalise every prompt text and drop what is not an essay request.

For every input row the stage sets ``text`` (``normalize_text(raw_text)``) and
``prompt_id`` (its content hash), dropped or not, then decides. The first rule
that fires gives the reason, in this order (cheap, objective checks first, so
a drop is explained by the most basic problem the text has):

1. ``empty``          nothing left after normalisation
2. ``too_short``      fewer than ``min_chars`` letters/digits (``str.isalnum``)
3. ``too_long``       more than ``max_chars`` characters of normalised text
4. ``not_chinese``    Han characters are less than ``min_cjk_ratio`` of all letters
5. ``personal_data``  the raw record held personal data (collect's ``pii``: it is masked
                      there, ``curate/pii``) and the curate config says ``deid.mode:
                      drop``; or, in text collect did not mask (a snapshot from before
                      de-identification), a mainland mobile number, resident ID with a
                      valid check digit, e-mail address, landline 0xx(x)-xxxxxxx(x)
6. ``offensive``      a term of the (small, conservative) lexicon in the rules YAML
7. ``not_essay:<kind>`` / ``no_essay_cue``  wording rules, see ``filter_rules``
8. ``not_essay:short_text``  kept by a weak cue only (一篇, 800字 …, no genre named), yet
                      asking for short non-essay writing: a list of short pieces
                      (写十条评语, 五句口号) or a body length whose upper end is below
                      ``short_max_chars`` (a 100字 student evaluation). The lengths
                      are the prompt's body requirement (``essaybench.constraints``),
                      so a title's or a summary's length never counts here.

The wording rules (6–8) read ``matching_text(text)``: traditional characters match as
simplified ones (寫一篇記敘文 is 写一篇记叙文), while ``text`` keeps what the source wrote.

``detail`` holds the evidence: the measured length or ratio, the masked
personal datum, the matched term or pattern, and any markup normalisation
stripped (``essaybench.curate.markup``: stripped, not filtered, unless too
little is left). A kept row's ``detail`` names the
essay cue that kept it and any non-essay match that cue overrode.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, model_validator

from essaybench.constraints import extract_constraints
from essaybench.constraints.requirement import combine_lengths
from essaybench.core.contracts import Decision, StageOutput, StreamedOutput, ensure_columns
from essaybench.core.hashing import prompt_id
from essaybench.core.matching import matching_text
from essaybench.core.paths import checkout_root
from essaybench.core.text_memo import TextMemo
from essaybench.curate.filter_rules import CompiledRules, default_rules_path, load_rules
from essaybench.curate.markup import markup_found
from essaybench.curate.normalize import normalize_text
from essaybench.curate.pii.formatted import valid_resident_id
from essaybench.curate.table import FILTER_COLUMNS

CHECK_ORDER = ("empty", "too_short", "too_long", "not_chinese", "personal_data", "offensive",
               "not_essay", "no_essay_cue")
SHORT_TEXT = "not_essay:short_text"  # rule 8: decided after the wording rules kept a row


class FilterParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    min_chars: int = Field(default=8, ge=0,
                           description="Minimum letters/digits (CJK or alphanumeric).")
    max_chars: int = Field(default=2000, ge=1, description="Maximum length of the normalised text.")
    min_cjk_ratio: float = Field(default=0.3, ge=0.0, le=1.0,
                                 description="Minimum share of Han characters among letters.")
    short_max_chars: int = Field(
        default=150, ge=0,
        description="A request kept by a weak cue only whose body length tops out below this, "
                    "or that asks for a list of short pieces, is short non-essay writing "
                    "(0: no such check).")
    rules_version: str = Field(default="v3", pattern=r"^v\d+$",
                               description="Shipped rules: rubrics/filters/filter_rules.<v>.yaml.")
    rules_path: str | None = Field(default=None,
                                   description="Explicit rules YAML; overrides rules_version.")

    @model_validator(mode="after")
    def _lengths(self) -> FilterParams:
        if self.max_chars <= self.min_chars:
            raise ValueError(f"max_chars ({self.max_chars}) must exceed min_chars "
                             f"({self.min_chars})")
        return self

    def load_rules(self) -> CompiledRules:
        if self.rules_path is not None:
            return load_rules(self.rules_path)
        return load_rules(default_rules_path(self.rules_version), self.rules_version)


# --- personal data -------------------------------------------------------------------------

_MOBILE = re.compile(r"(?<!\d)1[3-9]\d[- ]?\d{4}[- ]?\d{4}(?!\d)")
_RESIDENT_ID = re.compile(r"(?<![0-9A-Za-z])\d{17}[0-9Xx](?![0-9A-Za-z])")
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
# A dash or brackets are required: a bare 0-led digit run is too often something else.
_LANDLINE = re.compile(r"(?<![\d-])0\d{2,3}-\d{7,8}(?![\d-])|[(（]0\d{2,3}[)）] ?\d{7,8}(?!\d)")
def _mask(s: str) -> str:
    keep = 3 if len(s) > 6 else 1
    return s[:keep] + "*" * (len(s) - keep - 2) + s[-2:] if len(s) > 4 else "*" * len(s)


def find_personal_data(text: str) -> list[tuple[str, str]]:
    """(kind, masked match) for every personal datum in ``text``, in text order."""
    found: list[tuple[int, str, str]] = []
    for m in _RESIDENT_ID.finditer(text):
        if valid_resident_id(m.group()):
            found.append((m.start(), "resident_id", _mask(m.group())))
    for kind, pattern in (("mobile", _MOBILE), ("email", _EMAIL), ("landline", _LANDLINE)):
        found.extend((m.start(), kind, _mask(m.group())) for m in pattern.finditer(text))
    return [(kind, masked) for _, kind, masked in sorted(found)]


# --- the decision --------------------------------------------------------------------------

def is_han(ch: str) -> bool:
    cp = ord(ch)
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0xF900 <= cp <= 0xFAFF
            or 0x20000 <= cp <= 0x323AF)


# 条/句 count short pieces (十条评语, 五句口号); 首 is a poem (poem_only), 篇 an essay.
_LIST_UNITS = frozenset("条句")
_ONE_PROSE_PIECE = re.compile(r"一篇|篇文章|一封")


def short_request(text: str, max_chars: int) -> str | None:
    """Why ``text`` asks for short non-essay writing (rule 8), or None."""
    matched = matching_text(text)
    if max_chars <= 0 or not any(ch in matched for ch in "字条句"):
        return None  # switched off, or neither a length nor a list: skip the extraction
    found = extract_constraints(text)
    body = combine_lengths(c for c in found if c.kind == "length" and c.target == "body")
    lo, hi = body.bounds() if body else (None, None)
    top = hi if hi is not None else lo
    if top is not None and top >= max_chars:
        return None  # an essay-sized body, whatever else it lists
    if not _ONE_PROSE_PIECE.search(matched):  # 写一篇文章，列出三条理由 is one essay
        for c in found:
            if c.kind == "count" and c.unit in _LIST_UNITS:
                return f"a list of short pieces 「{c.evidence}」"
    if top is not None:
        shown = "、".join(body.evidence) if body else ""
        span = f"{'' if lo is None else lo}–{'' if hi is None else hi}"
        return f"body length 「{shown}」 ({span} characters) under short_max_chars {max_chars}"
    return None


@dataclass(frozen=True)
class Verdict:
    reason: str | None  # None = kept
    detail: str


def judge(text: str, params: FilterParams, rules: CompiledRules) -> Verdict:
    """The decision for one normalised text: the first rule of CHECK_ORDER that fires."""
    if not text:
        return Verdict("empty", "no text after normalisation")
    content = sum(ch.isalnum() for ch in text)
    if content < params.min_chars:
        return Verdict("too_short", f"{content} letters/digits < min_chars {params.min_chars}")
    if len(text) > params.max_chars:
        return Verdict("too_long", f"{len(text)} characters > max_chars {params.max_chars}")
    letters = sum(ch.isalpha() for ch in text)
    han = sum(is_han(ch) for ch in text)
    ratio = han / letters if letters else 0.0
    if ratio < params.min_cjk_ratio:
        return Verdict("not_chinese", f"Han share of letters {ratio:.2f} < min_cjk_ratio "
                                      f"{params.min_cjk_ratio} ({han} of {letters})")
    personal = find_personal_data(text)
    if personal:
        shown = ", ".join(f"{kind} {masked}" for kind, masked in personal[:3])
        return Verdict("personal_data", f"{len(personal)} found: {shown}")
    matched = matching_text(text)
    slur = rules.offensive.search(matched)
    if slur:
        return Verdict("offensive", f"lexicon term 「{text[slur.start():slur.end()]}」")
    request = rules.classify_request(matched, text)
    if request.reason is None and request.cue == "weak":
        short = short_request(text, params.short_max_chars)
        if short is not None:
            return Verdict(SHORT_TEXT, f"{short}; beats {request.detail}")
    return Verdict(request.reason, request.detail)


def _with_markup_note(detail: str, found: tuple[str, ...]) -> str:
    """``detail``, and what normalisation stripped from the raw text (``found``:
    ``markup_found``; the published text differs from the raw one there: the evidence
    says so)."""
    return f"{detail}; markup stripped: {', '.join(found)}" if found else detail


@dataclass(frozen=True)
class _Seen:
    """What the filter makes of one raw text, whatever record brought it."""

    text: str
    prompt_id: str
    verdict: Verdict
    markup: tuple[str, ...]


def _seen(raw: str, params: FilterParams, rules: CompiledRules) -> _Seen:
    """Normalised text, id, rule verdict and stripped markup of ``raw`` (what the stage
    remembers per distinct raw text: a chat log repeats its greetings and prompts, and the
    rules cost most of the stage)."""
    text = normalize_text(raw)
    return _Seen(text, prompt_id(text), judge(text, params, rules), tuple(markup_found(raw)))


def _seen_chars(raw: str, seen: _Seen) -> int:
    return len(raw) + len(seen.text) + len(seen.verdict.detail)


def _rules_meta(rules: CompiledRules) -> dict[str, Any]:
    path, checkout = Path(rules.path).resolve(), checkout_root()
    shown = path.relative_to(checkout) if checkout and path.is_relative_to(checkout) else path
    return {"version": rules.version, "path": str(shown), "sha256": rules.sha256}


PERSONAL_DATA = "personal_data"


BATCH_ROWS = 50_000


def run_filter(table: pl.DataFrame, params: FilterParams, *,
               drop_personal_data: bool = False, batch_rows: int = BATCH_ROWS) -> StageOutput:
    """``stream_filter`` over ``table`` (``batch_rows`` rows at a time), whole."""
    slices = (table.slice(start, batch_rows)
              for start in range(0, max(table.height, 1), batch_rows))
    return stream_filter(slices, params, drop_personal_data=drop_personal_data).collect()


def stream_filter(batches: Iterable[pl.DataFrame], params: FilterParams, *,
                  drop_personal_data: bool = False) -> StreamedOutput:
    """Every row of ``batches`` (the upstream's kept rows, in order), with ``text`` and
    ``prompt_id`` set and kept or filtered, a batch out for each batch in (the Python
    objects alive at once are one batch's); the meta is complete after the last batch.
    ``drop_personal_data`` (the curate config's ``deid.mode: drop``): a record collect found
    personal data in is filtered first, reason ``personal_data``."""
    meta: dict[str, Any] = {}
    return StreamedOutput(_filtered(batches, params, drop_personal_data, meta), meta)


def _filtered(batches: Iterable[pl.DataFrame], params: FilterParams, drop_personal_data: bool,
              meta: dict[str, Any]) -> Iterator[pl.DataFrame]:
    rules = params.load_rules()
    counts: Counter[str | None] = Counter()
    memo: TextMemo[_Seen] = TextMemo(lambda raw: _seen(raw, params, rules), _seen_chars)
    rows = 0
    for batch in batches:
        if "raw_text" not in batch.columns:
            raise ValueError("filter: input lacks column 'raw_text'; run collect first")
        rows += batch.height
        yield _filter_batch(batch, params, rules, drop_personal_data, counts, memo)
    filtered = {reason: n for reason, n in counts.items() if reason is not None}
    order = [*CHECK_ORDER[:6], *(f"not_essay:{k}" for k in rules.kinds), "no_essay_cue"]
    if SHORT_TEXT not in order:
        order.insert(-1, SHORT_TEXT)
    meta.update({
        "params": params.model_dump(mode="json"),
        "rules": _rules_meta(rules),
        "check_order": order,
        "rows": rows,
        "kept": counts[None],
        "filtered": sum(filtered.values()),
        "reasons": {reason: filtered[reason] for reason in order if filtered.get(reason)},
    })


def _filter_batch(table: pl.DataFrame, params: FilterParams, rules: CompiledRules,
                  drop_personal_data: bool, counts: Counter[str | None],
                  memo: TextMemo[_Seen]) -> pl.DataFrame:
    raw = table["raw_text"].to_list()
    seen = [memo(r or "") for r in raw]
    pii = table["pii"].to_list() if "pii" in table.columns else [None] * table.height
    verdicts = [Verdict(PERSONAL_DATA, f"held personal data ({kinds}; deid mode drop)")
                if drop_personal_data and kinds else one.verdict
                for one, kinds in zip(seen, pii, strict=True)]
    counts.update(v.reason for v in verdicts)
    table = ensure_columns(table, FILTER_COLUMNS)
    return table.with_columns(
        pl.Series("text", [one.text for one in seen], dtype=pl.Utf8),
        pl.Series("prompt_id", [one.prompt_id for one in seen], dtype=pl.Utf8),
        pl.Series("decision", [Decision.KEPT.value if v.reason is None
                               else Decision.FILTERED.value for v in verdicts], dtype=pl.Utf8),
        pl.Series("reason", [v.reason for v in verdicts], dtype=pl.Utf8),
        pl.Series("detail", [_with_markup_note(v.detail, one.markup) for v, one
                             in zip(verdicts, seen, strict=True)], dtype=pl.Utf8),
    )
