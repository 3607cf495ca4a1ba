"""De-identification of raw records: find personal data, replace each piece with a typed
placeholder (``〈手机号〉``), count what was replaced.

Runs in the collect stage, on every text a raw record brings (its text, its source id,
a quarantined record's excerpt), so no snapshot, log or prompt sent to a provider ever
holds the original. ``mode: drop`` additionally filters records that held any.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from essaybench.curate.pii.formatted import Span, fold, formatted_spans
from essaybench.curate.pii.names import name_spans

PLACEHOLDERS: dict[str, str] = {
    "phone": "〈电话号码〉",
    "id_card": "〈身份证号〉",
    "email": "〈电子邮箱〉",
    "bank_card": "〈银行卡号〉",
    "url_token": "〈带凭证的链接〉",
    "ip": "〈IP地址〉",
    "qq": "〈QQ号〉",
    "wechat": "〈微信号〉",
    "plate": "〈车牌号〉",
    "address": "〈住址〉",
    "name": "〈姓名〉",
}
KINDS = tuple(PLACEHOLDERS)


class DeidParams(BaseModel):
    """``deid:`` in the curate config: how personal data in raw records is handled."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["mask", "drop"] = Field(
        default="mask", description="mask: replace each piece with a typed placeholder and "
        "keep the record; drop: also filter every record that held any (reason "
        "personal_data). Either way no snapshot holds the original.")
    names: Literal["cued", "tagged", "off"] = Field(
        default="cued", description="Person names: cued (a name the request introduces as "
        "someone's: 我叫…, 我女儿…, …老师; jieba confirms it is a person), tagged (also any "
        "person jieba tags that is not well known: more found, and false masks in essay "
        "material; see benchmarks/deid.py), off.")


@dataclass(frozen=True)
class Deidentified:
    text: str
    counts: Counter[str] = field(default_factory=Counter)

    @property
    def kinds(self) -> str | None:
        """The kinds found, sorted and comma-joined (None: none)."""
        return ",".join(sorted(self.counts)) or None


def find_personal_data(text: str, *, names: str = "cued") -> list[Span]:
    """Every piece of personal data in ``text`` (offsets into ``text``), no overlaps:
    formatted identifiers first, then names outside them."""
    spans = formatted_spans(fold(text))
    if names != "off":
        spans += [n for n in name_spans(text, tagger=names == "tagged")
                  if not any(n.start < s.end and s.start < n.end for s in spans)]
    return sorted(spans)


def deidentify(text: str | None, params: DeidParams | None = None) -> Deidentified:
    """``text`` with each piece of personal data replaced by its placeholder."""
    if not text:
        return Deidentified(text or "")
    spans = find_personal_data(text, names=(params or DeidParams()).names)
    if not spans:
        return Deidentified(text)
    parts, at = [], 0
    for span in spans:
        parts += [text[at:span.start], PLACEHOLDERS[span.kind]]
        at = span.end
    parts.append(text[at:])
    return Deidentified("".join(parts), Counter(s.kind for s in spans))
