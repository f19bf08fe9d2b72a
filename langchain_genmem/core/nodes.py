"""Memory nodes: the ``ConceptNode`` of the original Generative Agents code, validated.

A node is one memory of one persona: an *event* it perceived, a *thought* it had (a
reflection, a plan, a memo) or a *chat* it took part in. Every field of the original
``ConceptNode`` is kept with its original meaning, so that saved memories of the original
simulation load and save unchanged (see :mod:`langchain_genmem.interop`).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from langchain_genmem.core import validation
from langchain_genmem.core.errors import ValidationError

NodeType = Literal["event", "thought", "chat"]
NODE_TYPES: tuple[NodeType, ...] = ("event", "thought", "chat")
TYPE_CHOICES = f"{', '.join(NODE_TYPES[:-1])} or {NODE_TYPES[-1]}"  # for help and errors
# What a weighted retrieval scores unless its filter names types: the original's events and
# thoughts. Chats are scored only when a filter asks for them by type.
CANDIDATE_TYPES: tuple[NodeType, ...] = ("event", "thought")
NODE_ID_RE = re.compile(r"^node_([1-9][0-9]*)\Z")
# The number each type is stored as in numeric columns (the cache, scoring, SQL ranking).
TYPE_CODES: dict[str, int] = {"event": 0, "thought": 1, "chat": 2}
TYPE_NAMES: tuple[str, ...] = tuple(TYPE_CODES)
# The types whose keywords have strengths (the original's kw_strength_event / _thought).
STRENGTH_TYPES: tuple[str, ...] = ("event", "thought")

# The original gives reflected thoughts a 30-day life (reflect.py); a thought's expiration
# is written from it, and read as every memory's is (memory/expiry.py).
THOUGHT_LIFETIME_DAYS = 30


def node_number_or_none(node_id: str) -> int | None:
    """N of a ``node_N`` id, or None for anything else.

    Args:
        node_id: a candidate id.

    Returns:
        The number, or None.
    """
    match = NODE_ID_RE.match(node_id)
    return None if match is None else int(match.group(1))


def node_number(node_id: str) -> int:
    """Return N of a ``node_N`` id.

    Args:
        node_id: an id such as ``"node_12"``.

    Returns:
        The number after ``node_``.

    Raises:
        ValueError: the id is not of the ``node_N`` form.
    """
    number = node_number_or_none(node_id)
    if number is None:
        msg = f"node_id: {node_id!r} is not of the form node_N"
        raise ValueError(msg)
    return number


class MemoryNode(BaseModel):
    """One memory of the stream, with every field of the original ``ConceptNode``.

    Attributes:
        node_id: ``node_N``, N being ``node_count``.
        node_count: position of the node in the whole stream, from 1.
        type_count: position of the node among nodes of its type, from 1.
        type: ``"event"``, ``"thought"`` or ``"chat"``.
        depth: 0 for events and chats; 1 + the deepest evidence for thoughts.
        created: when the memory was made (simulation time for naive datetimes).
        expiration: when it expires, or None. The original writes it and never reads it.
        last_accessed: when retrieval last returned it; starts at ``created``.
        subject: subject of the (subject, predicate, object) triple.
        predicate: predicate of the triple.
        object: object of the triple.
        description: the memory in words; never empty.
        embedding_key: the text whose vector stands for the memory; nodes with the same
            key share one vector.
        poignancy: importance, 1 (mundane) to 10 (poignant) in the original; any finite number.
        keywords: keywords as written (the keyword index lowercases them).
        filling: a thought's evidence node ids, an event's chat node ids, a chat's
            ``[speaker, utterance]`` pairs; None or a bare string also occur in real data.
        conversation: the conversation a turn belongs to (any id; turns with the same id,
            in ``created`` order, form one conversation), or None. Not in the original.
        speaker: who said the turn, or None. Not in the original.
    """

    model_config = ConfigDict(validate_assignment=False, extra="forbid")

    node_id: str
    node_count: int = Field(ge=1)
    type_count: int = Field(ge=1)
    type: NodeType
    depth: int = Field(ge=0)
    created: datetime
    expiration: datetime | None = None
    last_accessed: datetime
    subject: str = ""
    predicate: str = ""
    object: str = ""
    description: str
    embedding_key: str
    poignancy: float
    keywords: list[str] = Field(default_factory=list)
    filling: Any = None
    conversation: str | None = None
    speaker: str | None = None

    @field_validator("node_id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        node_number(value)
        return value

    @field_validator("description")
    @classmethod
    def _check_description(cls, value: str) -> str:
        if not value or not value.strip():
            msg = "description: must be a non-empty text"
            raise ValueError(msg)
        return value

    @field_validator("poignancy", mode="before")
    @classmethod
    def _check_poignancy(cls, value: Any) -> float:
        return check_poignancy(value)

    @field_validator("conversation", "speaker", mode="before")
    @classmethod
    def _check_turn(cls, value: Any, info: ValidationInfo) -> str | None:
        return validation.turn_label(value, str(info.field_name))

    @property
    def evidence(self) -> list[str]:
        """Evidence node ids of a thought (empty for other types or a non-list filling)."""
        if self.type != "thought" or not isinstance(self.filling, list):
            return []
        return [x for x in self.filling if isinstance(x, str)]

    @property
    def spo(self) -> tuple[str, str, str]:
        """The (subject, predicate, object) triple."""
        return (self.subject, self.predicate, self.object)


def check_poignancy(value: Any, field: str = "poignancy") -> float:
    """Return ``value`` as a finite float, or raise naming the field.

    Stored nodes only need a finite poignancy; new memories are held to the 1..10 scale by
    :func:`langchain_genmem.core.validation.poignancy`.

    Args:
        value: the candidate poignancy.
        field: the field name used in the error.

    Returns:
        The poignancy as a float.

    Raises:
        ValueError: the value is not a finite real number (a ValidationError).
    """
    return validation.finite_number(value, field)


ImportanceScale = Literal["poignancy", "unit"]
"""How importance is shown: ``"poignancy"`` as stored (1 to 10 in the original), or
``"unit"``, the stepwise design's 0.1 to 1.0 (poignancy / 10). Stored values never change."""

IMPORTANCE_SCALES: dict[str, float] = {"poignancy": 1.0, "unit": 10.0}


def importance_divisor(scale: str) -> float:
    """What poignancy is divided by to show it on ``scale``.

    Args:
        scale: ``"poignancy"`` or ``"unit"`` (see :data:`ImportanceScale`).

    Returns:
        1.0 or 10.0.

    Raises:
        ValidationError: an unknown scale.
    """
    divisor = IMPORTANCE_SCALES.get(scale) if isinstance(scale, str) else None
    if divisor is None:
        msg = f"importance_scale: expected 'poignancy' or 'unit', got {scale!r}"
        raise ValidationError(msg, field="importance_scale")
    return divisor
