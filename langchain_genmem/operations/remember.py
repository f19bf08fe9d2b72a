"""Remember, declared once: one memory or a batch written all or nothing.

The models: :class:`MemoryItem`, :class:`MemoryRequest` and :class:`MemoryBatchRequest`.

``POST /memories`` and ``POST /memories/batch`` take these models as their bodies; the MCP
tool ``remember`` takes its arguments from :class:`MemoryItem` (see
:mod:`~langchain_genmem.operations.derive`). Each item becomes a
:class:`~langchain_genmem.memory.inputs.MemoryInput` (:meth:`MemoryItem.as_input`), which
the stream checks again with the library's own rules.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, field_validator
from pydantic_core import PydanticCustomError

from langchain_genmem.core.nodes import TYPE_CHOICES, NodeType
from langchain_genmem.operations.fields import (
    DURATION_PATTERN,
    MAX_BATCH,
    MAX_BATCH_CHARS,
    MAX_DURATION_CHARS,
    MAX_FIELD_CHARS,
    MAX_TEXT_CHARS,
    NODE_IDS_PATTERN,
    Duration,
    IsoTime,
    PersonaName,
    Poignancy,
    Request,
    When,
    name_info,
    not_blank,
    optional_info,
    split_list,
    text_info,
)


class MemoryItem(Request):
    """One memory to add, as flat fields."""

    type: Annotated[NodeType, Field(description=f"{TYPE_CHOICES}.")] = "event"
    description: Annotated[str, text_info(
        "The memory in words (not blank).", MAX_TEXT_CHARS, min_length=1
    )]
    poignancy: Poignancy = None
    subject: Annotated[str | None, optional_info(
        "string", str, "Triple subject (default: the persona).", max_length=MAX_FIELD_CHARS
    )] = None
    predicate: Annotated[str | None, optional_info(
        "string", str, "Triple predicate, e.g. 'is studying'.", max_length=MAX_FIELD_CHARS
    )] = None
    object: Annotated[str | None, optional_info(
        "string", str, "Triple object, e.g. 'physics'.", max_length=MAX_FIELD_CHARS
    )] = None
    keywords: Annotated[str | None, optional_info(
        "string", str, "Comma-separated keywords (default: from the triple).",
        max_length=MAX_FIELD_CHARS,
    )] = None
    evidence: Annotated[str | None, optional_info(
        "string", str, "A thought's evidence: comma-separated node ids, e.g. 'node_3, node_7'.",
        pattern=NODE_IDS_PATTERN, max_length=MAX_FIELD_CHARS,
    )] = None
    created: When = None
    expiration: Annotated[IsoTime | None, optional_info(
        "string", datetime, "ISO time the memory expires (default: never)."
    )] = None
    expires_in: Annotated[Duration | None, optional_info(
        "string", Duration, "How long after it was made the memory expires: seconds (a number) "
        "or a duration such as '30d', '12h', '90m', '45s' (default: never; not with "
        "expiration).", pattern=DURATION_PATTERN, max_length=MAX_DURATION_CHARS,
    )] = None
    supersedes: Annotated[str | None, optional_info(
        "string", str, "The memories this one corrects: comma-separated node ids, e.g. "
        "'node_3'; retrieval leaves them out from then on.", pattern=NODE_IDS_PATTERN,
        max_length=MAX_FIELD_CHARS,
    )] = None
    conversation: Annotated[str | None, name_info(
        "The conversation this memory is a turn of (any id, e.g. a session, "
        "not blank, no control character); a turn is embedded with the turns before it.",
    )] = None
    speaker: Annotated[str | None, name_info(
        "Who said the turn (not blank, no control character).",
    )] = None

    @field_validator("description")
    @classmethod
    def _description(cls, value: str) -> str:
        return not_blank(value)

    def as_input(self) -> dict[str, Any]:
        """The item as :meth:`~langchain_genmem.MemoryStream.add_many` takes it."""
        item: dict[str, Any] = {
            "type": self.type,
            "description": self.description,
            "poignancy": self.poignancy,
            "subject": self.subject,
            "predicate": self.predicate or "",
            "object": self.object or "",
            "keywords": split_list(self.keywords),
            "created": self.created,
            "expiration": self.expiration,
            "conversation": self.conversation,
            "speaker": self.speaker,
        }
        evidence = split_list(self.evidence)
        if evidence:
            item["evidence"] = evidence
        item.update(self.lifecycle())
        return item

    def lifecycle(self) -> dict[str, Any]:
        """``expires_in`` and ``supersedes``, when given, as the library takes them."""
        out: dict[str, Any] = {}
        if self.expires_in is not None:
            out["expires_in"] = self.expires_in
        if self.supersedes is not None:
            out["supersedes"] = split_list(self.supersedes)
        return out


class MemoryRequest(MemoryItem):
    """One memory for one persona."""

    persona_name: PersonaName


def _json_text(value: Any) -> Any:
    """An array given as its JSON text (what a tool that passes only strings sends), parsed."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError as e:
        msg = f"expected a JSON array of memories, or its JSON text ({e})"
        raise ValueError(msg) from e


def _bounded_text(items: list[MemoryItem]) -> list[MemoryItem]:
    """The batch, if its descriptions hold at most :data:`MAX_BATCH_CHARS` characters."""
    total = sum(len(item.description) for item in items)
    if total > MAX_BATCH_CHARS:
        raise PydanticCustomError(
            "batch_too_long", "the descriptions hold {total} characters; a batch embeds at "
            "most {most} (send it in smaller batches)",
            {"total": f"{total:,}", "most": f"{MAX_BATCH_CHARS:,}"})
    return items


class MemoryBatchRequest(Request):
    """Several memories for one persona, written all or nothing."""

    persona_name: PersonaName
    memories: Annotated[
        list[MemoryItem],
        BeforeValidator(_json_text),
        Field(min_length=1, max_length=MAX_BATCH, description="The memories, oldest first: a "
              "JSON array of objects with the fields of add_memory (without persona_name), "
              "or that array's JSON text; their descriptions at most "
              f"{MAX_BATCH_CHARS:,} characters in all."),
        AfterValidator(lambda items: _bounded_text(items)),
    ]
