"""Validation of memories before they are written.

Every item given to :meth:`MemoryStream.add_many` (and the ``add_*`` shortcuts) passes
through :func:`validate_items` first: nothing reaches the store until the whole batch is
known to be valid, and every error names the item and field that was wrong.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, field_validator
from pydantic import ValidationError as PydanticValidationError

from langchain_genmem import validation
from langchain_genmem.errors import ValidationError
from langchain_genmem.nodes import NodeType


class MemoryInput(BaseModel):
    """One memory to write, as a caller gives it.

    Attributes:
        type: ``"event"``, ``"thought"`` or ``"chat"``.
        description: the memory in words; never empty.
        subject: triple subject; None means the persona.
        predicate: triple predicate.
        object: triple object.
        keywords: None derives them from the triple as the original does.
        poignancy: importance; None asks the stream's importance scorer.
        created: None means the stream's clock.
        expiration: when the memory expires, or None.
        filling: thought evidence ids, event chat ids, or chat ``[speaker, utterance]`` pairs.
        evidence: another name for a thought's filling.
        embedding_key: None means the description.
        embedding: a precomputed vector; None lets the stream embed the key.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    type: NodeType
    description: str
    subject: str | None = None
    predicate: str = ""
    object: str = ""
    keywords: list[str] | None = None
    poignancy: float | None = None
    created: datetime | None = None
    expiration: datetime | None = None
    filling: Any = None
    evidence: list[str] | None = None
    embedding_key: str | None = None
    embedding: Any = None

    @field_validator("description")
    @classmethod
    def _non_empty(cls, value: str) -> str:
        if not value.strip():
            msg = "must be a non-empty text"
            raise ValueError(msg)
        return value

    @field_validator("poignancy", mode="before")
    @classmethod
    def _finite(cls, value: Any) -> float | None:
        return None if value is None else validation.poignancy(value, "poignancy")

    @field_validator("embedding_key")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            msg = "must be a non-empty text when given"
            raise ValueError(msg)
        return value


def validate_items(items: Sequence[Mapping[str, Any] | MemoryInput]) -> list[MemoryInput]:
    """Check every item of a batch, raising on the first bad one.

    Args:
        items: dicts with the fields of :class:`MemoryInput`, or MemoryInput objects.

    Returns:
        The validated inputs, in order.

    Raises:
        ValidationError: an item is bad; the message names ``items[i].field``.
    """
    if isinstance(items, (str, bytes, Mapping)):
        msg = "items: expected a list of memories (dicts), not a single value"
        raise ValidationError(msg, field="items")
    out = []
    for i, item in enumerate(items):
        try:
            parsed = item if isinstance(item, MemoryInput) else MemoryInput.model_validate(item)
        except PydanticValidationError as e:
            raise _named(e, i) from e
        _check_shapes(parsed, i)
        out.append(parsed)
    return out


def _named(error: PydanticValidationError, index: int) -> ValidationError:
    first = error.errors()[0]
    field = ".".join(str(x) for x in first["loc"]) or "item"
    ours = (first.get("ctx") or {}).get("error")
    if isinstance(ours, ValidationError):  # a rule of langchain_genmem.validation: its words
        return ValidationError(f"items[{index}].{ours}", field=field)
    given = first.get("input")
    shown = repr(given) if not isinstance(given, Mapping) else "the item"
    text = str(first["msg"]).removeprefix("Value error, ")
    msg = f"items[{index}].{field}: {text} (got {shown})"
    return ValidationError(msg, field=field)


def _check_shapes(item: MemoryInput, index: int) -> None:
    where = f"items[{index}]"
    if item.evidence is not None and item.type != "thought":
        msg = f"{where}.evidence: only thoughts have evidence (type is {item.type!r})"
        raise ValidationError(msg, field="evidence")
    if item.evidence is not None and item.filling is not None:
        msg = f"{where}.evidence: give evidence or filling, not both"
        raise ValidationError(msg, field="evidence")
    if item.type == "chat" and item.filling is not None:
        _check_chat_filling(item.filling, where)
    if item.embedding is not None:
        vector = np.asarray(item.embedding, dtype=np.float64)
        if vector.ndim != 1 or vector.size == 0 or not np.all(np.isfinite(vector)):
            msg = f"{where}.embedding: expected a non-empty 1-d vector of finite numbers"
            raise ValidationError(msg, field="embedding")


def _check_chat_filling(filling: Any, where: str) -> None:
    ok = isinstance(filling, list) and all(
        isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(x, str) for x in pair)
        for pair in filling
    )
    if not ok:
        msg = f"{where}.filling: a chat's filling is a list of [speaker, utterance] pairs"
        raise ValidationError(msg, field="filling")
