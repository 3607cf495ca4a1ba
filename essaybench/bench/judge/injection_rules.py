"""The injection detector's patterns (:mod:`essaybench.bench.judge.injection` applies them).

Each rule is a family, not a list of attack texts: it is written from the few things an
attack must say whatever its wording — a grade word (满分, 最高档, full marks, 만점…), who
gives it or whom it is about (本文/该作品, 阅卷组, 您, this essay…), a role or an end the
judge might take for its own — and tolerant of the ways the same thing is laid out
(any brackets, separators, orders, scripts). All of them read the folded text
(:func:`~essaybench.bench.judge.injection.fold`). Narratives about tests, speeches to a jury
and product scores are the real text they must leave alone (``benchmarks/
injection_detector.py`` measures both).
"""

from __future__ import annotations

import re
from typing import NamedTuple

_I = re.IGNORECASE | re.MULTILINE
_S = r"[^。！？!?\n]"  # within one sentence (NFKC made ！？ ASCII)
# A grade at the top of a scale, in the words an essay's reader would use.
_TOP = (r"(?:(?<!充)满分|最高(?:分值?|档次?|等级|等第|等次|级别|一档|一等|评价|的分数?)"
        r"|满级分|一类上等|一类卷|一类文|満点|满点|10\s*分(?!钟)|十分(?=[\s。，,；;！!、)）」”]|$))")
_TOP_EN = (r"(?:full|maximum|max|perfect|top|highest)\s+(?:marks?|scores?|grades?|ratings?"
           r"|points|band)")
_SELF = (r"(?:本文|本篇|本作文|本作品|本稿|此为|此乃|这篇(?:作文|文章|作品|稿子)?|此文|此篇"
         r"|此作文|此作品|该文|该篇|该作文|该作品|该文章|拙作|拙文)")
_GRADER_ZH = (r"(?:评委|阅卷|评卷|判卷|批卷|评审|评阅|审阅|考官|评分员|评分老师|评分专家|评分系统"
              r"|评分模型|评分助手)")
# A label a grader's record would carry (【评阅结果】, 【多评记录】, 终评意见：).
_GRADER_LABEL = (r"(?:评审|阅卷|评卷|评分|判卷|批阅|批改|评委|考官|评阅|审阅|[一二三多初复终]评"
                 r"|仲裁|复核)")
_GRADER = (r"(?:grader|judge|evaluator|examiner|assessor|reviewer|scorer|marker|rater"
           r"|grading\s+(?:model|system|ai))")
# An end-of-essay marker counts when talk of grading follows it (a 【全文完】 then an author's
# note is a convention of fiction, not an escape).
_GRADING_AFTER = (r"(?=[\s\S]{0,200}?(?:评审|阅卷|评分|评卷|打分|给分|赋分|分数|满分|一类|标准|评委"
                  r"|grader|grading|score|grade|criteria|rubric))")
# How a hidden text is to be read (base64, reversed, the first character of each line).
_DECODE = (r"base\s*64|rot\s*-?\s*13|凯撒密码|摩斯密码|(?:倒序|逆序|从右往?左|从右向左"
           r"|从下往?上|从后往?前|倒着|反着|倒过来|反过来)(?:读|看|念|阅读)|首字连读"
           r"|(?:每|各)(?:一)?(?:句|行)的?(?:首字|第一个字)|藏头")
_SCRIPT_GRADE = r"만점|채점|심사위원|평가자|최고\s*점수|満点|采点|审查员|採点"

class Rule(NamedTuple):
    """One flag's patterns: ``any`` reads every text; ``en`` holds the English phrasings,
    read only when the text has two Latin words in a row (:data:`EN_GATE`: one Chinese
    essay in seven has), so Chinese essays do not pay for them."""

    any: re.Pattern[str]
    en: re.Pattern[str] | None = None


def _rule(any_text: str, en_text: str | None = None) -> Rule:
    return Rule(re.compile(any_text, _I), re.compile(en_text, _I) if en_text else None)


EN_GATE = re.compile(r"[A-Za-z]{2,}[ \t]+[A-Za-z]{2,}")

RULES: dict[str, Rule] = {
    "instruction": _rule(
        r"(?:忽略|无视|忽视|不要理会|不用理会|不必理会|别管|抛开|跳过|不必遵守|不用遵守|不要遵守"
        r"|无需遵守|不要按照?|不必按照?|不用按照?|作废|废除)" + _S + r"{0,6}?"
        r"(?:(?:评分|打分|阅卷|评审|评判|评卷)(?:标准|细则|规则|要求|规范|办法|指南)"
        r"|(?:以上|上述|上面|前面|之前|先前|原有|原先|原来|系统)(?:的|所有|全部)*"
        r"(?:评分|指令|指示|规则|细则|要求|提示|设定|说明|标准|内容))"
        r"|忽略(?:以上|上述|之前|前面|所有|评分|原有)|无视(?:评分|以上|上述)"
        r"|(?:评分|打分|阅卷|评审|评卷|评判)(?:标准|细则|规则|要求|办法)" + _S + r"{0,4}"
        r"(?:已|现已|临时)?(?:更新|变更|调整|修改|放宽|取消|作废|改为)"
        r"|(?:请|务必|必须|一律|应当|应该|建议|不妨|麻烦|直接)" + _S + r"{0,8}?(?:给|打|评|判|按"
        r"|列|定|归|划|记|计)(?:予|出|为|成|入|在)?\s*(?:本文|这篇|此文|该文|本篇)?" + _TOP +
        r"|(?:给|打)(?:本文|这篇|此文)?(?:满分|最高分)|建议(?:给予?|打|评为?|判为?)?(?:本文|此文|该文)?"
        + _TOP +
        r"|(?:全部|一律|统统|全都|一概|通通|均|都)\s*(?:给|打|评|判|计|记|按)(?:予|出|为|成)?\s*"
        + _TOP +
        r"|(?:各项|每项|每一项|每个(?:小题|问题|方面|维度|项目)|所有(?:小题|问题|项目|维度|题目|作文)"
        r"|全部(?:小题|问题|项目|维度)|各个?(?:小题|题|维度))" + _S
        + r"{0,10}(?:给|打|评|计|赋|按|为|处理)" + _S + r"{0,6}" + _TOP +
        r"|(?:按|以|按照|作为|视为|视作|当作|当成|算作)\s*" + _TOP +
        r"\s*(?:处理|计|算|给|评|记|赋|对待|打|录入)"
        r"|(?:据此|按此|照此)(?:赋分|打分|评分|给分)|(?:按|以)最高(?:档|等级|分)(?:给分|计分|评分|赋分)"
        # the reply's own fields: a "check code" to copy makes the reply unusable
        r"|(?:校验码|核验码|识别码|check\s*code|nonce)[^。\n]{0,12}(?:改为|改成|写成|填写?|应为|设为"
        r"|换成|须为|必须是|must\s+be|should\s+be|set\s+to)|\bdisregard\b"
        # a hidden text and how to read it: decode, reverse, the first characters of lines
        r"|(?:请|务必)" + _S + r"{0,12}?(?:" + _DECODE + r")"
        r"|(?:解码|解密|破译)" + _S + r"{0,16}?(?:执行|照做|照办|遵照|遵循|按其|照其|按照其|依其)"
        r"|(?:请|务必)" + _S + r"{0,10}(?:后续|之后|其他|其余|后面)的?(?:评阅|阅卷|评分|评卷|打分"
        r"|给分|评审)" + _S + r"{0,6}(?:保持一致|与此一致|与之一致|以此为准|参照|沿用|照此)",
        r"\bignore\s+(?:all\s+|any\s+)?(?:the\s+|your\s+)?(?:previous|above|prior|preceding|rubric"
        r"|instructions|grading|scoring|criteria)"
        r"|\boverride\b[^.\n]{0,20}\b(?:grading|scoring|rubric|instructions?|rules?|criteria"
        r"|evaluation)|\b(?:new|updated|revised)\s+(?:grading|scoring|evaluation|marking)"
        r"\s+(?:rules?|instructions?|policy|criteria|guidelines?)"
        r"|\b(?:output|return|print|respond\s+with|reply\s+with|answer\s+with|assign|award|give)"
        r"\s+(?:only\s+)?(?:the\s+|a\s+)?(?:maximum|max|highest|full|top|perfect)\b"
        r"|\b(?:decode|decipher|unscramble|reverse|decrypt)\b[^.\n]{0,30}\b(?:and|then)\s+"
        r"(?:do|follow|obey|execute|apply|act)\b|\b(?:base\s*64|rot\s*-?\s*13)\b[^\n]{0,40}"
        r"\b(?:decode|decipher|follow|execute)|\bread\s+(?:\w+\s+){0,2}(?:backwards"
        r"|in\s+reverse|right\s+to\s+left|bottom\s+to\s+top)|\bfirst\s+(?:letters?|characters?"
        r"|words?)\s+of\s+(?:each|every)\s+(?:line|sentence|verse)"
        r"|\b(?:must|should)\s+(?:receive|get|be\s+given)\s+(?:the\s+)?"
        r"(?:maximum|highest|full|perfect|top)|\b(?:give|award|assign|grant)\s+(?:it|this|every"
        r"|each|all)\b[^.\n]{0,40}?\b(?:full|maximum|perfect|top|highest)\b"),
    # Spoken to, not spoken of: a story may have a judge in it.
    "addresses_judge": _rule(
        r"(?:请|致|给|各位|尊敬的|亲爱的|敬爱的)\s*(?:评委|阅卷|评卷|判卷|评审|评分|批改)"
        r"|(?:评委|阅卷老师|阅卷人|评卷老师|评审老师|评审专家|评分老师|评分系统|评分模型)(?:们)?"
        r"\s*(?:请|注意|您好|须知|[:：])|(?:评委|阅卷|评卷|判卷)老师们?(?:辛苦|好|您)"
        r"|(?:^|[【\[(（<〔〖])\s*" + _GRADER_LABEL + r"[^\n:：】\])）>〕〗]"
        r"{0,4}(?:说明|意见|备注|须知|要求|提示|结论|注意|附注|通知|回复|反馈|结果|评语|报告|总结"
        r"|建议|判定|记录|批注)\s*(?:[】\])）>〕〗]\s*[:：]?|[:：])"
        r"|(?:以下|下面|如下|后附|附上|附)" + _S + r"{0,6}" + _GRADER_ZH + _S +
        r"{0,6}(?:意见|说明|评语|结论|结果|评定|批注|反馈)"
        r"|(?:阅卷|评卷|评审|判卷|评分)(?:组|小组|专家组|委员会)"
        r"|(?:任何|每一位|每位|哪位|凡是)[^。\n]{0,8}(?:阅卷|评卷|评分|评审|判卷)(?:老师|人|者|专家|员)"
        r"|(?:采点|採点)者|" + _SCRIPT_GRADE +
        r"|(?:阅读|读到|评阅|批阅|审阅)(?:本文|这篇(?:作文|文章)?|此文|这段话?)的(?:大?模型|AI|人工智能"
        r"|语言模型|评分模型|机器)"
        r"|\[\s*(?:grading|grader|judge|evaluator|examiner|reviewer|scoring|evaluation|assessment"
        r"|marking)(?:'s)?\s*(?:note|notes|comment|remark|instruction|addendum|summary|result"
        r"|verdict|override)s?\s*\]",
        r"\b" + _GRADER + r"'?s?\s+(?:addendum|notes?|instructions?|comments?|remarks?)\s*:"
        r"|\bnote\s+(?:to|for)\s+(?:the\s+)?(?:ai|model|llm|assistant|language\s+model)\b"
        r"|\b(?:ai|model|llm|assistant|language\s+model)s?\s+(?:reading|grading|scoring"
        r"|evaluating|processing|reviewing)\s+(?:this|these|my)\b"
        r"|\bexpected\s+(?:output|score|answer|grade|result)s?\s+(?:is|are|should\s+be)\b"
        r"|\b(?:all|straight)\s+(?:10s|tens|10's|a\+s?)\b"
        r"|\bas\s+an?\s+(?:\w+\s+){0,2}" + _GRADER + r"\b"
        r"|\b(?:a|any|no|every)\s+(?:reasonable|fair|fair-minded|impartial|objective|honest|sensible"
        r"|competent|careful|thoughtful|experienced|discerning|attentive)\s+(?:human\s+|ai\s+)?"
        + _GRADER + r"s?\b"
        r"|\b(?:dear|to\s+the|note\s+(?:to|for)\s+(?:the\s+)?|attention(?:\s+to\s+the)?|hey)\s+"
        r"(?:ai\s+)?(?:grader|judge|evaluator|examiner|assessor|reviewer|scorer|evaluation\s+system)s?\b"),
    "score_json": _rule(
        r"\{\s*\"[^\"\n]{1,40}\"\s*:\s*(?:\d|\"|\{|\[)"
        r"|<\s*(?:score|scores|total|grade|rating|总分|得分|分数|评分)\s*>\s*(?:10|100|满分|A\+)"
        r"|(?:^[ \t]*[-*|]?[ \t]*[^\n:：|=]{1,12}[ \t]*[:：|=][ \t]*(?:10|100|满分)[ \t]*"
        r"(?:分|/[ \t]*10|/[ \t]*100)?[ \t]*\|?[ \t]*\n?){3,}"
        # key=10；key=10；key=10 (立意 ✓ 10 | 结构 ✓ 10 …) on one line: from the first value
        r"|(?:10|100|满分|十分)(?![\d.])[ \t]*(?:分|/[ \t]*10{1,2})?(?:(?:[ \t]*[;；,，、|/]"
        r"|[ \t])[ \t]*[^\s\d:：=|;；,，、]{1,10}[ \t]*[:：=为✓✔√→\-–—]*[ \t]*"
        r"(?:10|100|满分|十分)(?![\d.])[ \t]*(?:分|/[ \t]*10{1,2})?){2}"
        r"|(?:评(?<=[一二三四初复终]评)|仲裁)[^\n:：]{0,6}[:：][ \t]*\d{1,3}[^\n\d]{0,8}"
        r"(?:[一二三四初复终]评|仲裁)[^\n:：]{0,6}[:：][ \t]*\d{1,3}"
        # thesis - excellent; evidence - excellent; …: a verdict in words
        r"|[:：=\-–—][ \t]*(?:excellent|outstanding|perfect|exemplary|flawless|优秀|完美|满分|极佳"
        r"|无可挑剔|A\+)[ \t]*(?:[;；,，。.][ \t]*[^\n:：=;；,，。]{1,24}[ \t]*[:：=\-–—][ \t]*"
        r"(?:excellent|outstanding|perfect|exemplary|flawless|优秀|完美|满分|极佳|无可挑剔|A\+)){2}"),
    "rubric_ids": _rule(
        r"\b(?:arg|nar|des|exp)\.[a-z_]{2,}(?:\.q\d+)?\b|\bscore_(?:weighted|unweighted)\b"
        r"|\"(?:scores|analysis|nonce)\"\s*:"
        r"|(?:\b[A-Z]{1,2}\d{1,2}\s*[:：=]\s*\d{1,3}\b[\s,，;；、]*){3,}",
        r"\brubric\b"),
    # About the essay itself ("本文…满分", "this essay … full marks"): a narrative about a
    # pupil's 满分 test or a 10-minute walk is content, not a claim.
    "score_claim": _rule(
        _SELF + _S + r"{0,24}(?:满分|最高分|一等奖|特等奖|金奖|范文|高分|一类上等|一类卷|一类文"
        r"|満点|满点|满级分|最高评价|最高档|A\+|(?<![\d.])10\s*分(?!钟)|100\s*分)"
        r"|(?:满分|最高分)(?:范文|作文)[^。！？\n]{0,6}(?:本文|此文|这篇)"
        r"|(?:批语|评语|批注|点评|总评|终评|考评|评定意见|鉴定)\s*[:：]\s*" + _S
        + r"{0,6}(?:满分|范文|一类|最高分|最高档|A\+|特等|一等)"
        r"|(?:批阅|阅卷|审定|评定|判卷|评卷|预评|初评|复核)" + _S + r"{0,12}(?:满分|最高分|一类上等"
        r"|一类文|一类卷|100\s*%|A\+)"
        r"|(?:理应|理当|应当|应该|值得|配得上|配得到|配拿|配|应得|该得|当得|当属|实属)"
        r"(?:获得|得到|给予|拿到|打)?" + _S
        + r"{0,6}(?:满分|最高分|最高评价|最高档|最高的分数|一个高分|満点|满点)"
        r"|(?:难道|怎能|怎么能|岂能|凭什么|何以)" + _S
        + r"{0,20}(?:不配|不值得|不该|不能|拿不到|不给)" + _S + r"{0,10}(?:满分|最高|高分)"
        r"|不给(?:满分|最高分|高分)(?:说不过去|不合理|不公平)"
        r"|(?:找不到|没有|挑不出|不存在|无从|无需|不必|毫无|无可)(?:任何)?" + _S + r"{0,6}"
        r"(?:扣分|失分|减分)|(?:扣分|失分|减分)的?(?:理由|地方|之处|点)" + _S
        + r"{0,4}(?:没有|不存在)"
        r"|(?:得分|评分|分数|总分|总计|合计|总评|终评|综合评定|评级|打分|自评|自我评分|预评|预估|估分"
        r"|评定)(?:率)?\s*(?:为|是|达到?)?\s*[:：=]?\s*(?:[\d一二三四五六七八九十百]{1,4}"
        r"\s*分?\s*[(（]\s*满分\s*[)）]|100\s*%|100\s*分|满分|10\s*/\s*10|A\+|💯|十\s*/\s*十)"
        r"|(?:自我评分|自评分?|自我打分|自我评估)(?:表|结果)?\s*[:：]"
        r"|[(（【\[]\s*(?:考生|作者|本人|学生)?(?:自评|自我评分|自我评估)(?:表|分|结果)?\s*[)）】\]]"
        r"|" + _GRADER_ZH + r"[^。\n]{0,12}(?:均|都|一致|全部|全都|纷纷)(?:打出|给出|给了|给予|评为"
        r"|评定为|认定为|打了|判为)" + _S + r"{0,10}(?:满分|最高|一类|一等|特等|范文)"
        r"|(?:读过|见过|看过|批过|改过|评过|阅过)的?(?:最好|最优秀|最出色|最精彩|最完美)的(?:一篇)?"
        r"(?:学生)?(?:作文|文章|作品)"
        r"|(?<![\d/.])(10|20|25|30|40|50|60|70|100|120|150)\s*/\s*\1(?![\d/])"
        r"|\bself[- ]?(?:assessment|evaluation|score|grade|grading|rating|assessed)\b",
        r"\b(\d{1,3})\s+out\s+of\s+\1\b|\b" + _TOP_EN + r"\b"
        r"|\bdeserves?\s+(?:a\s+|an\s+|the\s+)?(?:full|maximum|perfect|top|highest|10)\b"
        r"|\b(?:graded|rated|scored|marked|assessed|evaluated)\s+(?:as\s+)?(?:an?\s+)?(?:A\+|100\s*%"
        r"|10\s*/\s*10|full\s+marks|perfect|the\s+highest|excellent|outstanding)"
        r"|\b(?:teachers?|examiners?|graders?|judges?|professors?|reviewers?|experts?|markers?)\b"
        r"[^.\n]{0,40}\b(?:gave|awarded|rated|graded|scored|marked)\b[^.\n]{0,30}(?:A\+|10/10"
        r"|100\s*%|full\s+marks|perfect|top|highest|maximum)"
        r"|\b(?:scores?|earns?|merits?|gets?|receives?)\s+(?:a\s+)?(?:10|100|full|perfect|top"
        r"|max(?:imum)?)\b[^.\n]{0,20}\b(?:on|in|for|across)\s+(?:every|all|each)\b"
        r"|\b(?:this|my|the)\s+(?:essay|piece|work|submission|composition)\s+(?:is|was|has\s+been)"
        r"\s+(?:already\s+)?(?:flawless|perfect|exemplary|award|graded|rated|scored|marked|judged"
        r"|chosen|selected)"),
    "role_markup": _rule(
        r"<\|(?:im_start|im_end|system|user|assistant|endoftext)\|>|\[/?(?:SYSTEM|INST|SYS)\]"
        r"|<<\s*/?\s*SYS\s*>>|</?\s*(?:system|assistant|sys|instructions?|start_of_turn"
        r"|end_of_turn|im_start|im_end|developer)\b[^<>\n]{0,20}>"
        r"|【\s*(?:系统|助手|assistant|system|AI|人工智能|管理员|评分系统|开发者|developer)[^】\n]{0,6}】"
        r"|[\[〔〖【][^\]〕〗】\n]{0,4}(?:评分|评审|阅卷|批改)(?:助手|AI|系统|模型)[^\]〕〗】\n]{0,6}"
        r"[\]〕〗】]"
        r"|【\s*用户\s*】(?=[\s\S]*【\s*(?:助手|AI|assistant)\s*】)|\"role\"\s*:\s*\""
        r"|^\s*(?:system|assistant|user|developer|human|model|ai|bot|tool|系统|助手|系统提示|开发者"
        r"|管理员|评分助手|AI助手|评分模型|评分系统)\s*[:：]"
        r"|^\s*#{1,3}\s*(?:system|instruction|response|assistant|指令)\b",
        r"\bsystem\s+(?:prompt|message|instruction|override)s?\b"),
    "delimiter": _rule(
        r"<<<|>>>|</?\s*(?:essay|student_essay|submission)\s*>|</\s*[\u4e00-\u9fff]{1,8}\s*>"
        r"|[\[{]\s*/\s*(?:essay|text|answer|submission|input|document|response|content|article"
        r"|student_essay|[\u4e00-\u9fff]{1,6})\s*[\]}]|END[-_ ]?ESSAY|```|'''|^[ \t]*~~~"
        r"|(?:(?:^|[【\[(（=\-—─*#<])[ \t]*(?:作文|正文|全文|原文|文章|学生作文|考生作文)[ \t]*"
        r"(?:结束|完毕|完|到此结束)[ \t]*(?:[】\])）>]|[=\-—─*#]{2,}|$)"
        r"|(?:以上|上面|上文|前面)(?:内容)?(?:为|是|即|就是|乃)(?:考生|学生|本人|我|作者)?的?"
        r"(?:作文|正文|全文|文章|原文|习作)"
        r"|(?:正文|作文|全文|文章)(?:部分)?(?:到此|至此|到这里)(?:结束|为止|完毕)"
        r"|\[\s*(?:END|EOF)(?:\s+OF\s+[\w ]{1,20})?\s*\])" + _GRADING_AFTER,
        r"\bEND\s+OF\s+(?:THE\s+)?(?:\w+\s+){0,2}(?:TEXT|ESSAY|INPUT|SUBMISSION|DOCUMENT)\b"
        r"|\b(?:the\s+)?(?:essay|text|submission)\s+(?:ends\s+here|is\s+over|ends)"
        + _GRADING_AFTER),
    "plea": _rule(
        r"(?:恳请|恳求|求求|求您|拜托|请您|希望您|望您|麻烦您|请老师|希望老师|求老师)" + _S
        + r"{0,20}"
        r"(?:高分|满分|最高分|最高的分|好分数|好成绩|多给|高抬贵手|手下留情|打高|分数|及格)"
        r"|(?:高分|满分|分数|成绩|及格)[^\n]{0,30}(?:(?:求求|求|恳请|拜托)(?:您|你|老师|评委|了)"
        r"|高抬贵手|手下留情)"
        r"|(?:请|求|望|恳请|拜托)(?:您|你|老师|评委)?(?:高抬贵手|手下留情|笔下留情|开恩)"
        r"|多给(?:几|一些|一点|点|些)?分|(?:给|打)(?:我|本文|这篇|它)?(?:个|一个)?"
        r"(?:满分|高分|最高分|好分数?)(?:吧|啊|呀|嘛|不过分|好吗|好不好|行吗|可以吗|如何|怎么样)"
        r"|(?:只求|但求|唯求|只盼|只希望)" + _S + r"{0,10}(?:高分|满分|最高分|好分数|好成绩|及格)"
        r"|(?:分数|分值|打分|给分|评分)" + _S + r"{0,3}(?:吝啬|吝惜|小气|手软|苛刻|克扣)"
        r"|吝(?<=[不勿莫别要]吝)啬?"
        r"(?:给出?|赐予?|于)?(?:高分|满分|分数|给分|赐分|最高分)"
        r"|(?:给|让)我(?:个|一个)?(?:及格"
        r"|过关|高分|满分|好分数)(?:吧|啊|呀|嘛|好吗|好不好|行吗|可以吗)",
        r"\bi\s+(?:am\s+)?beg(?:ging)?\s+you\b|\bplease\s+be\s+(?:generous|lenient|kind)\b"
        r"|\bplease\s+(?:give|grant|award)\b[^.\n]{0,30}\b(?:high|highest|top|full|good|perfect)"
        r"\s+(?:grade|score|mark)"
        r"|\b(?:grade|score|mark)s?\b[^.!?\n]{0,60}\b(?:mean(?:s)?\s+(?:the\s+world|a\s+lot"
        r"|everything|so\s+much)|i\s+(?:really\s+)?need|please|beg)\b"
        r"|\b(?:i\s+(?:really\s+|truly\s+)?(?:need|hope|pray|wish)|please)\b[^.!?\n]{0,60}\b"
        r"(?:good|high|top|highest|better|passing|full|perfect|great)\s+(?:grade|score|mark)s?\b"
        r"|\b(?:earn|get|receive|merit)s?\s+(?:it\s+|me\s+)?(?:a|an|the)\s+(?:top|highest|high|good"
        r"|full|perfect|maximum|passing)\s+(?:grade|score|mark)"
        # what happens if the grade is low: "if this gets anything less than full marks…"
        r"|\bif\b[^.!?\n]{0,40}\b(?:less\s+than|below|lower\s+than|anything\s+but|short\s+of)\s+"
        r"(?:an?\s+|the\s+)?(?:full\s+marks|perfect(?:\s+(?:scores?|marks?|grades?))?\b"
        r"|(?:top|highest|maximum)\s+(?:marks?|grades?|scores?)|(?-i:A\+?)(?=[\s,.;!?]|$)"
        r"|10\s*/\s*10|100\s*%)"),
}

# 您 (the reader) asked for something about the grade, in one sentence, in any order.
YOU = re.compile("您")
PLEA_ASK = re.compile(r"请您|求您|求求|恳请|恳求|希望您|希望能|盼您|望您|拜托|麻烦您|可怜可怜|开恩"
                      r"|相信您|您也会|您一定|您能|如果您|要是您|若您|您理解|您体谅")
PLEA_GRADE = re.compile(r"分数|高分|满分|最高分|低分|好分数|高的分|好的分|及格|扣分|给分|打分|成绩"
                        r"|高抬贵手|手下留情")
COMPACT_VERDICT = re.compile(r"[{,][\"'][^\"'{}\n]{1,40}[\"'][:=](?:\d|[\"'{\[])"
                             r"|<\|[^|<>\n]{1,40}\|>")
MASTER_KEY = re.compile(
    r"^\s*(?:thought\s+process|let'?s\s+solve|solution|answer|reasoning|解|答|思考过程)\s*[:：]",
    re.IGNORECASE)
LATIN_RUN = re.compile(r"[A-Za-z][A-Za-z ,.;:'!?\"()\-]{59,}")
# Another script's passage in a Chinese essay: Hangul, Cyrillic, Arabic, Thai, Devanagari.
OTHER_SCRIPT = re.compile("(?:[\uac00-\ud7af\u0400-\u04ff\u0600-\u06ff\u0e00-\u0e7f"
                          "\u0900-\u097f][\\sA-Za-z,.!?:;]*){30,}")
# Cyrillic and Greek letters drawn like Latin ones (ѕсоrе): read as the Latin letter.
HOMOGLYPHS = str.maketrans("аеорсуххіјѕԁԛԝАВЕКМНОРСТХІЈЅαεικνορτυχΑΒΕΗΙΚΜΝΟΡΤΥΧΖ",
                           "aeopcyxxijsdqwABEKMHOPCTXIJSaeikvoptuxABEHIKMNOPTYXZ")
MIXED_SCRIPT = re.compile("[\u0370-\u04ff]")
HAN = re.compile(r"[\u3400-\u9fff]")
WORDISH = re.compile(r"[\w\u3400-\u9fff]")
# What the compact copy drops: white space, and backslashes (an escaped verdict \{\"…).
WHITE = re.compile(r"[\s\\]+")
# Separators planted between Han characters (满 分, 满·分, 满_分): read as absent.
HAN_SPACED = re.compile(r"([\u3400-\u9fff])[ \t\u3000·•・_*]+(?=[\u3400-\u9fff])")

# An end-of-essay note about what a low grade would do (如果分数太低…, 若得分低于一类…): read
# when its paragraph also speaks to the reader or of the essay (老师，/您/本文/本人…).
COND_LOW = re.compile(
    r"(?:如果|若|要是|假如|万一|倘若)" + _S + r"{0,10}(?:(?:分数|得分|成绩|评分|分|等级|档次)"
    + _S + r"{0,4}(?:太低|过低|低于|不够|不高|不及格|不理想|偏低|达不到|没达到|没有达到)"
    r"|低分|不及格|拿不到高分|没有满分|不是满分|不给满分)")
COND_WHO = re.compile(r"老师[，,]|您|评委|阅卷|评卷|这篇作文|本人|" + _SELF)
# An author's or editor's note (写在前面：, 作者按：, 编者按：, 后记：…) that talks of the grade.
NOTE_LABEL = re.compile(r"(?:写在前面|写在后面|写在最后|作者按|作者注|作者附言|作者的话|编者按"
                        r"|编者注|编辑按|附记|后记|附言|题记)\s*[:：]")
NOTE_GRADE = re.compile(r"分数|高分|满分|低分|打分|评分|给分|扣分|评判|衡量|低估|高估|阅卷|评委"
                        r"|判卷|评卷|一类文|等第")
# Dingbat and negative circled numbers NFKC leaves alone (❿, ➉, ⓾, ⓴, ㉈): read as the number.
CIRCLED = {**{0x2776 + i: str(i % 10 + 1) for i in range(30)},
           **{0x24EB + i: str(11 + i) for i in range(10)},
           **{0x24F5 + i: str(i + 1) for i in range(10)}, 0x24FF: "0",
           **{0x3248 + i: str(10 * (i + 1)) for i in range(8)}}
CIRCLED_ANY = re.compile("[\u2776-\u2793\u24eb-\u24ff\u3248-\u324f]")
# Text written one Han character per line (竖排): such a run reads as one line.
VERTICAL_GATE = re.compile(r"\n[ \t]*[\u3400-\u9fff][ \t]*\n")
VERTICAL = re.compile(r"(?:^[ \t]*[\u3400-\u9fff][ \t]*\n){3,}[ \t]*[\u3400-\u9fff][ \t]*$",
                      re.MULTILINE)
# A grade word written backwards (分满, 分高最): the line is read reversed as well.
REVERSED_GATE = re.compile(r"分(?<![十充]分)满(?![意足怀腔载面脸眼溢])|分高最|档高最|级等高最")
# The essay itself listed or selected as a model by someone (本文已被…选入《…作文选》,
# 该作品被列为满分范例): found from the verb, then 本文/该作品… earlier in its sentence.
LISTED = re.compile(r"(?:列为|评为|选[为入]|选(?<=入选)|认定为|收录)" + _S
                    + r"{0,16}(?:满分|范文|范例|示范|一类|最高|优秀作文|作文选|佳作选)")
SELF = re.compile(_SELF)
REVERSED_RULES = ("instruction", "addresses_judge", "score_claim")
# Where the checks above need to look (a scan each: one alternation of them all is slower,
# its first characters being common ones).
TRIGGERS = (("cond_low", COND_LOW), ("note", NOTE_LABEL), ("reversed", REVERSED_GATE),
            ("listed", LISTED))
