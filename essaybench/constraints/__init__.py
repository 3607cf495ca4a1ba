"""The requirements an essay prompt states, found by deterministic rules.

Pure functions over the prompt text, shared by curation (the Open-Ended /
Constrained split) and, later, by instruction-following checks on essays.
Modules: ``numbers`` (numerals), ``quantities`` (length and count rules),
``targets`` (what a length is the length of), ``rules`` (phrase rules and given
titles), ``extract`` (all rules, overlaps resolved, targets assigned),
``requirement`` and ``length`` (length requirements combined per target),
``counting`` (essay character counts). Rules match ``core.matching.matching_text``
(traditional characters read as simplified); evidence quotes the original text.

Kinds (``Constraint.kind``) and the decisions behind them:

- ``length``: a number of characters, Arabic (800, 1,000, 1.5万) or Chinese
  (八百, 一千二 = 1200, 五六百 = 500–600). Qualifiers before (不少于, 至少,
  不超过, 约, 控制在 …) or after (以上, 以内, 左右 …) the number set the bound;
  a bare "八百字" is a target (``approx_chars``). A bare number must be at least
  100 (so 十字路口, 三字经, 一字之差 are not lengths); a qualified one at least 10.
  Only 字 counts as the unit: 800米, 2024年 and 800词 are not lengths. 字数不限 is
  recorded as a non-binding ``format`` note, never as a length. Each length has a
  ``target``: ``body`` (the essay), ``title``, ``summary`` or ``other`` (a slogan,
  each of ten comments, …); lengths combine per target, length compliance reads the
  body's only, and no combined requirement ever has min > max (see ``targets``).
- ``paragraphs``: 分三段, 不少于5段, 三个段落, 五个自然段. A bare "N段" needs
  N ≥ 2 and a following boundary (so 一段经历, 三段论, 第三段 are not counts).
- ``count``: pieces to write, with a verb of making or a bound before the number
  and at least two: 写十条评语, 创作两首诗, 写两篇作文, 提出三点建议 (``unit`` is the
  measure word 条 首 篇 点 句, ``target`` the thing counted when named).
- ``title``: 题目自拟 / 自拟标题 / 补全题目 oblige the writer to make a title and are
  binding. A given title (以《X》为题, 题目：X) is the topic, not an extra
  requirement: it is recorded with ``value`` = X for later compliance checks but
  does not count for the set, unless it has a blank to fill (半命题, "我的____同桌").
- ``audience``: 面向小学生, 写给妈妈的信, 给小学生看, 读者是…, 向外国朋友介绍.
- ``material``: 阅读下面的材料, 根据/结合材料, 引用名言/诗句, and any rewriting of a
  given text: 续写, 扩写, 缩写, 改写, 仿写 (not 改写了历史).
- ``style``: language register (语言生动, 幽默的语言), rhetoric and techniques
  (运用比喻, 运用插叙, 至少两种说明方法), person and voice (第一人称, 以…的口吻),
  文言 (用文言文写, 写一篇文言文), structure (并列式结构, 按空间顺序, 以…为线索) and evidence counts
  (不少于三个论据, 一两件典型事例).
- ``content``: what the essay must contain (必须包含…, 结合自己的经历).
- ``format``: exam boilerplate — 不得抄袭/套作, 不得泄露个人信息, 不得出现真实
  人名校名, 文体不限, 除诗歌外, 立意自定, 写出真情实感, 字数不限. Recorded, but
  ``counts_for_set`` is False. Reason: every exam prompt carries these lines and
  any original prose essay satisfies them, so they do not narrow what the
  writer may produce; counting them would make the Open/Constrained split
  follow the source (exam paper vs chatbot log) instead of the prompt, while
  the paper's Open set is "genre and topic only" in substance.

Matches of a kind that overlap keep the longest; anything inside 《…》 (a work's
or the given title) is ignored except the title itself.
"""

from essaybench.constraints.counting import chinese_share, count_chinese_chars, count_grid_chars
from essaybench.constraints.extract import binding, constraints_json, extract_constraints
from essaybench.constraints.length import (
    APPROX_TOLERANCE,
    LengthRequirement,
    length_requirement,
    length_requirements,
)
from essaybench.constraints.model import LENGTH_TARGETS, Constraint, ConstraintKind, LengthTarget
from essaybench.constraints.numbers import NUM, parse_number

__all__ = [
    "APPROX_TOLERANCE",
    "LENGTH_TARGETS",
    "NUM",
    "Constraint",
    "ConstraintKind",
    "LengthRequirement",
    "LengthTarget",
    "binding",
    "chinese_share",
    "constraints_json",
    "count_chinese_chars",
    "count_grid_chars",
    "extract_constraints",
    "length_requirement",
    "length_requirements",
    "parse_number",
]
