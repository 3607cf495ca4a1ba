"""Character-level similarity of two Chinese texts: n-gram overlap and ROUGE-L.

Chinese has no spaces, so both measures read characters. The texts are first reduced to
their content characters (ideographs, letters, digits; punctuation and whitespace drop),
so a change of quotation marks or line breaks does not move the figures.

* :func:`ngram_dice` — the Dice coefficient of the two multisets of character n-grams
  (``2·|A∩B| / (|A|+|B|)``, 0 … 1);
* :func:`rouge_l` — ROUGE-L F1 over characters: the longest common subsequence (rapidfuzz's
  bit-parallel ``LCSseq``) over both lengths, harmonic mean of precision and recall.
"""

from __future__ import annotations

import unicodedata
from collections import Counter

from rapidfuzz.distance import LCSseq


def content_chars(text: str) -> str:
    """``text`` (NFKC: full-width letters and digits as ASCII) without punctuation,
    symbols and whitespace; letters lower-cased."""
    norm = unicodedata.normalize("NFKC", text)
    return "".join(c.lower() for c in norm if unicodedata.category(c)[0] in ("L", "N"))


def char_ngrams(text: str, n: int) -> Counter[str]:
    """The multiset of ``n``-character windows of ``text``'s content characters."""
    chars = content_chars(text)
    return Counter(chars[i:i + n] for i in range(len(chars) - n + 1))


def ngram_dice(a: str, b: str, n: int = 3) -> float | None:
    """Dice coefficient of the character ``n``-gram multisets (None: a text too short to
    have one n-gram)."""
    ga, gb = char_ngrams(a, n), char_ngrams(b, n)
    total = sum(ga.values()) + sum(gb.values())
    if not ga or not gb:
        return None
    return 2 * sum((ga & gb).values()) / total


def rouge_l(a: str, b: str) -> float | None:
    """Character ROUGE-L F1 of ``a`` and ``b`` (symmetric; None: an empty text)."""
    ca, cb = content_chars(a), content_chars(b)
    if not ca or not cb:
        return None
    lcs = LCSseq.similarity(ca, cb)
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(cb), lcs / len(ca)
    return 2 * precision * recall / (precision + recall)
