"""jieba segmentation, and the token sequence rouge-chinese scores.

rouge-chinese does no segmentation: it splits on whitespace, so the ROUGE-L
reference for a prompt is ``Rouge().get_scores(hyp, ref)`` on jieba-segmented,
space-joined text. This module fixes *which* string that is and reproduces,
token for token, the sequence rouge-chinese builds from it, so that a fast LCS
over our tokens gives the reference's numbers bit for bit.

The string passed to rouge-chinese (:func:`rouge_string`) is the jieba tokens
(``jieba.lcut``, HMM on, precise mode) that are not whitespace, joined by one
space. Whitespace in the text is a separator, never a token: jieba emits each
whitespace character (and ``"\\r\\n"``) as its own token, and passing those
through would let rouge-chinese's sentence cutter create phantom empty tokens
(``"。 \\n 下"`` is cut after ``。``, leaving a sentence made of one space that
becomes the token ``""``).

What rouge-chinese then does to that string (rouge_chinese 1.0.3,
``Rouge._get_scores`` and ``rouge_l_summary_level``), reproduced by
:func:`rouge_view`:

1. ``cut_sent`` inserts a newline after ``。！？?`` (unless a closing quote
   follows), after six dots, after ``……`` and after ``。”``-like pairs, strips
   trailing whitespace and splits on newlines;
2. each non-empty sentence is whitespace-normalised (``" ".join(s.split())``);
3. "summary-level" ROUGE-L then concatenates the sentences' ``split(" ")``
   tokens and takes one LCS over the whole sequences (no union-LCS per
   sentence), with repeated tokens counted (a list, not a set).

Step 1 can split one of our tokens: jieba keeps a run of seven or more dots as
one token, and the cutter breaks it after the sixth dot. Hence the scored
tokens are ``rouge_view(rouge_string(text))``, not the jieba tokens themselves.
"""

from __future__ import annotations

import logging
import re
import threading

import jieba

_init_lock = threading.Lock()
_initialised = False

# rouge-chinese's sentence cutter, applied in the same order (each pass sees
# the newlines inserted by the previous ones).
_SENTENCE_CUTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile("([。！？?])([^”’])"), "\\1\n\\2"),
    (re.compile("(\\.{6})([^”’])"), "\\1\n\\2"),
    (re.compile("(…{2})([^”’])"), "\\1\n\\2"),
    (re.compile("([。！？?][”’])([^，。！？?])"), "\\1\n\\2"),
)


def init_jieba() -> None:
    """Load jieba's dictionary once per process, quietly."""
    global _initialised
    with _init_lock:
        if not _initialised:
            jieba.setLogLevel(logging.WARNING)
            jieba.initialize()
            _initialised = True


def jieba_words(text: str) -> list[str]:
    """jieba tokens of ``text`` that are not whitespace."""
    init_jieba()
    return _words(jieba.lcut(text))


def _words(cut: list[str]) -> list[str]:
    return [w for w in cut if w and not w.isspace()]


def rouge_string(text: str) -> str:
    """The segmented string whose rouge-chinese score we reproduce."""
    return " ".join(jieba_words(text))


def rouge_view(segmented: str) -> list[str]:
    """The token sequence rouge-chinese's ROUGE-L compares for ``segmented``.

    Empty when rouge-chinese would find no sentence (it then raises
    ``ValueError``); callers must treat that as an error.
    """
    cut = segmented
    for pattern, repl in _SENTENCE_CUTS:
        cut = pattern.sub(repl, cut)
    tokens: list[str] = []
    for sentence in cut.rstrip().split("\n"):
        if sentence:
            tokens.extend(" ".join(sentence.split()).split(" "))
    return tokens


def rouge_tokens(text: str) -> list[str]:
    """Tokens of ``text`` as rouge-chinese scores them (see module docstring)."""
    return rouge_view(rouge_string(text))


class Segmenter:
    """:func:`rouge_tokens` for many texts, memoising jieba per block.

    ``jieba.cut`` splits a text at every character outside its ``re_han``
    class (punctuation, whitespace, most symbols) and segments each run of
    ``re_han`` characters on its own, so segmenting a text block by block gives
    exactly ``jieba.lcut(text)``. Prompt sets repeat blocks a lot (templates,
    boilerplate requirements), so a memo saves most of jieba's time. One memo
    per instance: a dictionary change (``jieba.add_word``) between runs cannot
    leak stale entries into a new run.
    """

    def __init__(self) -> None:
        init_jieba()
        self._blocks: dict[str, list[str]] = {}
        self.hits = 0
        self.misses = 0

    def jieba_words(self, text: str) -> list[str]:
        words: list[str] = []
        for block in jieba.re_han_default.split(text):
            if not block:
                continue
            cut = self._blocks.get(block)
            if cut is None:
                self.misses += 1
                cut = _words(jieba.lcut(block))
                self._blocks[block] = cut
            else:
                self.hits += 1
            words.extend(cut)
        return words

    def rouge_tokens(self, text: str) -> list[str]:
        return rouge_view(" ".join(self.jieba_words(text)))
