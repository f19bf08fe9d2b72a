"""Tokens for lexical relevance: one tokeniser for English, Chinese and mixed text.

A text becomes terms in four steps:

1. Unicode NFKC and case folding, so full-width ``Ｈｏｂｂｓ`` and ``hobbs`` are one term and
   ``ﬁ`` ligatures or circled digits read as their letters.
2. Runs of Han characters are segmented into words by ``rjieba`` (the Rust port of jieba:
   same segmentation, ten times faster); every other run of letters or digits is one word.
   Punctuation and spaces separate words and are never terms.
3. Stop words (:data:`ENGLISH_STOP_WORDS`, :data:`CHINESE_STOP_WORDS`) are dropped: they
   occur in most memories and would only add noise to BM25.
4. Latin-script words are stemmed with the Snowball English stemmer (``PyStemmer``), so
   ``studies``/``studying``/``studied`` match; Chinese words and other scripts are kept as
   segmented.

The same function tokenises documents and queries, so a term of one always meets its
equal in the other.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import rjieba
import Stemmer

__all__ = ["CHINESE_STOP_WORDS", "ENGLISH_STOP_WORDS", "tokens"]

ENGLISH_STOP_WORDS: frozenset[str] = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves s t d ll m re ve""".split()
)
"""English function words dropped from documents and queries (compared before stemming);
with the pieces an apostrophe leaves (``Valentine's``, ``don't``, ``we'll``)."""

CHINESE_STOP_WORDS: frozenset[str] = frozenset(
    "的 地 得 了 着 过 吗 呢 吧 啊 呀 和 与 及 或 而 在 是 也 都 就 把 被 这 那 之 于 个".split()
)
"""Chinese particles and function words dropped after segmentation."""

# A Han run (CJK unified ideographs, extension A, compatibility ideographs) or a run of
# other word characters (letters, digits, marks; "_" is a separator).
_WORD = re.compile(r"([\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+)|([^\W_]+)")
_LATIN = re.compile(r"[a-z0-9]+")
_STEMMER = Stemmer.Stemmer("english")


def tokens(text: str, *, stem: bool = True) -> list[str]:
    """The terms of ``text`` in order, as the lexical index sees them.

    Args:
        text: any text (English, Chinese, mixed, empty).
        stem: stem Latin-script words (the index's default); False keeps them whole.

    Returns:
        The terms, repeats kept; empty for a text of only stop words or punctuation.

    Example:
        ``tokens("Maria 在 Hobbs Cafe 学习物理")`` gives
        ``["maria", "hobb", "cafe", "学习", "物理"]``.
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    out: list[str] = []
    for han, word in _WORD.findall(text):
        if han:
            out.extend(w for w in rjieba.cut(han) if w not in CHINESE_STOP_WORDS)
        else:
            term = _term(word) if stem else _unstemmed(word)
            if term:
                out.append(term)
    return out


@lru_cache(maxsize=1 << 16)
def _term(word: str) -> str:
    """A non-Han word as a term: "" for a stop word, stemmed when it is Latin letters."""
    if word in ENGLISH_STOP_WORDS:
        return ""
    if _LATIN.fullmatch(word):
        return _STEMMER.stemWord(word)
    return word


def _unstemmed(word: str) -> str:
    """A non-Han word as a term without stemming: "" for a stop word."""
    return "" if word in ENGLISH_STOP_WORDS else word
