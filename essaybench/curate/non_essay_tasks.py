"""Requests that are no essay whatever words they use (issue 29 item 5).

Kinds the held-out public prompts (``data/eval/heldout_public``) showed the genre rules
reading as essays or leaving to a labeller, each recognised by what the request asks the
writer to do, not by its topic:

- **an exam item about a given text** (阅读下面的文字，完成各题 / 完成（1）～（4）题 /
  完成问题): its questions say 谈谈你的看法 or quote 科普文章, but it asks for answers;
- **a short answer** (简述, 简要分析, 请解释, 回答下列问题) where the request names no
  essay form (作文, 文章, 写一篇 …);
- **a post for a platform or a marketing piece** (小红书风格文章, 公众号推文, 爆文级别的文章);
- **a news piece given its lead** (导语：…);
- **several pieces at once** (创作五篇日记, 写三篇短文): a series, not one essay prompt;
- **a text in another language** (用英文写一篇文章): the benchmark is of Chinese essays;
- **a list of questions** (准备相关问题, 列出采访问题);
- **a part of academic work** (国内外研究现状, 研究意义, 文献综述, 开题报告) where the request
  names no essay form.

:func:`non_essay_task` reads the matching text (``core.matching``) and the views
``genre_rules`` builds (task only; task and requirements), offsets kept, and returns what
it found with its span, or None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_EXAM_ITEM = re.compile(
    r"完成(?:下列|下面|以下|后面|文后)?(?:各|小|问|的问|的小|以下各)?题|完成问题|回答问题|"
    r"完成[（(]\s*\d+\s*[)）]\s*[~～〜\-—﹣－至到]{1,2}\s*[（(]?\s*\d")
_ANSWER = re.compile(r"简述|简要(?:说明|分析|概括|阐述|回答|评价)|请?解释(?:一下)?|"
                     r"(?:回答|解答)(?:下列|以下|下面)(?:问题|各题)")
# What says the request is for an essay (an answer task naming one is an essay prompt)
_ESSAY_FORM = re.compile(r"作文|文章|短文|随笔|散文|杂文|议论文|记叙文|说明文|描写文|读后感|"
                         r"观后感|演讲稿|(?:写|撰写|创作)(?:一篇|篇)")
_PLATFORM = re.compile(
    r"(?:小红书|公众号|自媒体|新媒体|朋友圈|微博|抖音|头条号|知乎|爆文|爆款|软文|营销|带货|种草)"
    r"[^，。；：:！？\n]{0,12}?(?:文章|笔记|帖子|帖|推文|文案)")
_NEWS_LEAD = re.compile(r"导语\s*[:：]")
_SEVERAL = re.compile(r"(?:写|创作|撰写|生成|编写)(?:[两二三四五六七八九十]|[2-9]|\d{2,})篇")
_OTHER_LANGUAGE = re.compile(
    r"(?:用|以|使用)(?:英文|英语|日文|日语|韩文|韩语|法文|法语|德文|德语|俄文|俄语|西班牙语)"
    r"(?:来)?(?:写|撰写|创作|完成)")
_QUESTIONS = re.compile(r"(?:准备|列出|拟出|设计)[^，。；！？\n]{0,10}?问题")
_ACADEMIC = re.compile(r"研究现状|研究意义|研究综述|文献综述|开题报告")


@dataclass(frozen=True)
class NonEssayTask:
    what: str  # how the evidence names it: "an exam item about a given text" …
    span: tuple[int, int]


def non_essay_task(scan: str, task_view: str, strong_view: str) -> NonEssayTask | None:
    """The first kind of non-essay request found, or None.

    ``scan`` is the whole prompt's matching text, ``task_view`` and ``strong_view`` the
    same with everything but the task (and the requirements) blanked."""
    checks: tuple[tuple[re.Pattern[str], str, str], ...] = (
        (_EXAM_ITEM, scan, "an exam item about a given text"),
        (_PLATFORM, strong_view, "a post for a platform or a marketing piece"),
        (_NEWS_LEAD, strong_view, "a news piece (given its lead)"),
        (_SEVERAL, strong_view, "several pieces, a series rather than one essay"),
        (_OTHER_LANGUAGE, scan, "a text in another language"),
        (_QUESTIONS, task_view, "a list of questions"),
    )
    for rx, view, what in checks:
        if (m := rx.search(view)) is not None:
            return NonEssayTask(what, m.span())
    if _ESSAY_FORM.search(scan) is not None:
        return None
    for rx, what in ((_ANSWER, "a short answer"), (_ACADEMIC, "a part of academic work")):
        if (m := rx.search(scan)) is not None:
            return NonEssayTask(what, m.span())
    return None
