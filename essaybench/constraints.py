"""The requirements an essay prompt states, found by deterministic rules.

Pure functions over the prompt text, shared by curation (the Open-Ended /
Constrained split) and, later, by instruction-following checks on essays.

Kinds (``Constraint.kind``) and the decisions behind them:

- ``length``: a number of characters, Arabic (800, 1,000, 1.5万) or Chinese
  (八百, 一千二 = 1200, 五六百 = 500–600). Qualifiers before (不少于, 至少,
  不超过, 约, 控制在 …) or after (以上, 以内, 左右 …) the number set the bound;
  a bare "八百字" is a target (``approx_chars``). A bare number must be at least
  100 (so 十字路口, 三字经, 一字之差 are not lengths); a qualified one at least 10.
  Only 字 counts as the unit: 800米, 2024年 and 800词 are not lengths. 字数不限 is
  recorded as a non-binding ``format`` note, never as a length.
- ``paragraphs``: 分三段, 不少于5段, 三个段落, 五个自然段. A bare "N段" needs
  N ≥ 2 and a following boundary (so 一段经历, 三段论, 第三段 are not counts).
- ``title``: 题目自拟 / 自拟标题 / 补全题目 oblige the writer to make a title and are
  binding. A given title (以《X》为题, 题目：X) is the topic, not an extra
  requirement: it is recorded with ``value`` = X for later compliance checks but
  does not count for the set, unless it has a blank to fill (半命题, "我的____同桌").
- ``audience``: 面向小学生, 写给妈妈的信, 给小学生看, 读者是…, 向外国朋友介绍.
- ``material``: 阅读下面的材料, 根据/结合材料, 引用名言/诗句, 续写下面的故事.
- ``style``: language register (语言生动, 幽默的语言), rhetoric and techniques
  (运用比喻, 运用插叙, 至少两种说明方法), person and voice (第一人称, 以…的口吻),
  文言, structure (并列式结构, 按空间顺序, 以…为线索) and evidence counts
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

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Literal

ConstraintKind = Literal[
    "length", "paragraphs", "title", "audience", "material", "style", "content", "format"]

APPROX_TOLERANCE = 0.10  # "约800字" accepts 720..880 characters


@dataclass(frozen=True)
class Constraint:
    kind: ConstraintKind
    evidence: str  # == prompt[span[0]:span[1]]
    span: tuple[int, int]
    counts_for_set: bool = True  # False: boilerplate or a given title (see module doc)
    min_chars: int | None = None
    max_chars: int | None = None
    approx_chars: int | None = None
    min_count: int | None = None  # paragraphs, arguments, examples, rhetorical devices
    max_count: int | None = None
    value: str | None = None  # the given title

    def to_json_dict(self) -> dict[str, object]:
        d = {k: v for k, v in asdict(self).items() if v is not None}
        d["text"] = d.pop("evidence")
        d["span"] = list(self.span)
        return d


# --- numbers ---------------------------------------------------------------------

_CN_DIGIT = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5,
             "六": 6, "七": 7, "八": 8, "九": 9}
_CN_UNIT = {"十": 10, "百": 100, "千": 1000}
_FULLWIDTH_DIGITS = str.maketrans("０１２３４５６７８９", "0123456789")
NUM = (r"(?:\d+(?:,\d{3})*(?:\.\d+)?\s*[千万]?"
       r"|[一二两三四五六七八九十百千万][零〇一二两三四五六七八九十百千万]*)")


def parse_number(token: str) -> int | None:
    """800, 1,000, 1.5万, 八百, 一千二 (=1200), 两万; None if not a single number."""
    token = token.translate(_FULLWIDTH_DIGITS).replace(",", "").replace(" ", "")
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([千万]?)", token)
    if m:
        return round(float(m.group(1)) * {"": 1, "千": 1000, "万": 10000}[m.group(2)])
    high, sep, low = token.partition("万")
    if not sep:
        return _cn_below_10000(token)
    high_value = _cn_below_10000(high) if high else 1
    if high_value is None or "万" in low:
        return None
    if low in _CN_DIGIT:  # 一万五 = 15000
        return high_value * 10000 + _CN_DIGIT[low] * 1000
    low_value = _cn_below_10000(low) if low else 0
    return None if low_value is None else high_value * 10000 + low_value


def _cn_below_10000(s: str) -> int | None:
    total, digit, last_unit, after_zero = 0, None, 10000, False
    for ch in s:
        if ch in _CN_DIGIT:
            if digit is not None:
                return None  # 五六 is a range, handled by the callers that allow it
            digit = _CN_DIGIT[ch] or None
            after_zero = after_zero or digit is None
        elif ch in _CN_UNIT and _CN_UNIT[ch] < last_unit:
            total += (digit or 1) * _CN_UNIT[ch]
            digit, last_unit = None, _CN_UNIT[ch]
        else:
            return None
    if digit is not None:  # 八百五 = 850, 一千二 = 1200, but 一百零五 = 105
        total += digit * (last_unit // 10 if last_unit in (100, 1000) and not after_zero else 1)
    return total


def _count_range(token: str) -> tuple[int, int] | None:
    """A small count: 三, 12, or two adjacent digits read as a range (一两 = 1–2)."""
    if len(token) == 2 and all(c in _CN_DIGIT for c in token):
        lo, hi = _CN_DIGIT[token[0]], _CN_DIGIT[token[1]]
        return (lo, hi) if 0 < lo < hi <= lo + 2 else None
    n = parse_number(token)
    return None if n is None else (n, n)


# --- length ----------------------------------------------------------------------

_MIN = ("不少于|不低于|不得少于|不能少于|不应少于|不可少于|不要少于|不宜少于|不小于|至少|最少|"
        "起码|不下于|多于|超过")
_MAX = ("不超过|不多于|不得超过|不能超过|不应超过|不可超过|不要超过|不宜超过|不大于|最多|至多|"
        "少于|低于|限制在|限定在|限")
_APPROX = "大约|大概|大致|差不多|约"
_LEFT = re.compile(rf"(?:(?P<min>{_MIN})|(?P<max>{_MAX})|(?P<approx>{_APPROX})|(?P<cap>控制在))"
                   r"(?:在|为|写|要|写到|达到|是)?\s*$")
_RIGHT = re.compile(r"\s*(?:(?P<min>及以上|或以上|以上|之上|开外)"
                    r"|(?P<max>以内|之内|以下|之下|内(?!容))|(?P<approx>左右|上下(?!文)|为宜))")
_RANGE_SEP = r"\s*(?:[-~～—–－]+|至|到)\s*"
_QTY = rf"(?P<a>{NUM})(?:\s*个?字?{_RANGE_SEP}(?P<b>{NUM}))?\s*(?P<more>余|多)?"
_NOT_A_LENGTH_AFTER = "路架经形句典迹谜符幕条帖体母"
_LENGTH_RXS = (
    # 字数不少于800 / 篇幅在600到800字之间: the number may stand without 字
    re.compile(rf"(?:字数|篇幅)[^，。；！？\n0-9一二两三四五六七八九十百千万]{{0,8}}?{_QTY}"
               r"\s*(?:个?字)?(?:之间)?"),
    re.compile(rf"(?<!《){_QTY}\s*个?字(?![{_NOT_A_LENGTH_AFTER}])"),
    # 五六百字 = 500–600
    re.compile(r"(?P<r1>[一二三四五六七八])(?P<r2>[二三四五六七八九])(?P<u>[百千])(?:余|多)?个?字"),
)


def _length_at(text: str, m: re.Match[str], led: bool) -> Constraint | None:
    start, end = m.span()
    if "r1" in m.groupdict():
        lo, hi = _CN_DIGIT[m["r1"]], _CN_DIGIT[m["r2"]]
        if hi != lo + 1:
            return None
        unit = _CN_UNIT[m["u"]]
        return Constraint("length", m[0], (start, end), min_chars=lo * unit, max_chars=hi * unit)
    a = parse_number(m["a"])
    b = parse_number(m["b"]) if m["b"] else None
    if a is None or (m["b"] and b is None):
        return None
    left_text = m[0][: m.start("a") - start] if led else text[max(0, start - 8): start]
    left = _LEFT.search(left_text)
    right = _RIGHT.match(text, end)
    if not led and left:
        start -= len(left_text) - left.start()
    if right:
        end = right.end()
    left_kind = left.lastgroup if left else None
    right_kind = right.lastgroup if right else None
    if b is not None:
        lo, hi = min(a, b), max(a, b)
        return Constraint("length", text[start:end], (start, end), min_chars=lo, max_chars=hi)
    qualified = bool(led or left or right or m["more"])
    if a < 10 or (not qualified and a < 100):
        return None
    if left_kind in ("min", "max"):
        bound = left_kind
    elif right_kind:
        bound = right_kind
    elif m["more"]:
        bound = "min"  # 八百余字, 千多字: more than
    elif left_kind == "cap":
        bound = "max"  # 控制在800字: a ceiling
    else:
        bound = "approx"  # 约800字, and a bare 800字 is a target
    return Constraint("length", text[start:end], (start, end),
                      min_chars=a if bound == "min" else None,
                      max_chars=a if bound == "max" else None,
                      approx_chars=a if bound == "approx" else None)


def _lengths(text: str) -> Iterator[Constraint]:
    for i, rx in enumerate(_LENGTH_RXS):
        pos = 0
        while (m := rx.search(text, pos)) is not None:
            found = _length_at(text, m, led=i == 0)
            if found is not None:
                yield found
                pos = m.end()
            else:  # 统一八百字: retry one character later so 八百字 is still seen
                pos = m.start() + 1


# --- counts: paragraphs, arguments, examples --------------------------------------

_SMALL = r"(?:\d{1,2}|[一二两三四五六七八九十]{1,3})"
_COUNT_LEFT = rf"(?P<pre>{_MIN}|{_MAX}|分成|分为|写成|分|共|用)?"
_COUNT_RIGHT = re.compile(r"(?P<min>及以上|以上)|(?P<max>以内|之内|以下)|左右")
_PARA_RX = re.compile(rf"{_COUNT_LEFT}\s*(?P<n>{_SMALL})(?:{_RANGE_SEP}(?P<n2>{_SMALL}))?\s*"
                      r"(?P<ge>个)?(?P<unit>自然段|段落|段)")
# after a bare 三段: a boundary, not a word (三段论, 一段经历)
_PARA_BOUNDARY = re.compile(
    r"$|[，。；、！？,.;:：）)\s]|以上|以内|左右|式|结构|来|写|组成|构成|话|文字")
_ITEM_RX = re.compile(rf"{_COUNT_LEFT}\s*(?P<n>{_SMALL})(?:{_RANGE_SEP}(?P<n2>{_SMALL}))?\s*"
                      r"(?P<ge>个|条|种|件|处|则)(?:以上)?[^，。；！？\n]{0,6}?"
                      r"(?P<unit>分论点|论点|论据|事例|例子|实例|论证方法|说明方法|修辞手法)")


def _counts(text: str, rx: re.Pattern[str], kind: ConstraintKind) -> Iterator[Constraint]:
    pos = 0
    while (m := rx.search(text, pos)) is not None:
        pos = m.start() + 1
        lo_hi = _count_range(m["n"])
        hi2 = _count_range(m["n2"]) if m["n2"] else None
        ordinal = m.start() > 0 and text[m.start() - 1] == "第"  # 第三段 names a paragraph
        if lo_hi is None or (m["n2"] and hi2 is None) or ordinal:
            continue
        lo: int = lo_hi[0]
        hi: int | None = (hi2 or lo_hi)[1]
        pre = m["pre"] or ""
        bare = not (pre or m["ge"])
        # 分三段论述 is a count, 用三段论 and 一段经历 are not
        if (kind == "paragraphs" and m["unit"] == "段" and pre not in ("分", "分成", "分为", "写成")
                and (lo < 2 or not _PARA_BOUNDARY.match(text, m.end()))):
            continue
        if kind == "style" and bare:
            continue
        end = m.end()
        right = _COUNT_RIGHT.match(text, end)
        if right:
            end = right.end()
        at_least = bool(re.fullmatch(_MIN, pre)) or (right is not None and right.lastgroup == "min")
        at_most = bool(re.fullmatch(_MAX, pre)) or (right is not None and right.lastgroup == "max")
        # 三个论据 means at least three; 分三段 means exactly three
        if lo == hi and (at_least or (kind == "style" and not at_most)):
            hi = None
        if lo == hi and at_most:
            lo = 0
        yield Constraint(kind, text[m.start():end], (m.start(), end), min_count=lo or None,
                         max_count=hi)
        pos = end


# --- phrase rules -----------------------------------------------------------------

def _alt(words: str) -> str:
    """Whitespace-separated words as a regex alternation (patterns kept readable)."""
    return "|".join(words.split())


_PEOPLE = _alt("""
    学生 读者 儿童 孩子 小朋友 青少年 少年 年轻人 大众 公众 家长 父母 老师 教师 同学 朋友 网友
    听众 观众 受众 市民 居民 群众 游客 外国人 用户 患者 病人 老人 老年 长辈 员工 领导 评委
    初学者 新手 人士 爷爷 奶奶 外公 外婆 姥姥 姥爷 爸爸 妈妈 母亲 父亲 哥哥 姐姐 弟弟 妹妹
    自己 学弟 学妹 新生 消费者 顾客 村民 战士 军人 医生 护士 同龄人 毕业生 队员""")
_PEOPLE_RX = re.compile(_PEOPLE)
_WHO = r"(?P<who>[^，。；！？、\s“”《》]{1,12}?)"
_QUOTE_PAIRS = (("《", "》"), ("“", "”"), ('"', '"'), ("「", "」"), ("『", "』"), ("‘", "’"))
_BLANK = re.compile(r"_|＿|…|（\s*）|\(\s*\)|□")
_UNTIL_PUNCT = r"[^，。；！？\n]"
_TECHNIQUE = _alt("""
    比喻 拟人 排比 夸张 对比 设问 反问 对偶 借代 衬托 烘托 象征 借景抒情 托物言志 欲扬先抑
    首尾呼应 倒叙 插叙 补叙 修辞 写法 手法 描写方法 说明方法 论证方法 论证 感官 细节描写
    心理描写 动作描写 外貌描写 肖像描写 语言描写 神态描写 环境描写 景物描写 侧面描写 正面描写
    白描 移步换景 动静结合 点面结合 虚实结合""")
_TECHNIQUE_VERB = _alt("""
    使用 运用 用上 采用 用到 借助 综合运用 注重 注意 加入 多用 善用 通过 调动 要求 要有 需有
    须有 要""")
_TONE = _alt("""
    生动 形象 优美 简洁 简练 通俗 幽默 风趣 诙谐 朴实 平实 流畅 细腻 严谨 活泼 准确 有文采
    富有文采 有感染力 口语化 正式 庄重 抒情 诗意 轻松 有趣 亲切 客观 童趣 清新""")
_DETERMINER = _alt("""
    下面 下列 以下 上面 上述 以上 所给 给出 提供 这个 这则 这段 这篇 这些 这幅 这组 这 本""")
_MATERIAL = _alt("""
    材料 文字 短文 诗歌 故事 漫画 图画 图片 图表 名言 对话 语段 文段 寓言 新闻 报道 内容 资料
    引文 数据 题干""")
_MUST = r"(?:必须|务必|一定要|须|需要|需|要求|应当|应该|(?<![主只想还])要)"


@dataclass(frozen=True)
class _Rule:
    kind: ConstraintKind
    rx: re.Pattern[str]
    counts_for_set: bool = True
    needs_people: bool = False  # group "who" must name a reader, not a thing (面向未来)


def _r(kind: ConstraintKind, pattern: str, counts_for_set: bool = True,
       needs_people: bool = False) -> _Rule:
    return _Rule(kind, re.compile(pattern), counts_for_set, needs_people)


_RULES: tuple[_Rule, ...] = (
    # title: the writer must make or complete the title
    _r("title", r"(?:题目|标题|文题)(?:自拟|自定|自选|自己拟定?)|自(?:拟|定|选)(?:题目|标题|文题)"
                r"|(?<![模虚])(?:拟|拟写|拟定)一?个?(?:恰当|合适|新颖)?的?(?:题目|标题)"
                r"|补全题目|(?:将|把)题目补(?:充|写)?完整|半命题作文"),
    # audience
    _r("audience", rf"面向{_WHO}(?:的|阅读|，|。|$)", needs_people=True),
    _r("audience", rf"写给{_WHO}的(?:一封)?(?:信|书信|家书|话|文章|演讲稿|倡议书)"),
    _r("audience", rf"写给{_WHO}(?=[，。；！？\s]|$)", needs_people=True),
    _r("audience", rf"给{_WHO}写(?:一封|封)(?:信|书信|家书)"),
    _r("audience", rf"给{_WHO}写(?:一篇|篇|一段)", needs_people=True),
    _r("audience", rf"(?:写|讲|读|念)?给{_WHO}(?:看|听|读|唱|阅读)(?![见到法])", needs_people=True),
    _r("audience", rf"(?:目标)?(?:读者|受众|听众|阅读对象|演讲对象)(?:对象)?(?:是|为|：|:)\s*"
                   rf"{_WHO}(?=[，。；！？\s]|$)"),
    _r("audience", rf"(?:以|把){_WHO}(?:作为|为|当作)(?:目标)?(?:读者|受众|听众|对象)"),
    _r("audience", rf"(?:适合|便于){_WHO}(?:阅读|理解|看懂)", needs_people=True),
    _r("audience", rf"向{_WHO}(?:介绍|讲述|推荐|讲解|说明)", needs_people=True),
    # material: a given text, picture or quotation to work from
    _r("material", rf"(?:必须|须|需|要)?(?:阅读|根据|依据|结合|读了|读完|看了|参考|围绕|针对|依照|"
                   rf"引用)(?:{_DETERMINER})的?(?:一?[则段篇幅组])?(?:文字)?(?:{_MATERIAL})"),
    _r("material", r"(?:必须|须|需|要)?(?:根据|结合|依据|引用|运用|围绕)材料|材料作文|看图作文"
                   r"|材料(?:是|为|：|:)|观察(?:下面|这幅|这)?的?(?:画面|图画|漫画|图片)|参考资料[:：]"),
    _r("material", rf"(?:续写|改写|扩写|缩写)(?:{_DETERMINER})"),
    _r("material", rf"(?:引用|援引|引述|运用|化用){_UNTIL_PUNCT}{{0,8}}?"
                   r"(?:名言|名句|诗句|古诗|诗词|典故|谚语|俗语|格言|警句)"),
    # style: register, techniques, person and voice, structure
    _r("style", rf"(?:语言|文笔|笔调|风格|行文|语气|表达|文字|笔触|基调)(?:风格)?"
                rf"(?:要求|需要|应该|应当|必须|力求|尽量|做到|要|应|须|需|以|为){{0,2}}(?:{_TONE})"),
    _r("style", rf"(?:{_TONE})的(?:语言|文字|笔调|风格|口吻|语气|文笔|笔触)"),
    _r("style", rf"(?:写得|要|需要|尽量)更?(?:{_TONE})(?:一点|一些|些)?(?=[，。；！？\s]|$)"),
    _r("style", rf"(?:{_TECHNIQUE_VERB}){_UNTIL_PUNCT}{{0,12}}?(?:{_TECHNIQUE})"
                r"(?:[的等]*(?:修辞手法|表现手法|写法|手法|修辞|方法))?"),
    _r("style", rf"(?:比喻|拟人|排比|夸张){_UNTIL_PUNCT}{{0,6}}?(?:修辞|手法)"),
    _r("style", r"第[一二三]人称"),
    _r("style", rf"(?:以|用|从){_WHO}的?(?:口吻|视角|身份|语气)"),
    _r("style", r"(?:用|以|使用|采用|写成|改写成|改写为|仿照)(?:浅近的)?文言(?:文)?"
                r"|文言(?:文)?(?:写作|写成|创作|撰写)"),
    _r("style", r"(?:以|用|采用)(?:书信|日记|对话|童话|寓言|演讲稿|书信体|日记体)的?"
                r"(?:形式|体裁|方式)"),
    _r("style", rf"(?:采用|运用|使用|按照?){_UNTIL_PUNCT}{{0,8}}?(?:式结构|的结构|顺序)"),
    _r("style", rf"以{_UNTIL_PUNCT}{{1,10}}为线索"),
    # content: what the essay must contain
    _r("content", rf"{_MUST}(?:包含|包括|提到|提及|涉及|写到|写出|体现|融入|出现|含有|交代|点明|"
                  r"紧扣)(?!真情实感)[^，。；！？\n\s]{1,20}"),
    _r("content", rf"(?:用上|用到|使用|运用){_UNTIL_PUNCT}{{0,20}}?(?:这|等)?"
                  r"[几两三四五六七八九十\d]*个(?:词语|词|成语|句子|关键词)"),
    _r("content", r"(?:结合|联系)(?:自己|自身|你|你自己|个人)?的?(?:生活|亲身|真实|学习|成长)*"
                  r"[和与]?(?:生活|学习|经历|体验|经验|实际|感受|见闻)"),
    # format: exam boilerplate, recorded but not binding
    _r("format", r"不(?:得|要|准|能|许|可)(?:抄袭|套作|宿构)(?:、(?:抄袭|套作|宿构))*", False),
    _r("format", rf"不(?:得|要|准|能|许|可)(?:泄露|透露|暴露|出现|写出)(?:真实的?)?"
                 rf"{_UNTIL_PUNCT}{{0,10}}?(?:信息|身份|姓名|人名|校名|地名)", False),
    _r("format", r"文体不限|不限文体|体裁不限|不限体裁|文体自选|自选文体|文体自定|除诗歌(?:以)?外"
                 r"|诗歌除外|明确文体", False),
    _r("format", r"立意自定|自定立意|立意自选|角度自选|自选角度|选准角度|确定立意", False),
    _r("format", r"(?:写出|抒发|表达|要有)?真情实感|书写工整|卷面整洁|字迹工整", False),
    _r("format", r"字数不限|不限字数|字数不作要求|篇幅不限", False),
)

# each opening mark closes only with its own partner: 《论“躺平”》, “说‘慢’”
_QUOTED_TITLE = r"\s*(?:" + "|".join(
    f"{o}(?P<q{i}>[^{c}\n]{{1,30}}){c}" for i, (o, c) in enumerate(_QUOTE_PAIRS)) + ")"
_GIVEN_TITLE = (
    re.compile(rf"(?:以|用){_QUOTED_TITLE}\s*(?:作)?为(?:题目|标题|题)(?!材)"),
    re.compile(rf"(?:用|把){_QUOTED_TITLE}\s*(?:作为|当作)(?:题目|标题)"),
    re.compile(rf"(?:题目|标题|文题)(?:是|为|：|:)?{_QUOTED_TITLE}"),
    # unquoted: 题目：我的____同桌 (but 题目是写一篇800字的… is a task, not a title)
    re.compile(r"(?:题目|标题|文题)(?:是|为|：|:)\s*(?P<t>(?:(?!写|要求|字)[^《“\"，。；！？\n]){1,30}?)"
               r"(?=[，。；！？\n]|\s*要求|$)"),
    re.compile(r"(?:作文|文章|记叙文|议论文|说明文|描写文|散文)[:：]?\s*《(?P<t>[^》\n]{1,30})》"),
    re.compile(r"以(?P<t>[^，。；！？\n“”《》]{1,12})为题(?:目(?!的))?(?!材)"),
)


def _given_titles(text: str) -> Iterator[Constraint]:
    for rx in _GIVEN_TITLE:
        for m in rx.finditer(text):
            title = next(v for v in m.groupdict().values() if v is not None).strip()
            if title:
                yield Constraint("title", m[0], m.span(), counts_for_set=bool(_BLANK.search(title)),
                                 value=title)


def _phrases(text: str) -> Iterator[Constraint]:
    for rule in _RULES:
        for m in rule.rx.finditer(text):
            who = m.groupdict().get("who")
            if rule.needs_people and not (who and _PEOPLE_RX.search(who)):
                continue
            yield Constraint(rule.kind, m[0], m.span(), counts_for_set=rule.counts_for_set)


def _keep_longest(found: list[Constraint], text: str) -> list[Constraint]:
    quoted = [m.span() for m in re.finditer(r"《[^》\n]{1,40}》", text)]
    titles = [c.span for c in found if c.kind == "title" and c.value is not None]
    shelter = quoted + titles
    kept: list[Constraint] = []
    for c in sorted(found, key=lambda c: (c.span[0], -(c.span[1] - c.span[0]))):
        if c.kind != "title" and any(a <= c.span[0] and c.span[1] <= b for a, b in shelter):
            continue
        if any(k.kind == c.kind and k.span[0] < c.span[1] and c.span[0] < k.span[1] for k in kept):
            continue  # the same requirement seen by two rules: keep the longer, earlier match
        kept.append(c)
    return kept


def extract_constraints(text: str) -> list[Constraint]:
    """Every requirement found in ``text``, in order of appearance."""
    found = [*_lengths(text), *_counts(text, _PARA_RX, "paragraphs"),
             *_counts(text, _ITEM_RX, "style"), *_given_titles(text), *_phrases(text)]
    return _keep_longest(found, text)


def binding(constraints: Iterable[Constraint]) -> list[Constraint]:
    """The constraints that make a prompt Constrained."""
    return [c for c in constraints if c.counts_for_set]


def constraints_json(constraints: Iterable[Constraint]) -> str:
    return json.dumps([c.to_json_dict() for c in constraints], ensure_ascii=False)


# --- length requirement and character counts --------------------------------------


@dataclass(frozen=True)
class LengthRequirement:
    """All length constraints of a prompt combined: the tightest min and max, the first target."""

    min_chars: int | None
    max_chars: int | None
    approx_chars: int | None
    evidence: tuple[str, ...]

    def bounds(self) -> tuple[int | None, int | None]:
        """Accepted range; a target ``approx_chars`` allows ±APPROX_TOLERANCE."""
        lo, hi = self.min_chars, self.max_chars
        if self.approx_chars is not None:
            a_lo = math.ceil(self.approx_chars * (1 - APPROX_TOLERANCE))
            a_hi = math.floor(self.approx_chars * (1 + APPROX_TOLERANCE))
            lo = a_lo if lo is None else max(lo, a_lo)
            hi = a_hi if hi is None else min(hi, a_hi)
        return lo, hi

    @property
    def conflicting(self) -> bool:
        lo, hi = self.bounds()
        return lo is not None and hi is not None and lo > hi

    def is_met(self, n_chars: int) -> bool:
        lo, hi = self.bounds()
        return (lo is None or n_chars >= lo) and (hi is None or n_chars <= hi)


def length_requirement(text: str) -> LengthRequirement | None:
    lengths = [c for c in extract_constraints(text) if c.kind == "length"]
    if not lengths:
        return None
    mins = [c.min_chars for c in lengths if c.min_chars is not None]
    maxes = [c.max_chars for c in lengths if c.max_chars is not None]
    approx = [c.approx_chars for c in lengths if c.approx_chars is not None]
    return LengthRequirement(max(mins) if mins else None, min(maxes) if maxes else None,
                             approx[0] if approx else None, tuple(c.evidence for c in lengths))


# CJK Unified Ideographs and Extensions A–I, plus the compatibility ideographs
# (which a reader cannot tell from unified ones) and 〇 (二〇二四).
_IDEOGRAPH_RANGES = (
    (0x3007, 0x3007), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF),
    (0x20000, 0x2A6DF), (0x2A700, 0x2EE5F), (0x2F800, 0x2FA1F), (0x30000, 0x323AF),
)


def _is_ideograph(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _IDEOGRAPH_RANGES)


def count_chinese_chars(essay: str) -> int:
    """Chinese characters only: punctuation, digits, Latin letters and spaces do not count."""
    return sum(1 for ch in essay if _is_ideograph(ch))


def count_grid_chars(essay: str) -> int:
    """The exam-paper (方格稿纸) count: every non-space character, punctuation included.

    Exams count each character and each punctuation mark as one cell; this
    also counts each digit and Latin letter as one (grids often put two per
    cell), so it is an upper bound for mixed-script text.
    """
    return sum(1 for ch in essay if not ch.isspace() and ch.isprintable())
