"""Split a writing prompt into material, task instruction and requirements.

Exam prompts put material first (a story, a quotation, a news item, a poem) and the
task after it ("请写一篇文章……"), often followed by a requirements block
("要求：……不少于800字"). Words in the material describe the material, not the essay
asked for: "他讲述了自己的成长经历" in a story says nothing about the genre of the
answer. Classification therefore reads genre evidence from the task and the
requirements and treats the material as weak evidence only (``genre_rules``).

The split works sentence by sentence (a sentence ends at 。！？；!?; or a line break
outside quotation marks):

- a sentence is **task** when it addresses the writer: 请, 你, 帮我/给我, 写一篇/写成/写作,
  作文, 以……为题/话题, 任选, 谈谈/怎么看/如何看待, or it starts with an imperative
  writing verb (描写/描绘/介绍/讲述 …);
- a sentence is **requirements** when it follows a "要求：" header or states only
  requirements (a length, 文体不限, 自拟标题, 不得抄袭 …);
- every other sentence is **material** before the first task sentence and
  **requirements** after it (unless that task sentence introduces what follows with a
  colon or names the material: "请阅读下面这首诗："); a short prompt without any task
  sentence (a bare topic such as "秋天的校园", up to ``BARE_TOPIC_MAX`` characters) is all
  task, a longer one (pasted text without a request) is all material.

Within task sentences two things are material too: a phrase that names the material
("阅读下面的寓言", "读了这首诗": the word 寓言 there is not a request for a fable), and a
long quotation that is not the given title ("有人说“……”，你怎么看？").

Offsets index the text as given, so a span found here can be quoted from the prompt.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from essaybench.core.matching import matching_text

Segment = Literal["material", "task", "requirements"]
SEGMENTS: tuple[Segment, ...] = ("material", "task", "requirements")

_OPEN_QUOTES = {"“": "”", "「": "」", "『": "』", "《": "》", "‘": "’"}
_ENDS = frozenset("。！？；!?;\n")

# Addressing the writer; matched on the sentence with its quotations blanked out.
_TASK = re.compile(
    r"请|你|帮我|给我|为我|我想要?|我需要|麻烦|"
    r"写(?:一|篇|个|段|成)|写作(?=[。，；！\s]|$)|作文|"
    r"以\s*[^，。；\n]{0,24}?为(?:题|话题|主题|说明对象)|题目[是为：:]|"
    r"任选|选择一个角度|自选角度|怎么看|如何看待|怎样看待|谈谈|谈一谈|说说|议一议")
_IMPERATIVE_START = re.compile(
    r"^\s*(?:[（(]?[一二三四五六七八九十\d]+[）)、.．]\s*)?"
    r"(?:描写|描绘|刻画|介绍|说明|讲述|讲讲|记叙|记述|记录|记一|论述|阐述|评论|评价|给|用|就|围绕|根据|结合)")
_REQUIREMENT_HEADER = re.compile(r"^\s*(?:[（(]?\d+[）)]\s*)?(?:写作|作文)?(?:要求|注意)\s*[：:]")
_REQUIREMENT = re.compile(
    r"要求|字数|篇幅|不少于|不低于|不超过|不多于|以内|以上|左右|\d+\s*字|[一二三四五六七八九十百千]字|"
    r"文体|体裁|自拟|自定|自选|不得|不要|不能|不可|诗歌除外|除诗歌外|标题|题目|立意|角度|套作|抄袭")
# A phrase naming the material: its genre-like words (寓言, 故事, 诗) are the material's.
_MATERIAL_NOUN = (r"(?:材料[一二三四五六七八九十\d]*|寓言(?:故事)?|故事|文字|诗句?|诗歌|小诗|"
                  r"新闻|漫画|对联|名言|话|短文|文章|图片|日记|书信|来信|对话|报道|小说|作品|数据)")
_MATERIAL_REF = re.compile(
    r"(?:(?:阅读|读了?|根据|结合|综合|围绕|参考|下面是|以下是|这是)"
    r"(?:下面|下列|以下|以上|上述|上面|这|此|该|所给|给出)?"
    r"|(?:下面|下列|以下|以上|上述|上面|这|此|该))"
    rf"(?:的)?(?:一|两|几|这)?(?:则|首|段|篇|个|句|副|幅|组|封|些)?{_MATERIAL_NOUN}")
_MATERIAL_LABEL = re.compile(r"^\s*(?:材料[一二三四五六七八九十\d]*|阅读材料)\s*[：:]")
# A quotation that is the essay's given title or topic, not material.
_TITLE_BEFORE = re.compile(r"(?:以|题为|题目[是为：:]?|围绕|关于|就|对|话题[是为：:]?)\s*$")
_TITLE_AFTER = re.compile(
    r"^\s*(?:为题|为话题|为主题|为题目|为中心|为说明对象|的认识|的看法|的理解)")
LONG_QUOTE = 12  # characters: a quotation this long inside a task sentence is material
BARE_TOPIC_MAX = 120  # characters: a longer prompt without a task sentence is no request


@dataclass(frozen=True)
class Part:
    segment: Segment
    start: int
    end: int


@dataclass(frozen=True)
class PromptParts:
    text: str
    parts: tuple[Part, ...]  # in text order, covering the text without overlap

    def segment_at(self, pos: int) -> Segment | None:
        for part in self.parts:
            if part.start <= pos < part.end:
                return part.segment
        return None

    def keep(self, segments: set[Segment], text: str | None = None) -> str:
        """The text (or ``text``, a same-length reading of it such as its matching text)
        with every character outside ``segments`` blanked, offsets kept."""
        chars = list(self.text if text is None else text)
        for part in self.parts:
            if part.segment not in segments:
                for i in range(part.start, part.end):
                    if not chars[i].isspace():
                        chars[i] = " "
        return "".join(chars)

    def text_of(self, segment: Segment) -> str:
        return "".join(self.text[p.start:p.end] for p in self.parts if p.segment == segment)

    @property
    def has_material(self) -> bool:
        return any(p.segment == "material" and self.text[p.start:p.end].strip()
                   for p in self.parts)


def quotations(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """Outermost quotations in text[start:end] as (open, close) offsets, close exclusive."""
    i = start
    while i < end:
        close = _OPEN_QUOTES.get(text[i])
        if close is None and text[i] == '"':
            close = '"'
        if close is None:
            i += 1
            continue
        j = text.find(close, i + 1, end)
        if j < 0:
            return
        yield i, j + 1
        i = j + 1


def _sentences(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start, i, closing = 0, 0, ""
    while i < len(text):
        ch = text[i]
        if closing:
            if ch == closing or ch == "\n":
                closing = ""
        elif ch in _OPEN_QUOTES and ch != "《":
            closing = _OPEN_QUOTES[ch]
        elif ch in _ENDS:
            spans.append((start, i + 1))
            start = i + 1
        i += 1
    if start < len(text):
        spans.append((start, len(text)))
    return [s for s in spans if text[s[0]:s[1]].strip()]


def _blank_quotes(text: str, start: int, end: int) -> str:
    chars = list(text[start:end])
    for a, b in quotations(text, start, end):
        for k in range(a + 1 - start, b - 1 - start):
            chars[k] = " "
    return "".join(chars)


def _kind(text: str, start: int, end: int, after_header: bool) -> Segment | None:
    bare = _blank_quotes(text, start, end)
    if _MATERIAL_LABEL.match(bare):
        return "material"
    if _REQUIREMENT_HEADER.match(bare) or (after_header and not _TASK.search(bare)):
        return "requirements"
    if _TASK.search(bare) or _IMPERATIVE_START.match(bare):
        return "task"
    if _REQUIREMENT.search(bare) and len(bare.strip()) <= 40:
        return "requirements"
    return None  # material if the prompt has a task sentence, else task


def _material_inside(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Spans of a task sentence that belong to the material (see the module doc)."""
    inside = [m.span() for m in _MATERIAL_REF.finditer(text, start, end)]
    for a, b in quotations(text, start, end):
        if b - a - 2 < LONG_QUOTE or text[a] == "《":
            continue
        if _TITLE_BEFORE.search(text, start, a) or _TITLE_AFTER.match(text[b:end]):
            continue
        inside.append((a, b))
    return sorted(inside)


def split_prompt(text: str) -> PromptParts:
    """The parts of ``text``; see the module docstring for the rules."""
    original, text = text, matching_text(text)  # rules are written in simplified characters
    sentences = _sentences(text)
    kinds: list[Segment | None] = []
    after_header = False
    for start, end in sentences:
        kinds.append(_kind(text, start, end, after_header))
        after_header = after_header or bool(_REQUIREMENT_HEADER.match(text[start:end]))
    has_task = any(k == "task" for k in kinds)
    untasked: Segment = "task" if len(text.strip()) <= BARE_TOPIC_MAX else "material"
    parts: list[Part] = []
    pos = 0
    # Before the first task sentence, an unmarked sentence is material; after it,
    # requirements ("……演讲稿。面向全校师生"), unless the task introduced what follows
    # ("请阅读下面这首诗：").
    after_task: Segment = "material"
    for (start, end), kind in zip(sentences, kinds, strict=True):
        segment: Segment = kind or (after_task if has_task else untasked)
        if kind == "task":
            intro = text[start:end].rstrip().endswith((":", "："))
            after_task = "material" if intro or _MATERIAL_REF.search(text, start, end) else (
                "requirements")
        if start > pos:  # whitespace between sentences joins the previous part
            parts.append(Part(parts[-1].segment if parts else segment, pos, start))
        if segment == "task":
            cursor = start
            for a, b in _material_inside(text, start, end):
                if a < cursor:
                    continue
                if a > cursor:
                    parts.append(Part("task", cursor, a))
                parts.append(Part("material", a, b))
                cursor = b
            if cursor < end:
                parts.append(Part("task", cursor, end))
        else:
            parts.append(Part(segment, start, end))
        pos = end
    if pos < len(text):
        parts.append(Part(parts[-1].segment if parts else "task", pos, len(text)))
    return PromptParts(original, tuple(parts))
