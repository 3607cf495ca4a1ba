"""The fake server's token rule, against its original per-character definition."""

from __future__ import annotations

import math
import random
import re

from essaybench.llm.fake.protocol import count_tokens, cut_to_tokens

# count_tokens as first written: one match (and one string) per CJK character.
_CJK_CHAR = re.compile("[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
                       "\U00020000-\U0002ffff]")


def _per_character(text: str) -> int:
    cjk = len(_CJK_CHAR.findall(text))
    return math.ceil(cjk / 1.6) + math.ceil((len(text) - cjk) / 4)


# Each range's first and last character and its neighbours outside, plus ordinary text.
_EDGES = [chr(c) for lo, hi in ((0x3000, 0x303F), (0x3400, 0x4DBF), (0x4E00, 0x9FFF),
                                (0xF900, 0xFAFF), (0xFF00, 0xFFEF), (0x20000, 0x2FFFF))
          for c in (lo - 1, lo, hi, hi + 1)]
_ALPHABET = [*_EDGES, *"秋天的落叶，金黄色。「」abc XYZ 123\n\t-.", "𠀀", "𪚥", "😀", "é", "\u0301"]


def test_count_tokens_matches_the_per_character_definition() -> None:
    texts = ["", " ", "你好", "秋天 autumn", "abcdefghi", "𠀀𪚥𫝀", "😀😀", "，。！？",
             "秋天的落叶，金黄色。" * 300, "a秋" * 500, "\uffef\ufff0" * 10, *_EDGES]
    rng = random.Random(0)
    texts += ["".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 60)))
              for _ in range(3000)]
    for text in texts:
        assert count_tokens(text) == _per_character(text), repr(text)


def test_cut_to_tokens_keeps_the_longest_prefix_within_the_limit() -> None:
    text = "秋天的落叶 autumn leaves，金黄色𠀀。" * 5
    for limit in (1, 3, 10, 40):
        cut = cut_to_tokens(text, limit)
        assert text.startswith(cut) and _per_character(cut) <= limit
        assert _per_character(text[: len(cut) + 1]) > limit
