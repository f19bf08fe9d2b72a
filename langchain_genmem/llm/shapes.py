"""The JSON shapes of structured replies: their schemas, a checker, and their text form.

A :class:`Shape` is what a structured call asks for: a JSON schema (every array bounded by
``maxItems``: llama.cpp's grammar lets an unbounded array run to ``max_tokens``), and how a
reply of that shape is written back as the text the lenient readers of
:mod:`~langchain_genmem.llm.parsers` read. So the stages read one form only, whichever way
the model was asked; a reply that does not match its schema is an unreadable reply ("").

* :func:`rating_shape`: ``{"rating": 7}``, an integer from 1 to 10.
* :func:`ratings_shape`: ``{"ratings": [7, 3]}``, exactly n integers from 1 to 10.
* :func:`questions_shape`: ``{"questions": [...]}``, 1 to n texts (every text of every shape
  is bounded in characters too).
* :func:`insights_shape`: ``{"insights": [{"insight": "...", "evidence": [0, 2]}]}``, 1 to n
  insights whose evidence can only be the numbers of the statements shown (an ``enum``).
* :func:`triples_shape`: ``{"triples": [{"subject", "predicate", "object"}]}``, exactly n.
* :func:`sentence_shape`: ``{"sentence": "..."}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Shape",
    "conforms",
    "insights_shape",
    "questions_shape",
    "rating_shape",
    "ratings_shape",
    "read_structured",
    "sentence_shape",
    "triples_shape",
]

_MAX_EVIDENCE = 10  # the most statements one insight cites


@dataclass(frozen=True)
class Shape:
    """A structured reply: its name and JSON schema, and its text form.

    Attributes:
        name: the schema's name (sent to the server).
        schema: the JSON schema.
        render: writes a reply of this shape as the text form the parsers read.
    """

    name: str
    schema: dict[str, Any]
    render: Callable[[Any], str]

    def response_format(self) -> dict[str, Any]:
        """The OpenAI ``response_format`` asking for this shape."""
        return {
            "type": "json_schema",
            "json_schema": {"name": self.name, "schema": self.schema, "strict": True},
        }


def _object(**properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _array(items: dict[str, Any], low: int, high: int) -> dict[str, Any]:
    return {"type": "array", "items": items, "minItems": low, "maxItems": high}


_RATING = {"type": "integer", "minimum": 1, "maximum": 10}
# Every text is bounded too: a small model's string, like an unbounded array, can run on to
# max_tokens, and the reply is then cut and unreadable. Characters, not tokens: a question
# of 160 Chinese characters is still well inside the questions' token bound.
QUESTION_CHARS = 160
INSIGHT_CHARS = 240
SENTENCE_CHARS = 300
TRIPLE_PART_CHARS = 80


def _text(limit: int) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": limit}


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())


def rating_shape() -> Shape:
    """One rating: ``{"rating": 7}``, read back as ``"7"``."""
    return Shape("Rating", _object(rating=_RATING), lambda value: str(value["rating"]))


def ratings_shape(n: int) -> Shape:
    """Exactly ``n`` ratings in item order, read back as a JSON list."""
    return Shape(
        "Ratings",
        _object(ratings=_array(_RATING, n, n)),
        lambda value: json.dumps(value["ratings"]),
    )


def questions_shape(n: int) -> Shape:
    """1 to ``n`` questions, read back as ``1) question`` lines."""
    return Shape(
        "Questions",
        _object(questions=_array(_text(QUESTION_CHARS), 1, max(n, 1))),
        lambda value: "".join(
            f"{i}) {_one_line(q)}\n" for i, q in enumerate(value["questions"], 1)
        ),
    )


def insights_shape(numbers: Sequence[int], n: int) -> Shape:
    """1 to ``n`` insights citing only ``numbers``, read back as ``1. insight [0, 2]`` lines."""
    evidence = _array({"type": "integer", "enum": list(numbers)}, 1,
                      max(1, min(len(numbers), _MAX_EVIDENCE)))
    insight = _object(insight=_text(INSIGHT_CHARS), evidence=evidence)
    return Shape("Insights", _object(insights=_array(insight, 1, max(n, 1))), _insight_lines)


def _insight_lines(value: Any) -> str:
    return "".join(
        f"{i}. {_one_line(x['insight'])} [{', '.join(map(str, dict.fromkeys(x['evidence'])))}]\n"
        for i, x in enumerate(value["insights"], 1)
    )


def triples_shape(n: int) -> Shape:
    """Exactly ``n`` triples in statement order, read back as a JSON list of triples."""
    part = _text(TRIPLE_PART_CHARS)
    triple = _object(subject=part, predicate=part, object=part)
    return Shape("Triples", _object(triples=_array(triple, n, n)), _triple_lists)


def _triple_lists(value: Any) -> str:
    """A JSON list of [subject, predicate, object] lists; one triple alone, as one list."""
    triples = [[t["subject"], t["predicate"], t["object"]] for t in value["triples"]]
    return json.dumps(triples[0] if len(triples) == 1 else triples, ensure_ascii=False)


def sentence_shape() -> Shape:
    """One sentence: ``{"sentence": "..."}``, read back as its first line."""
    schema = _object(sentence=_text(SENTENCE_CHARS))
    return Shape("Sentence", schema, lambda value: _one_line(value["sentence"]))


def conforms(value: Any, schema: Mapping[str, Any]) -> bool:  # noqa: PLR0911
    """Whether a JSON value matches one of these shapes' schemas.

    Checks what the shapes use: ``type`` (object, array, integer, string), ``properties``,
    ``required``, ``additionalProperties: false``, ``items``, ``minItems``, ``maxItems``,
    ``enum``, ``minimum``, ``maximum``, ``minLength`` and ``maxLength``.

    Args:
        value: the decoded reply.
        schema: the schema.

    Returns:
        True when it matches.
    """
    if "enum" in schema and value not in schema["enum"]:
        return False
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(value, dict) or any(k not in value for k in schema["required"]):
            return False
        props = schema["properties"]
        if any(k not in props for k in value):
            return False
        return all(conforms(value[k], props[k]) for k in value)
    if kind == "array":
        ok = isinstance(value, list) and schema["minItems"] <= len(value) <= schema["maxItems"]
        return ok and all(conforms(item, schema["items"]) for item in value)
    if kind == "integer":
        return (
            isinstance(value, int)
            and not isinstance(value, bool)
            and schema.get("minimum", value) <= value <= schema.get("maximum", value)
        )
    if kind == "string":
        return isinstance(value, str) and (
            schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value))
        )
    return True


def read_structured(content: str, shape: Shape) -> str:
    """The text form of a structured reply, or "" when it does not match the shape.

    Args:
        content: the reply's text (the JSON object).
        shape: what was asked for.

    Returns:
        The text the parsers read; "" for an invalid or non-matching reply.
    """
    try:
        value = json.loads(content)
    except (ValueError, RecursionError):
        return ""
    return shape.render(value) if conforms(value, shape.schema) else ""
