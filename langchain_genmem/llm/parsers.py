"""Lenient parsers for the text replies of language models.

A model's reply is untrusted text: it may wrap the answer in a code fence, in Markdown
emphasis or in a ``<think>`` block, number its lines in several ways, add a preamble
("Here are the ratings:"), or use Chinese punctuation. Every function here reads such
text with regular expressions and :func:`json.loads` only (never ``eval``), and either
returns what it could read or says plainly that nothing was there: :func:`parse_rating`
raises :class:`~langchain_genmem.core.errors.ParseError`, the batched readers return ``None``
for an item they could not read, so that the caller decides (re-ask, skip, default).

Rules shared by all readers:

* Size and time: a reply is first cleaned and cut to ``limits().reply`` characters
  (:data:`~langchain_genmem.core.text.MAX_REPLY_CHARS` by default; a longer one is reported by a
  :class:`~langchain_genmem.core.text.ReplyTruncatedWarning`), and every reader is linear in the
  length of what it reads: no pattern here backtracks over a run of spaces, newlines,
  brackets or citations.
* Cleaning: code fences, ``<think>…</think>`` blocks, ``**`` bold markers and backticks
  are removed first.
* Numbering: a line may start with a bullet (``-``, ``*``, ``•``) and a number such as
  ``1.``, ``1)``, ``(1)``, ``[1]``, ``1:``, ``1、``, ``#1``, ``Memory 1:``, ``Q1:``,
  ``第1条：``. ``1.7`` is a decimal, not item 1.
* Preambles: a line that ends with a colon (``:`` or ``：``) is a heading, never an item.
* Batched replies (:func:`parse_ratings`, :func:`parse_triples`): items are keyed by their
  number where the lines are numbered (1 to n; numbering 0 to n-1 is shifted by one;
  other numbers are ignored; the first readable answer for a number wins, and unnumbered
  lines are ignored). A reply with no numbered line is read in order, keeping the readable
  answers only; if it holds more than n of them, the last n are kept, as a stray number
  is far more often in a preamble than after the answers. A JSON list (in order) or
  object (keyed by number) is read the same way.

Ratings (:func:`parse_rating`, :func:`parse_ratings`):

* The rating is the number after a word such as ``Rating``, ``Rate``, ``Score``,
  ``评分``; otherwise the number the text starts with (after a leading ``1.`` numbering
  that is followed by another number), or the only number of the text. Mentions of the
  scale itself (``1-10``, ``1 to 10``, ``between 1 and 10``, ``满分10分``, ``1 is purely
  mundane``, ``10 = poignant``) are skipped.
* Never silently wrong: a reply that repeats the importance prompt is read only after the
  last words it repeats ("Rate (return a number between 1 to 10):"); a reply with several
  numbers and no rating word names no single rating; a numbered line that repeats a
  numbered list ("1. 1. 玛丽亚…", "1. [event] …") is an echo. Each is no rating (a
  ParseError, or None in a batch), not the 1 of the scale or of a list label.
* Denominators are honoured: ``a/b`` and ``a out of b`` read as ``a / b * high``
  (``7/10`` is 7, ``4/5`` is 8 on a 1-10 scale), ``a%`` as ``a / 100 * high``.
* Decimals round half up (``7.5`` is 8, ``7.49`` is 7).
* Any other number outside ``[low, high]`` is clamped to it (``0`` is 1, ``15`` is 10).
  Signs are not read: ``- 7`` is a bullet and 7.
"""

from __future__ import annotations

import json
import math
import re
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from typing import Any, TypeVar

from langchain_genmem.core.errors import ParseError, ValidationError
from langchain_genmem.core.text import has_letter, limits, prepare_reply

__all__ = [
    "format_numbered",
    "parse_focal_points",
    "parse_insights",
    "parse_rating",
    "parse_ratings",
    "parse_triple",
    "parse_triples",
    "text_key",
]

T = TypeVar("T")
Triple = tuple[str, str, str]

# --- cleaning -------------------------------------------------------------------------

_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.S | re.I)
# A fence with its language tag ("```json" before a line break), or a bare fence.
_FENCE = re.compile(r"```(?:[A-Za-z][\w+-]*(?=[ \t]*\r?\n))?")
_EMPHASIS = re.compile(r"\*\*|`")


def _clean(text: str) -> str:
    """Return ``text`` without reasoning blocks, code fences, bold and backticks."""
    text = _THINK.sub("", text)
    text = _FENCE.sub("\n", text)
    return _EMPHASIS.sub("", text).replace("\r\n", "\n").replace("\r", "\n")


def _json(text: str) -> Any:
    """Return the JSON list or object that is the whole of ``text``, else None."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):  # also too deep a nesting or too long an integer
        return None


# --- lines, numbering, preambles ------------------------------------------------------

_BULLET = re.compile(r"^\s*(?:[-*+]\s+|[•·▪]\s*)")
_LABEL = re.compile(
    r"""^\s*
    (?:(?:memory|memories|item|statement|event|thought|chat|conversation|question|insight
        |triple|number|no\.?|q|记忆|事件|想法|对话|问题|洞察|陈述|第)\s*)?
    (?:[#(（\[【]\s*)?(?P<number>\d{1,9})\s*(?:(?:条|个|项|号)\s*)?
    (?:[.．](?!\d)|[)）\]】:：、])
    """,
    re.I | re.X,
)


def _split_label(line: str) -> tuple[int | None, str]:
    """Split a line into its item number (None if unnumbered) and the rest, unbulleted."""
    line = _BULLET.sub("", line, count=1).strip()
    match = _LABEL.match(line)
    if match is not None:
        rest = line[match.end() :].strip()
        if rest:
            return int(match["number"]), rest
    return None, line


def _lines(text: str) -> Iterator[tuple[int | None, str]]:
    """Yield (item number or None, rest) for each non-blank line that is not a preamble."""
    for raw in text.split("\n"):
        label, rest = _split_label(raw)
        if rest and not rest.endswith((":", "：")):
            yield label, rest


def text_key(text: str) -> str:
    """Return the comparison key of a text: case, spacing and final stop ignored."""
    return " ".join(text.casefold().split()).rstrip(".。")


_QUOTE_PAIRS = {'"': '"', "'": "'", "“": "”", "‘": "’", "「": "」", "『": "』"}


def _unquote(text: str) -> str:
    """Strip matching pairs of quotes around ``text`` (linear: no copy per pair)."""
    text = text.strip()
    start, end = 0, len(text)
    while end - start >= 2 and _QUOTE_PAIRS.get(text[start]) == text[end - 1]:
        start, end = start + 1, end - 1
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
    return text[start:end]


def _int_key(key: str) -> int | None:
    digits = re.fullmatch(r"\s*\D{0,12}?(\d{1,9})\s*", key)
    return int(digits.group(1)) if digits else None


def _assign(entries: Sequence[tuple[int | None, T | None]], n: int) -> list[T | None]:
    """Place read answers into n slots: by number where numbered, otherwise in order."""
    slots: list[T | None] = [None] * n
    numbered = [(label, value) for label, value in entries if label is not None]
    if numbered:
        labels = [label for label, _ in numbered]
        shift = 1 if min(labels) == 0 and max(labels) < n else 0
        for label, value in numbered:
            index = label + shift - 1
            if 0 <= index < n and slots[index] is None:
                slots[index] = value
        return slots
    values = [value for _, value in entries if value is not None]
    for index, value in enumerate(values[-n:] if n else []):
        slots[index] = value
    return slots


def _numbered(text: str, n: int, read: Callable[[Any], T | None]) -> list[T | None]:
    """Read a batched reply for n items with ``read`` (one item's text or JSON value)."""
    if n < 0:
        msg = f"n: expected a count of items >= 0, got {n!r}"
        raise ValidationError(msg, field="n")
    text = _clean(prepare_reply(text))
    data = _json(text)
    entries: list[tuple[int | None, Any]]
    if isinstance(data, list):
        entries = [(None, value) for value in data]
    elif isinstance(data, dict):
        entries = [(_int_key(str(key)), value) for key, value in data.items()]
    else:
        entries = []
        for label, rest in _lines(text):
            values = _VALUE_LIST.fullmatch(rest) if label is None else None
            if values is None:
                entries.append((label, rest))
            else:
                entries.extend((None, m.group()) for m in _VALUE_ANY.finditer(rest))
    return _assign([(label, read(value)) for label, value in entries], n)


# --- ratings --------------------------------------------------------------------------

_NUM = r"\d+(?:\.\d+)?"
_VALUE_SRC = rf"(?P<num>{_NUM})(?:\s*(?P<pct>%)|\s*(?:/|out\s+of)\s*(?P<den>{_NUM}))?"
_VALUE = re.compile(rf"(?<![A-Za-z_]){_VALUE_SRC}", re.I)
_VALUE_ANY = re.compile(rf"{_NUM}(?:\s*%|\s*(?:/|out\s+of)\s*{_NUM})?", re.I)
_VALUE_LIST = re.compile(
    rf"[\[(（【]?\s*{_VALUE_ANY.pattern}(?:(?:\s*[,，;；、]\s*|\s+){_VALUE_ANY.pattern})+"
    r"\s*[\])）】]?",
    re.I,
)
_KEYED_VALUE = re.compile(
    r"(?:rating|rated|rate|score|poignancy|importance|评分|打分|分数|得分|重要性|重要程度)"
    rf"(?:\s|[:：=]|is\b|of\b|it\b|this\b|that\b|as\b|an?\b|为|是|了)*?{_VALUE_SRC}",
    re.I,
)


# Words of the importance prompts: a reply holding them echoes the prompt, and only what
# follows the last of them can be the answer.
_ECHO = re.compile(
    r"on the scale of|return a number|rate the likely poignancy|rate each memory", re.I
)


@lru_cache(maxsize=16)
def _scale(low: int, high: int) -> re.Pattern[str]:
    """Return the pattern of mentions of the scale itself, such as ``1 to 10``.

    The ends of the scale described ("1 is purely mundane", "10 is extremely poignant",
    "10 = very important") are mentions too.
    """
    if low >= high:
        msg = f"low, high: expected low < high, got {low!r} and {high!r}"
        raise ValidationError(msg, field="low")
    return re.compile(
        rf"(?<![\d.]){low}\s*(?:-|–|—|~|～|to|到|至|and|和|或)\s*{high}(?![\d.])"
        rf"|满分\s*{high}\s*分?"
        rf"|(?<![\d.])(?:{low}|{high})(?![\d.])\s*(?:is\b|=|means\b|代表|表示|是)",
        re.I,
    )


def _number_at(match: re.Match[str], high: int) -> float:
    number = float(match["num"])  # a 400-digit number is inf, clamped below
    if match["pct"]:
        return number / 100 * high
    if match["den"] and float(match["den"]) > 0:
        return number / float(match["den"]) * high
    return number


def _unkeyed(text: str, whole: bool) -> re.Match[str] | None:
    """The one rating a text without a rating word names, or None.

    A text that starts with a number names it (after an item number followed by another
    number: "1. 7"). A list label followed by another one ("1. 1. text") echoes a numbered
    list: no rating; so does a label followed by words in an item of a batch (``whole``
    False), while a whole reply "7. It is a turning point" rates 7. Otherwise the text must
    hold one value only.
    """
    label, rest = _split_label(text)
    if label is not None:
        if rest[:1].isdigit():
            inner, _ = _split_label(rest)
            return None if inner is not None else _VALUE.match(rest)
        if not whole:
            return None
        return _VALUE.match(text.lstrip())
    found = list(_VALUE.finditer(text))
    leading = found and not text[: found[0].start()].strip()
    if leading or len({m.group() for m in found}) == 1:
        return found[0]
    return None


def _after_echo(text: str) -> str:
    """What follows the last words of the prompt a reply repeats (all of it: none)."""
    echoes = list(_ECHO.finditer(text))
    return text[echoes[-1].end() :] if echoes else text


# A memory of the batched prompt's list, marked with its type: an echo, not an answer.
_MARKED_MEMORY = re.compile(r"\s*\[(?:event|thought|chat)\]", re.I)


def _read_rating(value: Any, low: int, high: int, whole: bool = False) -> int | None:
    """Read one rating from a text (or JSON value), or None when it names no single one."""
    text = _after_echo(_clean(str(value)))
    if _MARKED_MEMORY.match(_split_label(text)[1]):
        return None
    text = _scale(low, high).sub(" ", text)
    match = _KEYED_VALUE.search(text) or _unkeyed(text, whole)
    if match is None:
        return None
    number = _number_at(match, high)
    if math.isnan(number):  # inf / inf: no rating can be read from it
        return None
    return math.floor(min(max(number, low), high) + 0.5)


def parse_rating(text: str, *, low: int = 1, high: int = 10) -> int:
    """Read one rating on a ``low``..``high`` scale from a model's reply.

    Reads "7", "Rating: 7", "7/10", "**7**", "Rate: 7.", "评分：7", "I'd say 8 out of 10"
    and fenced code blocks. Denominators are honoured (``4/5`` is 8 on a 1-10 scale),
    decimals round half up, and any other number outside the scale is clamped to it.

    Args:
        text: the reply.
        low: the lowest rating of the scale.
        high: the highest rating of the scale.

    Returns:
        The rating, an integer in ``[low, high]``.

    Raises:
        ParseError: the reply holds no number (the reply is kept on the error).
    """
    text = prepare_reply(text)
    rating = _read_rating(text, low, high, whole=True)
    if rating is None:
        msg = f"no rating between {low} and {high} in the reply"
        raise ParseError(msg, reply=text)
    return rating


def parse_ratings(text: str, n: int, *, low: int = 1, high: int = 10) -> list[int | None]:
    """Read the ratings of n numbered items from one batched reply.

    Reads "1. 7", "2: 3", "1) 7", "Memory 2: 5", "第2条：5", JSON lists ``[7, 3]`` and
    objects ``{"1": 7}``, or bare ratings one per line. Each rating follows the rules of
    :func:`parse_rating`; the items follow the batched rules of the module docstring.

    Args:
        text: the reply.
        n: how many items were rated.
        low: the lowest rating of the scale.
        high: the highest rating of the scale.

    Returns:
        Exactly n entries, in item order; None for an item with no readable rating.
    """
    return _numbered(text, n, lambda value: _read_rating(value, low, high))


# --- focal points and insights --------------------------------------------------------

_INLINE_ITEM = re.compile(r"(?<=[?？])\s+(?=\(?\d+[.)）]\s)")


def parse_focal_points(text: str, n: int | None = None) -> list[str]:
    """Read the questions (focal points) of a reply, one per line.

    Reads "1) q", "1. q", "- q", "* q", "Q1: q" and plain lines, and splits a line that
    holds several numbered questions ("1) a? 2) b?"). Numbering, bullets and surrounding
    quotes are stripped; preambles, lines without a letter (``"½"``, ``"⑦"``), questions
    longer than ``limits().thought`` characters (:mod:`langchain_genmem.core.text`) and
    repeated questions (compared without case and spacing) are dropped. The reply is
    cleaned and truncated first (:func:`~langchain_genmem.core.text.prepare_reply`).

    Args:
        text: the reply.
        n: keep at most this many questions; None keeps all.

    Returns:
        The questions, in reply order.
    """
    questions: list[str] = []
    seen: set[str] = set()
    longest = limits().thought
    for _, rest in _lines(_INLINE_ITEM.sub("\n", _clean(prepare_reply(text)))):
        question = _unquote(rest)
        if len(question) > longest or not has_letter(question):
            continue
        if text_key(question) not in seen:
            seen.add(text_key(question))
            questions.append(question)
    return questions if n is None else questions[: max(n, 0)]


_CITATION_GROUP = re.compile(r"[\[【(（](?P<inner>[^\[\]【】()（）]*)[\]】)）]")
_BECAUSE = re.compile(r"\bbecause\s+of\b|\bbecause\b|因为|由于|根据", re.I)
_AFTER_CITATION = frozenset(".。;；!！")  # with spaces: what may follow the last citation
_BEFORE_CITATION = " \t,，;；:：-–—([（【"  # stripped from the text before a citation
_CITATION_WORDS = re.compile(
    r"\b(?:because\s+of|because|based\s+on|and|evidence|statements?|memor(?:y|ies)|nos?"
    r"|index(?:es)?)\b|因为|由于|根据|证据|和|与|及|第|条|[\s,，、;；&#:：.]+",
    re.I,
)
_CITATION_RANGE = re.compile(r"(?P<first>\d{1,9})(?:[-–~～](?P<last>\d{1,9}))?")


def _citation(clause: str) -> list[int] | None:
    """Return the integers of an evidence clause ("1, 3-5"), or None if it is not one."""
    numbers: list[int] = []
    for token in _CITATION_WORDS.sub(" ", clause).split():
        span = _CITATION_RANGE.fullmatch(token)
        if span is None:
            return None
        first, last = int(span["first"]), int(span["last"] or span["first"])
        numbers.extend(range(first, last + 1) if 0 <= last - first <= 50 else (first, last))
    return numbers or None


def _split_evidence(text: str) -> tuple[str, list[int]]:
    """Split "insight [1, 2]" or "insight (because of 1, 2)" into text and integers.

    Evidence clauses are taken from the end, one after the other: a bracketed citation
    followed by nothing but spaces and stops, else the clause from the last "because
    (of)" to the end. The brackets and "because" words are found in one pass and the text
    is never copied per clause, so this is linear in the length of the line.
    """
    groups = list(_CITATION_GROUP.finditer(text))
    heads = [match.end() for match in _BECAUSE.finditer(text)]
    starts = [match.start() for match in _BECAUSE.finditer(text)]
    found: list[list[int]] = []
    end, g = len(text), len(groups)
    while True:
        tail = end
        while tail and (text[tail - 1] in _AFTER_CITATION or text[tail - 1].isspace()):
            tail -= 1
        while g and groups[g - 1].end() > tail:
            g -= 1
        cited, start = None, end
        if g and groups[g - 1].end() == tail:
            cited, start = _citation(groups[g - 1]["inner"]), groups[g - 1].start()
        if cited is None:
            h = bisect_right(heads, end)  # the last "because" that ends within the text
            if not h:
                break
            start = starts[h - 1]
            cited = _citation(text[start:end])
            if cited is None:
                break
        found.append(cited)
        end = start
        while end and text[end - 1] in _BEFORE_CITATION:
            end -= 1
    numbers = (number for group in reversed(found) for number in group)
    return text[:end], list(dict.fromkeys(numbers))


def parse_insights(text: str) -> list[tuple[str, list[int]]]:
    """Read insights and the statement numbers cited as their evidence.

    Reads the stepwise design's "1. insight [7, 52, 47]" and the original Generative Agents
    "insight (because of 1, 5, 3)", with variants: "[`3`]", "[3, 5].", "【1，2】",
    "（因为 1, 2）", "(because of statements 1 and 3)", "- insight [1]", unnumbered lines.
    A line that holds only a citation adds it to the insight above it. An insight
    without a letter (``"½"``, ``"⑦"``) or longer than ``limits().thought`` characters
    (:mod:`langchain_genmem.core.text`) is dropped. The reply is cleaned and truncated first
    (:func:`~langchain_genmem.core.text.prepare_reply`); the work is linear in its length.

    Args:
        text: the reply.

    Returns:
        (insight, cited numbers) pairs in reply order. The insight is stripped of its
        numbering and evidence clause; the numbers are deduplicated in order. An insight
        with no citation has an empty list (the caller decides). Repeated insights
        (compared without case and spacing) are merged, their citations united.
    """
    merged: dict[str, tuple[str, dict[int, None]]] = {}
    last: dict[int, None] | None = None  # the cited numbers of the insight above, in order
    longest = limits().thought
    for _, rest in _lines(_clean(prepare_reply(text))):
        insight, cited = _split_evidence(rest)
        insight = _unquote(insight)
        if len(insight) > longest:
            last = None
        elif not has_letter(insight):
            if last is not None:
                last.update(dict.fromkeys(cited))
        else:
            _, last = merged.setdefault(text_key(insight), (insight, {}))
            last.update(dict.fromkeys(cited))
    return [(insight, list(cited)) for insight, cited in merged.values()]


# --- triples --------------------------------------------------------------------------

# The inner part has one way to match (up to its first comma), so each bracket costs at
# most the distance to the next bracket: linear, even for "(" + "a," * 100_000.
_TRIPLE_GROUP = re.compile(
    r"[(（\[【](?P<inner>[^()（）\[\]【】,，]*[,，][^()（）\[\]【】]*)[)）\]】]"
)
_TRIPLE_PARTS = re.compile(r"[,，]")  # parts are stripped by _make_triple (no \s* here: quadratic)
_TRIPLE_PREFIX = re.compile(r"^(?:triple|output|answer|result|三元组|输出|答案)\s*[:：]\s*", re.I)
_TRIPLE_FIELDS = {
    "subject": ("subject", "s", "主语", "主体"),
    "predicate": ("predicate", "p", "relation", "verb", "谓语", "关系"),
    "object": ("object", "o", "宾语", "客体"),
}
# Spaces, not \s, before the field: with re.M a leading \s* would run over every following
# blank line from each line start (quadratic on a reply of newlines). After the colon \s*
# may reach the next line ("Subject:\nMaria"): the match cannot fail from there, so no
# backtracking. The value is stripped in code.
_FIELD_LINE = re.compile(
    r"^[ \t]*(?P<field>subject|predicate|object|主语|谓语|宾语)[ \t]*[:：]\s*(?P<value>[^\n]*)",
    re.I | re.M,
)
_MAX_WRAPPERS = 3  # {"triple": {"result": [...]}}: the most objects around a triple


def _make_triple(parts: Sequence[Any], fallback_subject: str) -> Triple | None:
    """Build a triple from 2+ parts (2: the subject is the fallback).

    None if a part is empty or longer than ``limits().thought`` characters.
    """
    texts = [_unquote(str(part)).strip("'\"") for part in parts]
    if len(texts) == 2:
        texts = [fallback_subject, *texts]
    if len(texts) < 3:
        return None
    obj = ", ".join(texts[2:]).rstrip(".。")
    subject, predicate = texts[0] or fallback_subject, texts[1]
    longest = limits().thought
    if any(not part or len(part) > longest for part in (subject, predicate, obj)):
        return None
    return subject, predicate, obj


def _triple_from_mapping(
    data: dict[Any, Any], fallback_subject: str, depth: int = 0
) -> Triple | None:
    lowered = {str(key).casefold(): value for key, value in data.items()}
    subject, predicate, obj = (
        next((lowered[name] for name in names if name in lowered), None)
        for names in _TRIPLE_FIELDS.values()
    )
    if predicate is not None and obj is not None:
        return _make_triple([subject or "", predicate, obj], fallback_subject)
    inner = next(iter(data.values())) if len(data) == 1 else None
    wrapped = isinstance(inner, (str, list)) or (isinstance(inner, dict) and len(inner) != 1)
    if wrapped and depth < _MAX_WRAPPERS:
        return _triple_from(inner, fallback_subject, depth + 1)  # a wrapper: {"triple": [...]}
    return None


def _triple_from_text(text: str, fallback_subject: str, depth: int = 0) -> Triple | None:
    """Read a triple from field lines, else a bracketed group, else a bare line of 3 parts."""
    fields = {
        m["field"].casefold(): m["value"].strip()
        for m in _FIELD_LINE.finditer(text)
        if m["value"].strip()
    }
    if fields:
        return _triple_from_mapping(fields, fallback_subject, depth)
    for group in _TRIPLE_GROUP.finditer(text):
        triple = _make_triple(_TRIPLE_PARTS.split(group["inner"].strip()), fallback_subject)
        if triple is not None:
            return triple
    for _, rest in _lines(text):
        parts = _TRIPLE_PARTS.split(_TRIPLE_PREFIX.sub("", rest))
        triple = _make_triple(parts, fallback_subject) if len(parts) >= 3 else None
        if triple is not None:
            return triple
    return None


def _triple_from(value: Any, fallback_subject: str, depth: int = 0) -> Triple | None:
    """Read a triple from a text or a JSON value (list or object)."""
    if isinstance(value, dict):
        return _triple_from_mapping(value, fallback_subject, depth)
    if isinstance(value, list):
        scalars = all(not isinstance(part, (list, dict)) for part in value)
        return _make_triple(value, fallback_subject) if scalars else None
    text = _clean(str(value))
    data = _json(text)
    if data is not None and depth < _MAX_WRAPPERS:
        return _triple_from(data, fallback_subject, depth + 1)
    return _triple_from_text(text, fallback_subject, depth)


def parse_triple(text: str, fallback_subject: str = "") -> Triple | None:
    """Read one (subject, predicate, object) triple from a reply.

    Reads "(Maria, plan, study)", "Maria, plan, study", ``["Maria", "plan", "study"]``,
    ``{"subject": …, "predicate": …, "object": …}``, "Subject: x / Predicate: y /
    Object: z" lines (also 主语/谓语/宾语) and Chinese commas and brackets. Parts beyond
    the third are joined back into the object.

    Args:
        text: the reply.
        fallback_subject: the subject to use when the reply gives only (predicate,
            object) or an empty subject; usually the persona's name.

    Returns:
        The triple, or None when nothing usable was found (a part longer than
        ``limits().thought`` characters is not usable).
    """
    return _triple_from(prepare_reply(text), fallback_subject)


def parse_triples(text: str, n: int, fallback_subject: str = "") -> list[Triple | None]:
    """Read the triples of n numbered statements from one batched reply.

    Reads one triple a line, "1. (a, b, c)", or a JSON list of triples; the items follow
    the batched rules of the module docstring and each triple those of
    :func:`parse_triple`.

    Args:
        text: the reply.
        n: how many statements were sent.
        fallback_subject: as for :func:`parse_triple`.

    Returns:
        Exactly n entries, in statement order; None for a statement with no usable triple.
    """
    if n == 1:
        return [parse_triple(text, fallback_subject)]
    return _numbered(text, n, lambda value: _triple_from(value, fallback_subject))


# --- prompts --------------------------------------------------------------------------


def format_numbered(items: Sequence[str], start: int = 0) -> str:
    """Number items one a line, as prompts show them ("0. a\\n1. b\\n").

    The numbers shown are the numbers a model cites back, so callers map them with the
    same ``start``. Line breaks and runs of spaces inside an item become one space, so
    that each item stays on its own line.

    Args:
        items: the texts to number.
        start: the number of the first item.

    Returns:
        One "N. item" line per item, each ending with a line break; "" for no items.
    """
    return "".join(
        f"{number}. {' '.join(str(item).split())}\n" for number, item in enumerate(items, start)
    )
