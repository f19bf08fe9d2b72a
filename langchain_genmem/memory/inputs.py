"""Validation of memories before they are written.

Every item given to :meth:`MemoryStream.add_many` (and the ``add_*`` shortcuts) passes
through :func:`validate_items` first: nothing reaches the store until the whole batch is
known to be valid, and every error names the item and field that was wrong. Texts are
cleaned at this boundary (:func:`~langchain_genmem.core.text.clean_text`: lone surrogates
replaced, NUL removed) and the description, embedding key and triple must each fit
``limits().description`` characters (:mod:`langchain_genmem.core.text`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic import ValidationError as PydanticValidationError

from langchain_genmem.core import validation
from langchain_genmem.core.errors import ValidationError
from langchain_genmem.core.nodes import NodeType, node_number_or_none
from langchain_genmem.core.text import clean_text, length_error, limits
from langchain_genmem.core.timeutil import naive
from langchain_genmem.memory.expiry import expiration_of, lifetime

_FLOAT32_MAX = float(np.finfo(np.float32).max)


def fits_float32(vector: Any) -> bool:
    """Whether every number of ``vector`` is finite and within float32 (what stores keep)."""
    return bool(np.all(np.abs(np.asarray(vector, dtype=np.float64)) <= _FLOAT32_MAX))


def _clean_nested(value: Any) -> Any:
    """``value`` with every text inside it (lists and tuples too) cleaned."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_clean_nested(x) for x in value)
    return value


def supersedes_ids(value: Any) -> list[str] | None:
    """The ids an item supersedes, checked for form (a list of ``node_N`` texts).

    Args:
        value: what the caller gave (None: nothing superseded).

    Returns:
        The ids, each once, in order (None when none were given).

    Raises:
        ValueError: not a list of ``node_N`` ids.
    """
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        msg = f"expected a list of node ids such as ['node_3'] (got {value!r})"
        raise ValueError(msg)
    for node_id in value:
        if not isinstance(node_id, str) or node_number_or_none(node_id) is None:
            msg = f"{node_id!r} is not a node id (expected node_N)"
            raise ValueError(msg)
    return list(dict.fromkeys(value))



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
        expires_in: how long after ``created`` the memory expires (seconds, a ``timedelta``
            or a text such as ``"30d"``; see :mod:`~langchain_genmem.memory.expiry`), or
            None; not with ``expiration``.
        supersedes: ids of live memories this one corrects (retrieval leaves them out; see
            :mod:`~langchain_genmem.memory.corrections`), or None.
        filling: thought evidence ids, event chat ids, or chat ``[speaker, utterance]`` pairs.
        evidence: another name for a thought's filling.
        embedding_key: None means the description.
        embedding: a precomputed vector; None lets the stream embed the key.
        conversation: the conversation this memory is a turn of (any id), or None; a turn
            without ``embedding_key`` is embedded with the turns before it (see
            :class:`~langchain_genmem.MemoryStream`'s ``context_turns``).
        speaker: who said the turn, or None.
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
    expires_in: timedelta | None = None
    supersedes: list[str] | None = None
    filling: Any = None
    evidence: list[str] | None = None
    embedding_key: str | None = None
    embedding: Any = None
    conversation: str | None = None
    speaker: str | None = None

    @field_validator("expires_in", mode="before")
    @classmethod
    def _lifetime(cls, value: Any) -> timedelta | None:
        return None if value is None else lifetime(value)

    @field_validator("created", "expiration")
    @classmethod
    def _in_calendar(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        if value is not None:
            naive(value, str(info.field_name))  # in UTC too
        return value

    @field_validator("supersedes", mode="before")
    @classmethod
    def _supersedes(cls, value: Any) -> list[str] | None:
        return supersedes_ids(value)

    @field_validator("conversation", "speaker", mode="before")
    @classmethod
    def _turn(cls, value: Any, info: ValidationInfo) -> str | None:
        return validation.turn_label(value, str(info.field_name))

    @field_validator("description", "subject", "predicate", "object", "embedding_key",
                     mode="before")
    @classmethod
    def _bounded(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        value = clean_text(value)
        error = length_error(value, limits().description)
        if error is not None:
            raise ValueError(error)
        return value

    @field_validator("keywords", "filling", "evidence", mode="before")
    @classmethod
    def _cleaned(cls, value: Any) -> Any:
        return _clean_nested(value)

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
    if isinstance(ours, ValidationError):  # a rule of langchain_genmem.core.validation: its words
        return ValidationError(f"items[{index}].{ours}", field=field)
    given = first.get("input")
    shown = repr(given) if not isinstance(given, Mapping) else "the item"
    shown = shown if len(shown) <= 80 else shown[:80] + "…"
    text = str(first["msg"]).removeprefix("Value error, ")
    msg = f"items[{index}].{field}: {text} (got {shown})"
    return ValidationError(msg, field=field)


def _check_shapes(item: MemoryInput, index: int) -> None:
    where = f"items[{index}]"
    if item.expiration is not None and item.expires_in is not None:
        msg = f"{where}.expires_in: give expiration or expires_in, not both"
        raise ValidationError(msg, field="expires_in")
    if item.created is not None and item.expires_in is not None:
        try:
            expiration_of(naive(item.created), None, item.expires_in)
        except ValidationError as e:
            raise ValidationError(f"{where}.{e}", field="expires_in") from None
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
        if vector.ndim != 1 or vector.size == 0 or not fits_float32(vector):
            msg = (
                f"{where}.embedding: expected a non-empty 1-d vector of finite numbers "
                "within the float32 range stores keep (about ±3.4e38)"
            )
            raise ValidationError(msg, field="embedding")


def _check_chat_filling(filling: Any, where: str) -> None:
    ok = isinstance(filling, list) and all(
        isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(x, str) for x in pair)
        for pair in filling
    )
    if not ok:
        msg = f"{where}.filling: a chat's filling is a list of [speaker, utterance] pairs"
        raise ValidationError(msg, field="filling")
