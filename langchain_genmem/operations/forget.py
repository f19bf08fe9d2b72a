"""Forget, declared once: node ids and selectors, a dry run, derived thoughts kept or not.

The model: :class:`ForgetRequest`.

``POST /forget`` takes this model as its body (``DELETE /personas/{name}`` forgets a whole
persona); the MCP tool ``forget`` takes its arguments from it (see
:mod:`~langchain_genmem.operations.derive`). :data:`SELECTORS` names the fields that select
memories, as :meth:`~langchain_genmem.MemoryStream.forget` takes them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import Field, field_validator

from langchain_genmem.core.nodes import TYPE_CHOICES, node_number_or_none
from langchain_genmem.operations.fields import (
    MAX_FIELD_CHARS,
    MAX_FORGET_IDS,
    MAX_IDS_CHARS,
    MAX_TEXT_CHARS,
    NODE_IDS_PATTERN,
    NOT_BLANK_PATTERN,
    TYPES_PATTERN,
    IsoTime,
    PersonaName,
    Request,
    known_types,
    name_info,
    not_blank,
    optional_info,
    split_list,
)

SELECTORS = (
    "created_after", "created_before", "types", "conversation", "speaker", "text", "expired",
)
"""The fields of a forget that select memories besides their ids."""


class ForgetRequest(Request):
    """Forget memories of one persona: its node ids, or those a selector picks (both: AND)."""

    persona_name: PersonaName
    node_ids: Annotated[str | None, optional_info(
        "string", str, f"The memories to forget: comma-separated node ids, e.g. 'node_3, "
        f"node_7' (at most {MAX_FORGET_IDS}). With a selector, only those of them it picks.",
        pattern=NODE_IDS_PATTERN, max_length=MAX_IDS_CHARS,
    )] = None
    created_after: Annotated[IsoTime | None, optional_info(
        "string", datetime, "Forget only memories created at or after this ISO time, e.g. "
        "'2023-02-13' (its midnight).",
    )] = None
    created_before: Annotated[IsoTime | None, optional_info(
        "string", datetime, "Forget only memories created before this ISO time (after "
        "created_after).",
    )] = None
    types: Annotated[str | None, optional_info(
        "string", str, f"Forget only memories of these types, comma-separated, each "
        f"{TYPE_CHOICES} (default: every type, chats too).", pattern=TYPES_PATTERN,
        max_length=MAX_FIELD_CHARS,
    )] = None
    conversation: Annotated[str | None, name_info(
        "Forget only the turns of this conversation (its id, exactly).",
    )] = None
    speaker: Annotated[str | None, name_info(
        "Forget only what this speaker said (exactly).",
    )] = None
    text: Annotated[str | None, optional_info(
        "string", str, "Forget only memories whose description contains this text (any case; "
        "not blank).", pattern=NOT_BLANK_PATTERN, max_length=MAX_TEXT_CHARS,
    )] = None
    expired: Annotated[
        bool, Field(description="Forget only memories expired at the persona's clock (their "
                    "expiration passed).")
    ] = False
    keep_derived: Annotated[
        bool, Field(description="Keep the thoughts whose evidence cites a forgotten memory "
                    "(their evidence loses its ids); by default they are forgotten too.")
    ] = False
    dry_run: Annotated[
        bool, Field(description="Only list what would be forgotten; forget nothing.")
    ] = False

    @field_validator("node_ids")
    @classmethod
    def _ids(cls, value: str | None) -> str | None:
        ids = split_list(value) or []
        if len(ids) > MAX_FORGET_IDS:
            msg = f"at most {MAX_FORGET_IDS} node ids per call, got {len(ids)}"
            raise ValueError(msg)
        bad = next((i for i in ids if node_number_or_none(i) is None), None)
        if bad is not None:
            msg = f"{bad!r} is not a node id (node_N, e.g. 'node_3')"
            raise ValueError(msg)
        return value

    @field_validator("types")
    @classmethod
    def _types(cls, value: str | None) -> str | None:
        return known_types(value)

    @field_validator("conversation", "speaker", "text")
    @classmethod
    def _given(cls, value: str | None) -> str | None:
        return None if value is None else not_blank(value)

    def ids(self) -> list[str]:
        """The node ids given, in order, each once."""
        return list(dict.fromkeys(split_list(self.node_ids) or []))

    def selectors(self) -> dict[str, Any]:
        """The selectors given, as :meth:`~langchain_genmem.MemoryStream.forget` takes them."""
        given = {name: getattr(self, name) for name in SELECTORS}
        given["types"] = split_list(self.types) or None
        given["expired"] = self.expired or None
        return {name: value for name, value in given.items() if value is not None}
