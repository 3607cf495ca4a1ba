"""What a length is the length of: the essay's body, its title, a summary, or something else.

A prompt can state several lengths for different things: 题目不超过10个字，正文不少于
800字; 不少于800字，并附50字以内的摘要; a 200–300字 essay and a 10到20个字 slogan.
Combining them into one range gave (800, 10) and (800, 50). Each length gets a target:

- **named** (``length_target``): the noun right after the length (50字以内的摘要,
  800字的作文, 五十字以内概括) or the noun it qualifies just before it (题目不超过10个字,
  正文字数不少于800, 每条10个字). After beats before: it is the closer reading of
  "N字的X". Unknown nouns name nothing.
- **unnamed** (``assign_targets``): a length that names no target is a body length
  (that is how a bare 不少于800字 reads) unless it contradicts the body lengths already
  known — lengths that name the body first, then unnamed ones in text order — in which
  case it must be about something else (``other``): 写200-300字 … 10到20个字 keeps
  200–300 as the body.
"""

from __future__ import annotations

import dataclasses
import re

from essaybench.constraints.model import Constraint, LengthTarget
from essaybench.constraints.requirement import LengthRequirement

# Longer nouns first inside each group does not matter (the search is anchored), but a
# noun of one group containing another's (副标题 ⊃ 标题) needs the longer one listed:
# the leftmost match wins.
_NOUNS: dict[LengthTarget, str] = {
    "title": "题目|标题|文题|题名",
    "summary": "内容摘要|摘要|内容提要|提要|概要|简介|导语|梗概|小结|概括|总结|简述|按语",
    "other": ("副标题|小标题|题记|后记|开头|结尾|口号|标语|宣传语|广告语|广告词|评语|评价|短评|点评"
              "|批注|留言|寄语|赠言|感言|颁奖词|推荐语|祝福语|对联|一句话|关键词"
              # a poem, but not 诗歌鉴赏 (an essay)
              r"|(?:小|短|现代)?诗(?:歌)?(?=[，。；！？、\s]|$)"
              "|签名|回复|弹幕|每一?(?:条|句|首|则|个|段|小节|部分)"),
    "body": ("正文|全文|文章|作文|短文|议论文|记叙文|说明文|描写文|散文|随笔|日记|周记|读后感"
             "|观后感|演讲稿|发言稿|书信|信(?![息心念任号])|征文|每一?篇"),
}
_GROUPS = "|".join(f"(?P<{t}>{nouns})" for t, nouns in _NOUNS.items())
# 题目不超过10个字 (the qualifier is already inside the length's span), 正文字数在800以上,
# 摘要要求控制在50字以内, 每条10个字
_BEFORE = re.compile(rf"(?:{_GROUPS})的?(?:字数|长度|篇幅)?(?:要求)?"
                     r"(?:要|应|应该|须|需|需要|必须|请|最好|尽量|一般|都|均)?"
                     r"(?:控制|限制|保持)?(?:在|为|是|：|:)?\s*$")
# 50字以内的摘要, 800字作文, 五十字以内概括 (以内 is already inside the span)
_AFTER = re.compile(rf"\s*(?:的|之)?\s*(?:{_GROUPS})")
_WINDOW = 16
_TARGET_OF: dict[str, LengthTarget] = {t: t for t in _NOUNS}


def length_target(text: str, span: tuple[int, int]) -> LengthTarget | None:
    """The target a length at ``span`` names, or None if it names none."""
    after = _AFTER.match(text, span[1])
    if after and after.lastgroup:
        return _TARGET_OF[after.lastgroup]
    before = _BEFORE.search(text[max(0, span[0] - _WINDOW):span[0]])
    if before and before.lastgroup:
        return _TARGET_OF[before.lastgroup]
    return None


def assign_targets(found: list[Constraint]) -> list[Constraint]:
    """``found`` with every unnamed length given a target (see the module doc)."""
    named_body = [c for c in found if c.kind == "length" and c.target == "body"]
    body = LengthRequirement(None, None, None, ())
    for c in named_body:
        if body.admits(c):
            body = body.plus(c)
    out = []
    for c in found:
        if c.kind == "length" and c.target is None:
            fits = body.admits(c)
            if fits:
                body = body.plus(c)
            c = dataclasses.replace(c, target="body" if fits else "other")
        out.append(c)
    return out
