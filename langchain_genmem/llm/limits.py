"""Bounds of every model call: tokens per kind of reply, a timeout, a number of retries.

A small local model asked without ``max_tokens`` may write until its context is full (a
135M model rating one memory ran ten minutes), and a client's default timeout and retries
let one call take half an hour. :class:`CallLimits` declares the bounds once; every call
the package makes carries the ``max_tokens`` of its kind of reply and the timeout (see
:mod:`~langchain_genmem.llm.calls`).

Defaults (tokens): one rating 64 (a JSON ``{"rating": 7}`` with the free whitespace a small
model adds), a batch of ratings 64 + 24 per memory, questions 300, insights 600, a
condensed list 600, triples 64 + 64 per statement, a sentence after a conversation 128, the
chat agent's answer 512, sent with at most 1,000 tokens of the conversation; timeout 120 s
per call (the longest reply, 600 tokens of insights, at the 5 to 15 tokens a second of a
small model on one busy CPU thread); 1 retry.

:data:`FALLBACK_IMPORTANCE` is the importance a memory gets when the model gave no rating.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from langchain_genmem.core.validation import from_pydantic

OutputForm = Literal["auto", "structured", "text"]
"""How replies are asked for: ``"auto"`` (structured where the server takes JSON schemas,
else text), ``"structured"`` (always; a server that refuses is an error) or ``"text"``
(the original's text prompts, read leniently)."""

__all__ = ["FALLBACK_IMPORTANCE", "CallLimits", "FrozenSettings", "OutputForm", "ReplyKind"]

FALLBACK_IMPORTANCE = 4.0
"""The importance (poignancy) of a memory the model could not rate, even asked alone: the
original's fail-safe rating. Such a memory is listed as unrated (see
:func:`~langchain_genmem.llm.importance.unrated_ids`) so that it can be rated again."""

ReplyKind = Literal[
    "rating", "ratings", "questions", "insights", "condense", "triples", "sentence", "answer"
]
"""What a call asks for: one rating, a batch of ratings, the focal points, insights, a
condensed list of insights, a batch of triples, the sentence after a conversation, or the
chat agent's answer."""

_PER_ITEM = {"ratings": "rating_per_item", "triples": "triple_per_item"}


class FrozenSettings(BaseModel):
    """A frozen settings model whose bad values raise one line naming the field."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def __init__(self, **values: Any) -> None:
        """Check the values; a bad one raises a ValidationError naming its field."""
        try:
            super().__init__(**values)
        except PydanticValidationError as e:
            raise from_pydantic(e, type(self).__name__) from None


class CallLimits(FrozenSettings):
    """How long a reply may be, per kind, and how long a call may take.

    ``CallLimits(timeout=120)`` keeps every other default; a bad value raises a one-line
    :class:`~langchain_genmem.core.errors.ValidationError` naming its field.

    Attributes:
        rating: tokens of one rating.
        ratings: tokens of a batch of ratings, before ``rating_per_item`` per memory.
        rating_per_item: tokens added per memory of a batch.
        questions: tokens of the focal points (the questions) of a reflection.
        insights: tokens of the insights of one question.
        condense: tokens of a condensed list of insights.
        triples: tokens of a batch of triples, before ``triple_per_item`` per statement.
        triple_per_item: tokens added per statement.
        sentence: tokens of the planning thought or memo after a conversation.
        answer: tokens of the chat agent's answer.
        history: tokens of the conversation the chat agent sends with each question (counted
            approximately; the oldest turns are left out first, the newest question always
            goes). What is left out stays reachable through the memories it recalls, and a
            small model's context (2,048 tokens on llama.cpp by default) does not overflow
            as the conversation grows.
        timeout: seconds one call may take before it fails (the package's own, sent with
            every call).
        max_retries: how many times a failed call is tried again (given to the client of
            :func:`~langchain_genmem.llm.chat.chat_model_from_env`).
    """

    rating: int = Field(64, ge=1)
    ratings: int = Field(64, ge=1)
    rating_per_item: int = Field(24, ge=1)
    questions: int = Field(300, ge=1)
    insights: int = Field(600, ge=1)
    condense: int = Field(600, ge=1)
    triples: int = Field(64, ge=1)
    triple_per_item: int = Field(64, ge=1)
    sentence: int = Field(128, ge=1)
    answer: int = Field(512, ge=1)
    history: int = Field(1000, ge=1)
    timeout: float = Field(120.0, gt=0, allow_inf_nan=False)
    max_retries: int = Field(1, ge=0, le=10)

    def max_tokens(self, kind: ReplyKind, n: int = 1) -> int:
        """The ``max_tokens`` of a call.

        Args:
            kind: what the call asks for.
            n: how many items a batch holds (ratings, triples).

        Returns:
            The token bound.
        """
        per_item = _PER_ITEM.get(kind)
        base = int(getattr(self, kind))
        return base + (int(getattr(self, per_item)) * max(n, 1) if per_item else 0)
