"""Character n-gram Dice and character ROUGE-L, checked against independent computations
(a hand count of n-grams; rouge-chinese's ROUGE-L over space-separated characters)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rouge_chinese import Rouge

from essaybench.bench.signals.lexical import content_chars, ngram_dice, rouge_l

A = "春天来了，校园里的桃花开了。我们在树下读书，风吹过来，花瓣落在书页上。"
B = "秋天来了，校园里的桂花开了。同学们在树下读书，香气飘过来。"


def rouge_chinese_f(a: str, b: str) -> float:
    score = Rouge().get_scores(" ".join(content_chars(a)), " ".join(content_chars(b)))
    return float(score[0]["rouge-l"]["f"])


def test_rouge_l_agrees_with_rouge_chinese() -> None:
    for a, b in [(A, B), (B, A), (A, A[:10]), ("我爱北京天安门", "天安门上太阳升")]:
        assert rouge_l(a, b) == pytest.approx(rouge_chinese_f(a, b), abs=1e-6)


def test_ngram_dice_against_a_hand_count() -> None:
    # 今天天气好 / 今天天气坏: bigrams 今天 天天 天气 气好 | 今天 天天 天气 气坏 → 3 shared
    assert ngram_dice("今天天气好", "今天天气坏", 2) == pytest.approx(2 * 3 / 8)
    # repeated n-grams count as often as they occur in both (multisets)
    assert ngram_dice("哈哈哈", "哈哈", 2) == pytest.approx(2 * 1 / 3)
    assert ngram_dice("一", "一二三", 3) is None


def test_punctuation_and_spaces_do_not_move_the_figures() -> None:
    assert rouge_l("你好，世界！", "你好 世界") == 1.0
    assert ngram_dice("“你好”世界", "你好世界", 2) == 1.0
    assert rouge_l("", "你好") is None


@given(st.text(alphabet="天地人和春秋风雨，。ab1 ", max_size=40),
       st.text(alphabet="天地人和春秋风雨，。ab1 ", max_size=40))
def test_similarities_are_symmetric_bounded_and_one_on_identity(a: str, b: str) -> None:
    for f in (rouge_l, ngram_dice):
        ab, ba = f(a, b), f(b, a)
        assert ab == ba if ab is None else ab == pytest.approx(ba)
        if ab is not None:
            assert 0.0 <= ab <= 1.0
        same = f(a, a)
        assert same is None or same == pytest.approx(1.0)
