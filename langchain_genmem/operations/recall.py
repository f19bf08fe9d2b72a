"""Recall, declared once: weighted retrieval and the original's keyword retrieval.

The models: :class:`RetrieveRequest` and :class:`KeywordRequest`.

``POST /retrieve`` and ``POST /keyword-retrieve`` take these models as their bodies; the MCP
tools ``recall`` and ``recall_keywords`` take their arguments from them (see
:mod:`~langchain_genmem.operations.derive`), and the command line's ``search`` and
``keywords`` their bounds and defaults.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, field_validator

from langchain_genmem.core.modes import DEFAULT_RECENCY_MODE, RECENCY, RecencyMode, describe
from langchain_genmem.core.recall_sizes import RECALL_K
from langchain_genmem.core.validation import K_MIN
from langchain_genmem.operations.fields import (
    MAX_FIELD_CHARS,
    MAX_TEXT_CHARS,
    MAX_TOP_K,
    Decay,
    IdleFilter,
    Kinds,
    LexicalWeight,
    MinPoignancy,
    PersonaName,
    PresetField,
    Relevance,
    Request,
    Since,
    TimeInQueryField,
    Until,
    Weight,
    known_types,
    not_blank,
    split_list,
    text_info,
)
from langchain_genmem.retrieval.presets import DEFAULT_PRESET, preset_options


class RetrieveRequest(Request):
    """The Dify workflow's retrieval inputs: one focal text, every memory scored."""

    persona_name: PersonaName
    focal_text: Annotated[str, text_info(
        "What to remember things about: a question, an event or a topic (not blank).",
        MAX_TEXT_CHARS, min_length=1,
    )]
    top_k: Annotated[
        int, Field(ge=K_MIN, le=MAX_TOP_K, description="How many memories to return.")
    ] = RECALL_K
    recency_w: Weight = None
    relevance_w: Weight = None
    importance_w: Weight = None
    recency_decay: Decay = None
    recency_mode: Annotated[RecencyMode, Field(description=f"{describe(RECENCY)}.")] = \
        DEFAULT_RECENCY_MODE
    relevance: Relevance = None
    lexical_weight: LexicalWeight = None
    idle_filter: IdleFilter = None
    time_in_query: TimeInQueryField = None
    preset: PresetField = DEFAULT_PRESET
    created_after: Since = None
    created_before: Until = None
    types: Kinds = None
    min_poignancy: MinPoignancy = None
    include_superseded: Annotated[
        bool, Field(description="Score memories a newer memory supersedes (corrects) too; by "
                    "default they are left out.")
    ] = False

    @field_validator("focal_text")
    @classmethod
    def _focal(cls, value: str) -> str:
        return not_blank(value)

    @field_validator("types")
    @classmethod
    def _types(cls, value: str | None) -> str | None:
        return known_types(value)

    def scoring(self, *, in_database: bool = False) -> dict[str, Any]:
        """How the request scores, as retriever arguments: its preset's, then the fields given.

        Args:
            in_database: the retrieval ranks in the database (see
                :func:`~langchain_genmem.retrieval.presets.preset_options`).

        Returns:
            ``k``, the recency mode, weights and decay, the relevance signal, its lexical
            weight, the idle filter and ``time_in_query``; what neither sets is the
            persona's own.
        """
        return preset_options(self.preset, {
            "k": self.top_k,
            "recency_mode": self.recency_mode,
            "recency_decay": self.recency_decay,
            "recency_w": self.recency_w,
            "relevance_w": self.relevance_w,
            "importance_w": self.importance_w,
            "relevance": self.relevance,
            "lexical_weight": self.lexical_weight,
            "idle_filter": self.idle_filter,
            "time_in_query": self.time_in_query,
        }, in_database=in_database)

    def filters(self) -> dict[str, Any]:
        """The candidate filter of the request, as retriever arguments.

        Returns:
            ``created_after``, ``created_before``, ``types`` (split), ``min_poignancy`` and
            ``include_superseded``.
        """
        return {
            "created_after": self.created_after,
            "created_before": self.created_before,
            "types": split_list(self.types) or None,
            "min_poignancy": self.min_poignancy,
            "include_superseded": self.include_superseded,
        }


class KeywordRequest(Request):
    """The original's keyword retrieval for a perceived event (subject, predicate, object)."""

    persona_name: PersonaName
    subject: Annotated[str, text_info("Event subject.", MAX_FIELD_CHARS)]
    predicate: Annotated[str, text_info("Event predicate.", MAX_FIELD_CHARS)] = ""
    object: Annotated[str, text_info("Event object.", MAX_FIELD_CHARS)] = ""
    limit: Annotated[
        int, Field(ge=K_MIN, le=MAX_TOP_K,
                   description="Most memories listed per type, newest first.")
    ] = RECALL_K
