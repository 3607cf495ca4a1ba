"""Genre of a prompt by rules, read from its task and requirements (``prompt_parts``).

Decision, in order:

1. **The requested product** (the head noun after 写/撰写/创作/起草 in the task, "写一封
   感谢信", "写一段点评", "写一个童话故事"): when every product the task names is a
   non-essay form (a letter, a poem, a comment, a summary, a script, a plan …) there is
   no essay genre to decide; the prompt stays undecided and goes to review, whatever
   genre words it quotes ("给一篇议论文写一段点评"). 自拟题目 names no product; a request
   for leave (帮我请个假) is an errand, no essay either; so are the kinds of
   ``non_essay_tasks`` (an exam item about a given text, a short answer, a platform post,
   a news piece, several pieces at once, a text in another language, a list of questions).
2. **Open genre**: the task or requirements leave the genre to the writer (文体不限,
   体裁不限, 自选文体, 自定文体, 明确文体, 选定文体, 选择你最能驾驭的文体 …): allowed
   genres ``["any"]``, no single genre.
3. **Explicit genre words** (议论文, 记叙文, 描写文, 说明文 and a few compounds such as
   写景散文, 科普文章, 驳论文) in the task or requirements, unless negated (不要写成议论文,
   除记叙文外): one genre decides; two or more ("写一篇议论文或记叙文", "任选一题" with a
   genre per item) are a choice: allowed genres = those, no single genre.
   Bare 散文 names a form, not one of the four genres, and decides nothing.
4. **Cue groups** (one point per group present) in the task and requirements: a unique
   top score decides, a tie leaves the genre undecided, and so does a top genre whose
   cues are all topic words (认识, 寓言, 角落, 场面: what the essay is about, not how it is
   written; "分享你对美的体验或认识" is no argumentative prompt). The topic of an opinion frame
   ("谈谈你对成长的看法": 成长) is the topic, not a cue. Cues in the material are weak
   evidence: they are listed for the reviewer and never decide, not even a tie
   ("他讲述了自己的成长经历" in a story is about the story, not the essay asked for;
   breaking ties with them turned reflections on a story into narratives).

Matching reads ``core.matching.matching_text`` (traditional characters as simplified),
offset for offset; evidence spans index the prompt as given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from essaybench.core.matching import matching_text
from essaybench.curate.labeler import Genre
from essaybench.curate.non_essay_tasks import NonEssayTask, non_essay_task
from essaybench.curate.prompt_parts import PromptParts, Segment, quotations, split_prompt

ANY_GENRE = "any"  # allowed_genres of a prompt that leaves the genre to the writer

_EXPLICIT: dict[Genre, re.Pattern[str]] = {
    Genre.ARGUMENTATIVE: re.compile(r"议论文|议论性的?(?:文章|散文|短文)|驳论文|立论文|杂文|时评"),
    Genre.NARRATIVE: re.compile(r"记叙文|叙事散文|叙事文|记叙性的?(?:文章|散文|短文)"),
    Genre.DESCRIPTIVE: re.compile(
        r"描写文|写景(?:散文|作文|短文|文)|抒情散文|状物散文|描写性的?(?:文章|短文)"),
    Genre.EXPOSITORY: re.compile(
        r"说明文(?![字件])|说明性的?(?:文章|短文)|(?:科普|普法)(?:说明)?(?:文章|短文|小品|文)"),
}
_OPEN_GENRE = re.compile(
    r"(?:文体|体裁)(?:不限|自选|自定|自拟|任选|自由|均可|不作要求|不做要求)|"
    r"(?:不限|自选|自定|任选)(?:文体|体裁)|明确文体|文体明确|"
    # issue 29: 选定文体, 大胆选择你最能驾驭的文体, 选择自己擅长的文体
    r"(?:选定|选好|选择)(?:[^，。；：\n]{0,12}?的)?(?:文体|体裁)")
_NEGATED_BEFORE = re.compile(
    r"(?:不要|不得|不能|不可|不宜|切勿|别|禁止|避免|而非|不是)(?:写成|写作|写|采用|用)?(?:一篇)?$|除$")
_NEGATED_AFTER = re.compile(r"除外|以外")
_NOT_TECHNIQUE = "".join(f"(?<!{w})" for w in ("细节", "心理", "外貌", "动作", "语言", "神态",
                                                "肖像", "环境", "感官"))
# Reflection words (an argumentative topic cue, like 读后感's 感): issue 30 adds 心得, 体会
# and 感想, so a 个人心得 that may give a view or tell a story ties instead of reading as a
# narrative from its story cues alone.
_REFLECTION = r"思考|认识|理解|感悟|心得|体会|感想"
_CUES: dict[Genre, tuple[str, ...]] = {
    Genre.ARGUMENTATIVE: (
        r"谈谈|说说|谈一谈", r"看法|观点|见解|主张|立场", r"辩证|思辨", r"启示|道理",
        r"(?<!的)评价|(?<!的)评论|点评|书评|影评", r"论述|论证|论点|论据|阐述|阐明", r"议论|议一议",
        r"辩论|辩题|驳斥|反驳", r"利弊|利与弊|利大于弊|弊大于利",
        r"怎么看|如何看待|怎样看待|是否", r"演讲稿|读后感|观后感|读书报告|倡议",
        r"赞成|反对|认同|同意",
        _REFLECTION, r"(?:^|[《“\"「：:\s])论(?![文语\s，。])"),
    Genre.NARRATIVE: (
        r"讲述|讲讲|叙述|记叙|记述|叙事", r"经历", r"故事", r"那一(?:刻|次|天|年|瞬间)",
        r"难忘|难以忘怀", r"成长", r"记一(?:次|件|个)|一件事", r"回忆|往事|童年|第一次",
        r"感动", r"传记|日记|周记", r"童话|寓言|小说", r"发生"),
    Genre.DESCRIPTIVE: (
        rf"{_NOT_TECHNIQUE}描写(?!方法)", r"描绘|刻画", r"景色|景物|风景|风光|美景|景象|景致",
        r"写景|状物|即景", r"[春夏秋冬]天的|[春夏秋冬]日|四季", r"一角|角落",
        r"感官|视觉|听觉|嗅觉|触觉|味觉", r"色彩|画面|氛围|意境",
        r"月色|夜色|晚霞|朝霞|日出|日落|雪景|雨景|夜景", r"场面|场景", r"游记"),
    Genre.EXPOSITORY: (
        r"介绍", r"说明(?!理由|原因|你的)", r"原理|成因", r"科普|科学",
        r"是怎样|怎样(?:制作|做|形成|产生|工作)|如何(?:制作|形成|产生|使用|工作)|为什么会",
        r"制作方法|使用方法|做法|步骤", r"构造|功能|用途|种类|分类",
        r"指南|攻略|说明书"),
}
_CUE_RXS = {genre: [re.compile(c) for c in cues] for genre, cues in _CUES.items()}
# Topic words (issue 29): they name what an essay may be about ("分享你对美的体验或认识",
# "以“角落”为题", "以“寓言”为题"), not how it is written. They count like any cue, but a
# genre whose cues are all topic words is not decided by them.
_TOPIC_CUES = frozenset({_REFLECTION, r"童话|寓言|小说", r"一角|角落", r"场面|场景"})
_TOPIC_RX = re.compile("|".join(_TOPIC_CUES))
# What the task asks to be written: the noun phrase after the verb up to a clause break;
# its head (last word) says whether it is an essay.
# 自拟题目 leaves the title to the writer: it is not what is asked for (issue 29); 整理成/编成
# name a product too ("整理成一则新闻"); a colon ends the product, the content follows it.
_PRODUCT = re.compile(r"(?:写|撰写|创作|起草|(?<!自)拟|编写|设计|生成|给出|(?:整理|改编|编|做)成)"
                      r"(?:一|两|几|个|份|封|首|段|则|条|篇|套|期|下|张|部|本)*"
                      r"(?P<np>[^，。；：:！？!?;,\n]{1,30})")
_ESSAY_HEAD = re.compile(
    r"(?:文章|作文|短文|议论文|记叙文|说明文|描写文|散文|杂文|时评|读后感|观后感|读书报告|演讲稿|发言稿|"
    r"辩论稿|周记|日记|随笔|游记|征文|文)\s*(?:吗|吧|呢)?\s*$")
_NON_ESSAY_WORDS = (
    r"信|邮件|函|通知|启事|公告|教案|课件|方案|计划|规划书?|策划书?|(?<!读书)报告|总结|纪要|评语|点评|短评|"
    r"影评|摘要|简介|文案|广告语?|标语|口号|诗|词|歌词|剧本|脚本|童话(?:故事)?|小说|寓言故事|"
    r"致辞|主持词|颁奖词|开场白|申请书|合同|简历|说明书|攻略|模板|大纲|推文|帖子|海报|祝福语?|"
    r"贺词|对联|店名|名字|题目|试卷|习题|提纲|作品|"
    # issue 30: letters and notes, news, jokes, reviews, case studies, orations, fiction
    # and fragments the always-a-genre labeller published
    r"请假条|假条|便条|借条|收条|留言条|新闻稿?|消息|通讯稿?|简讯|报道|笑话|段子|书评|乐评|剧评|"
    r"综述|研究现状|案例分析|案例研究|分析报告|祭文|悼词|悼文|挽联|讣告|墓志铭|独白|语录|台词|同人(?:文|小说)?|"
    # a kind of story is fiction; a bare 故事 ("写一篇关于我和狗狗的故事") may be a narrative
    r"(?:小|历史|奇幻|魔幻|玄幻|推理|悬疑|科幻|睡前|情感|爱情|恐怖|鬼|武侠|侦探)故事|"
    r"抽象(?:文学|话)|开头|结尾|(?:分析|研究|调研|评测|测评)文章")
_NON_ESSAY_HEAD = re.compile(rf"(?:{_NON_ESSAY_WORDS})\s*(?:吗|吧|呢)?\s*$")
# A product named at the end of a long task sentence ("写一篇主人公……的玄幻小说。").
_PRODUCT_END = re.compile(r"(?:写|撰写|创作|编写)(?:一|篇|个|段|首|部|则)+[^。！？；\n]{0,200}?的"
                          r"(?P<np>[^，。；！？、的\s]{1,8})(?=\s*(?:[。；！？\n]|$))")
# A task that is an exercise on a given text, not writing: correcting, joking.
_NON_WRITING_TASK = re.compile(
    r"(?:改正|修改|订正|批改|纠正|找出|指出)[^。！？；\n]{0,20}?(?:错误|错别字|病句|不当之处|语病)|"
    r"改错|改病句|讲(?:一个|个|几个)?笑话")
# A request that is an errand, not writing: asking for leave (issue 29: 帮我请个假).
_ERRAND = re.compile(r"请(?:[一两三四五六七八九十半几\d]+天|个|一下)假|"
                     r"(?:帮|替)我[^。！？；\n]{0,12}?请假")

_STRONG: set[Segment] = {"task", "requirements"}
# 对X的看法: X is what the opinion is about, its words are no genre cues
_OPINION_TOPIC = re.compile(
    r"对(?P<topic>[^，。；？！,.;?!\n]{1,20}?)的(?:看法|认识|理解|思考|感悟|见解|观点|态度)")


@dataclass(frozen=True)
class RuleGenre:
    """What the rules found: a single genre, a choice, an open genre, or nothing.

    ``allowed`` is ``()`` when undecided, ``(genre,)`` for one genre, several genre values
    for a choice, ``("any",)`` for an open genre. ``span``/``segment`` locate the deciding
    evidence in the prompt (for a choice or an open genre: the first word that made it so).
    """

    genre: Genre | None
    evidence: str
    allowed: tuple[str, ...] = ()
    open_genre: bool = False
    span: tuple[int, int] | None = None
    segment: Segment | None = None
    parts: PromptParts | None = field(default=None, compare=False, repr=False)
    not_essay: bool = False  # the task asks for a non-essay product (rule 1)

    @property
    def decided(self) -> bool:
        return bool(self.allowed)


def _named_without_verb(text: str, view: str) -> NonEssayTask | None:
    """A request with no writing verb whose first clause ends in a non-essay product,
    outside quotation marks ("法真简介，200字左右"; not "你是一名新闻评论员，…")."""
    if any(rx.search(view) for rx in (_PRODUCT, _PRODUCT_END)):
        return None
    first = re.search(r"[^\s，。；！？,;!?\n][^，。；！？,;!?\n]*", view)
    if first is None:
        return None
    clause = list(view[: first.end()])
    for a, b in quotations(text, first.start(), first.end()):
        clause[a:b] = " " * (b - a)
    word = _NON_ESSAY_HEAD.search("".join(clause), first.start())
    if word is None:
        return None
    a, b = word.start(), len(word[0].rstrip()) + word.start()
    return NonEssayTask(f"{text[a:b]}, named without a writing verb", (a, b))


@dataclass(frozen=True)
class _Hit:
    genre: Genre
    word: str
    span: tuple[int, int]
    segment: Segment | None


def _explicit(text: str, scan: str, parts: PromptParts) -> tuple[list[_Hit], list[str], str]:
    """Non-negated genre words, the negated ones, and ``scan`` with all of them blanked."""
    hits: list[_Hit] = []
    negated: list[str] = []
    masked = scan
    for genre, rx in _EXPLICIT.items():
        for m in rx.finditer(scan):
            if (_NEGATED_BEFORE.search(scan[max(0, m.start() - 6): m.start()])
                    or _NEGATED_AFTER.match(scan, m.end())):
                negated.append(text[m.start():m.end()])
            else:
                hits.append(_Hit(genre, text[m.start():m.end()], m.span(),
                                 parts.segment_at(m.start())))
            # a genre word must not also count as a cue (议论文 holds 议论, 说明文 holds 说明)
            masked = masked[: m.start()] + " " * len(m[0]) + masked[m.end():]
    hits.sort(key=lambda h: h.span)
    return hits, negated, masked


def _cues(text: str, view: str) -> dict[Genre, list[tuple[str, tuple[int, int]]]]:
    found: dict[Genre, list[tuple[str, tuple[int, int]]]] = {}
    for genre, rxs in _CUE_RXS.items():
        for rx in rxs:
            if (hit := rx.search(view)) is not None:
                found.setdefault(genre, []).append((text[hit.start():hit.end()], hit.span()))
    return found


def _detail(cues: dict[Genre, list[tuple[str, tuple[int, int]]]]) -> str:
    ranked = sorted(cues.items(), key=lambda kv: -len(kv[1]))
    return "; ".join(f"{g.value}={len(c)} [{', '.join(w for w, _ in c)}]" for g, c in ranked)


def genre_by_rules(text: str) -> RuleGenre:
    parts = split_prompt(text)
    scan = matching_text(text)
    hits, negated, masked = _explicit(text, scan, parts)
    note = f"; ignored negated {', '.join(negated)}" if negated else ""
    strong_hits = [h for h in hits if h.segment in _STRONG]
    if len(hits) > len(strong_hits):
        note += "; ignored in the material " + ", ".join(
            h.word for h in hits if h.segment not in _STRONG)
    strong_view = parts.keep(_STRONG, masked)
    task_view = parts.keep({"task"}, scan)
    heads = [(m["np"].strip(), m.start("np"), m.end("np"))
             for rx in (_PRODUCT, _PRODUCT_END) for m in rx.finditer(task_view)]
    products = [(a, b) for np, a, b in heads if _NON_ESSAY_HEAD.search(np)]
    # 祭文 ends like an essay (…文) but names a non-essay: the non-essay reading wins
    essay_named = any(_ESSAY_HEAD.search(np) and not _NON_ESSAY_HEAD.search(np)
                      for np, _, _ in heads)
    exercise = _NON_WRITING_TASK.search(task_view)
    if exercise is not None and not essay_named:
        a, b = exercise.span()
        return RuleGenre(None, f"rule: undecided, the task asks for {text[a:b].strip()}, an "
                         f"exercise, not an essay{note}", span=(a, b), segment="task",
                         not_essay=True, parts=parts)
    if products and not essay_named:
        a, b = products[0]
        return RuleGenre(None, f"rule: undecided, the task asks for {text[a:b].strip()}, "
                         f"not an essay{note}", span=(a, b), segment="task", not_essay=True,
                         parts=parts)
    errand = _ERRAND.search(task_view)
    if errand is not None and not essay_named:
        a, b = errand.span()
        return RuleGenre(None, f"rule: undecided, the task asks for {text[a:b].strip()}, an "
                         f"errand (a leave request), not an essay{note}", span=(a, b),
                         segment="task", not_essay=True, parts=parts)
    other = non_essay_task(scan, task_view, parts.keep(_STRONG, scan))
    if other is None and not essay_named:
        other = _named_without_verb(text, parts.keep(_STRONG, scan))
    if other is not None:
        a, b = other.span
        return RuleGenre(None, f"rule: undecided, the task asks for {other.what} "
                         f"({text[a:b].strip()}), not an essay{note}", span=(a, b),
                         segment=parts.segment_at(a), not_essay=True, parts=parts)
    open_word = _OPEN_GENRE.search(strong_view)
    if open_word is not None:
        lean = _detail(_cues(text, strong_view))
        return RuleGenre(None, f"rule: open genre, {text[open_word.start():open_word.end()]}"
                         + (f" (cues: {lean})" if lean else "") + note,
                         (ANY_GENRE,), True, open_word.span(),
                         parts.segment_at(open_word.start()), parts)
    genres = list(dict.fromkeys(h.genre for h in strong_hits))
    if len(genres) == 1:
        first = strong_hits[0]
        return RuleGenre(first.genre, f"rule:{first.word}{note}", (first.genre.value,), False,
                         first.span, first.segment, parts)
    if genres:
        first_of = {h.genre: h for h in reversed(strong_hits)}
        listed = ", ".join(f"{first_of[g].word} ({g.value})" for g in genres)
        ordered = tuple(g.value for g in Genre if g in genres)
        return RuleGenre(None, f"rule: choice of genres {listed}{note}", ordered, False,
                         strong_hits[0].span, strong_hits[0].segment, parts)
    for m in _OPINION_TOPIC.finditer(strong_view):
        a, b = m.span("topic")
        strong_view = strong_view[:a] + " " * (b - a) + strong_view[b:]
    strong = _cues(text, strong_view)
    weak = _cues(text, parts.keep({"material"}, masked))
    weak_note = f"; material (weak, never decides alone): {_detail(weak)}" if weak else ""
    if not strong:
        return RuleGenre(None, f"rule: undecided, no genre word or cue{weak_note}{note}",
                         parts=parts)
    top = max(len(c) for c in strong.values())
    tied = [g for g, c in strong.items() if len(c) == top]
    detail = _detail(strong)
    if len(tied) > 1:
        return RuleGenre(None, f"rule: undecided, tied cues {detail}{weak_note}{note}",
                         parts=parts)
    winner = tied[0]
    if all(_TOPIC_RX.fullmatch(matching_text(word)) for word, _ in strong[winner]):
        return RuleGenre(None, f"rule: undecided, topic words only {detail} (a topic word "
                         f"names what the essay is about, not its genre){weak_note}{note}",
                         parts=parts)
    span = strong[winner][0][1]
    return RuleGenre(winner, f"rule cues: {detail}{weak_note}{note}", (winner.value,),
                     False, span, parts.segment_at(span[0]), parts)


# Words that say the task asks for an essay at all (issue 30): 作文, 文章, 写一篇…, an essay
# form, a body-length requirement, a title instruction. A labeller's genre is accepted only
# where the task or requirements hold one (classify).
ESSAY_TASK = re.compile(
    r"作文|文章|短文|(?:写|撰写|创作|完成)(?:一篇|篇)|议论文|记叙文|说明文|描写文|散文|随笔|杂文|"
    r"读后感|观后感|演讲稿|征文|(?:不少于|不低于|不超过|不多于|至少)\s*[\d一二三四五六七八九十百千]+\s*字|"
    r"[\d一二三四五六七八九十百千]+\s*字(?:左右|以上|以内)|字数|为题|(?:题目|标题)自拟|"
    r"自拟(?:题目|标题)|文体不限|体裁不限")
# A non-essay product named anywhere in a task (the evidence of a not_essay answer).
NON_ESSAY_WORD = re.compile(_NON_ESSAY_WORDS)


def rule_cues(text: str) -> list[tuple[str, tuple[int, int]]]:
    """Every word of ``text`` the rules read as a cue, with its span, in text order: genre
    words, open-genre phrases, genre cues, essay-task words and non-essay products."""
    view = matching_text(text)
    rxs = (*_EXPLICIT.values(), _OPEN_GENRE, *(r for rs in _CUE_RXS.values() for r in rs),
           ESSAY_TASK, NON_ESSAY_WORD)
    found = {(m.start(), m.end()) for rx in rxs for m in rx.finditer(view) if m.end() > m.start()}
    return [(text[a:b], (a, b)) for a, b in sorted(found)]


def genre_word_in(text: str) -> str | None:
    """The first genre word, open-genre phrase or genre cue ``text`` holds (议论文,
    文体不限, 经历 …), as written; None when it holds none."""
    view = matching_text(text)
    for rx in (*_EXPLICIT.values(), _OPEN_GENRE, *(r for rs in _CUE_RXS.values() for r in rs)):
        found = rx.search(view)
        if found is not None:
            return text[found.start():found.end()]
    return None
