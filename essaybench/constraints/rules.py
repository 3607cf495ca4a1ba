"""Requirements stated as a phrase: title, audience, material, style, content and format.

Each rule is a regex for one kind; a given title (以《X》为题) is found separately
because its value is kept for later compliance checks. See the package doc for
what each kind covers and why ``format`` does not count for the set.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from essaybench.constraints.model import Constraint, ConstraintKind


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
    # rewriting a given text is working from material: 续写这个故事, 根据这句诗扩写一篇短文,
    # 把《背影》改写成…, 请仿写 — a verb with its object or asked for (not 可以改写算法的
    # 一代, 黑话和缩写)
    _r("material", rf"(?:续写|改写|扩写|缩写|仿写)(?:成|为|{_DETERMINER}|一?[篇段个则首]|《|“"
                   r"|故事|课文|文章|短文|片段|段落|结尾|结局|诗)"
                   r"|(?:请|要求|试|尝试|根据|依据)你?(?:续写|改写|扩写|缩写|仿写)"),
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
                r"|文言(?:文)?(?:写作|写成|创作|撰写)"
                # 写一篇文言文 (but not 写一篇文言文的读后感 / 关于文言文的议论文)
                r"|(?:写|创作|撰写)(?:一篇|篇|一段|段)?(?:浅近的|简短的)?文言(?:文|短文)?(?![文短的之])"),
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


def find_phrases(text: str) -> Iterator[Constraint]:
    """Given titles, then the phrase rules in the order of ``_RULES``."""
    yield from _given_titles(text)
    yield from _phrases(text)
