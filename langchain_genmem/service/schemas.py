"""The service's requests and replies, and the limits every input is held to.

The requests are the library's declarations of the operations
(:mod:`langchain_genmem.operations`: remember, recall, forget), named here as the service
has always named them; the replies are declared here. Only ``/memories/batch`` takes an
array. Dify's importer makes that array a text input and its runner parses the text as JSON
before it sends the request; a client that sends the JSON text itself (a tool that passes
only strings) is read the same way.

Replies follow the Dify workflow's retrieval contract: ``retrieved_nodes`` (each with ``score`` and
the normalised ``recency``, ``relevance`` and ``importance``, and the parts of the relevance:
normalised ``dense`` and ``lexical``, raw ``cosine`` and ``bm25``), ``accessed_ids``,
``status`` (``ok``, ``no_candidates`` or ``error``), ``message`` and ``debug``.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field

from langchain_genmem.core.modes import RecencyMode, RelevanceMode, TimeInQuery
from langchain_genmem.core.nodes import NodeType
from langchain_genmem.operations.fields import (  # noqa: F401 - the service's names for them
    BODY_TIMEOUT,
    DURATION_PATTERN,
    HEADER_TIMEOUT,
    LIMITS,
    MAX_BATCH,
    MAX_BATCH_CHARS,
    MAX_BODY_BYTES,
    MAX_DURATION_CHARS,
    MAX_FIELD_CHARS,
    MAX_FORGET_IDS,
    MAX_IDS_CHARS,
    MAX_PERSONA_CHARS,
    MAX_TEXT_CHARS,
    MAX_TOP_K,
    MAX_WEIGHT,
    NAME_PATTERN,
    NO_NUL_PATTERN,
    NODE_ID_PATTERN,
    NODE_IDS_PATTERN,
    NOT_BLANK_PATTERN,
    TYPES_PATTERN,
    Duration,
    PersonaName,
    Request,
    split_list,
)
from langchain_genmem.operations.forget import SELECTORS, ForgetRequest  # noqa: F401
from langchain_genmem.operations.recall import KeywordRequest, RetrieveRequest  # noqa: F401
from langchain_genmem.operations.remember import (  # noqa: F401
    MemoryBatchRequest,
    MemoryItem,
    MemoryRequest,
)
from langchain_genmem.retrieval.presets import Preset


def _utc(value: datetime) -> datetime:
    """A stored time with its zone: the store keeps UTC (naive inputs are taken as UTC)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


Instant = Annotated[datetime, AfterValidator(_utc)]
"""A time in a reply, always with its zone (``...Z``): an input given at ``+05:00`` comes back
as the same instant in UTC."""

NodeKind = NodeType
RecencyModeName = RecencyMode  # the modes are core.modes'; these names stay importable
RelevanceName = RelevanceMode
TimeInQueryName = TimeInQuery
PresetName = Preset
Status = Literal["ok", "no_candidates", "error"]

# ---------------------------------------------------------------------------- retrieval


class RetrievedNode(BaseModel):
    """One retrieved memory: its fields, its score and the three normalised components."""

    id: str = Field(description="The memory's id (the Dify workflow's `id`; same as node_id).")
    node_id: str
    type: NodeKind
    created_at: Instant
    last_accessed: Instant
    description: str
    poignancy: float
    subject: str
    predicate: str
    object: str
    keywords: list[str]
    depth: int
    score: float = Field(description="Weighted sum of the normalised components.")
    recency: float = Field(description="Normalised recency, 0..1.")
    relevance: float = Field(
        description="Normalised relevance to the focal text, 0..1: the chosen signal (dense, "
        "lexical, or their hybrid)."
    )
    importance: float = Field(description="Normalised importance (poignancy), 0..1.")
    dense: float | None = Field(
        None, description="The dense part of the relevance (normalised cosine), 0..1."
    )
    lexical: float | None = Field(
        None, description="The lexical part of the relevance (normalised BM25), 0..1."
    )
    cosine: float | None = Field(None, description="Raw cosine similarity to the focal text.")
    bm25: float | None = Field(None, description="Raw BM25 score of the focal text's words.")


class RetrieveDebug(BaseModel):
    """What one retrieval looked at."""

    total_candidates: int
    retrieved_count: int
    min_score: float
    max_score: float


class RetrieveResponse(BaseModel):
    """The Dify workflow's retrieval outputs."""

    retrieved_nodes: list[RetrievedNode]
    accessed_ids: list[str] = Field(description="Ids whose last_accessed was set to now.")
    status: Status
    message: str
    debug: RetrieveDebug


# ---------------------------------------------------------------------------- writing


class Memory(BaseModel):
    """A stored memory."""

    node_id: str
    type: NodeKind
    depth: int
    created: Instant
    last_accessed: Instant
    expiration: Instant | None
    poignancy: float
    description: str
    subject: str
    predicate: str
    object: str
    keywords: list[str]
    evidence: list[str]
    conversation: str | None = None
    speaker: str | None = None


class AddResponse(BaseModel):
    """What was written."""

    persona_name: str
    count: int
    memories: list[Memory]


# ---------------------------------------------------------------------------- keyword retrieval


class KeywordResponse(BaseModel):
    """Events and thoughts indexed under the subject, predicate or object, newest first."""

    persona_name: str
    status: Status
    event_count: int
    thought_count: int
    events: list[Memory]
    thoughts: list[Memory]


# ---------------------------------------------------------------------------- reflection


class ReflectRequest(Request):
    """Run the reflection graph on a persona."""

    persona_name: PersonaName
    force: Annotated[
        bool, Field(description="Reflect even if the importance trigger has not fired.")
    ] = False


class ReflectResponse(BaseModel):
    """What the reflection did (see :class:`~langchain_genmem.reflection.ReflectionOutput`)."""

    persona_name: str
    status: str = Field(
        description="not_due, no_questions, no_insights or reflected (thoughts written)."
    )
    focal_points: list[str]
    thoughts: list[Memory]
    dropped: int = Field(description="Insights or questions left out (see the logs).")
    reasons: list[str] = Field(
        default_factory=list,
        description="Why questions or insights were left out or calls skipped, one line each "
        "(a reflection that wrote nothing says why here).",
    )
    llm_calls: int


# ---------------------------------------------------------------------------- forgetting

class ForgetResponse(BaseModel):
    """What a forget did (or, for a dry run, would do)."""

    persona_name: str
    dry_run: bool
    count: int = Field(description="How many memories were forgotten now.")
    forgotten: list[str] = Field(
        description="The node ids forgotten now, the derived thoughts included."
    )
    derived: list[str] = Field(
        description="Those forgotten only because their evidence cites a forgotten memory."
    )
    kept: list[str] = Field(
        description="Thoughts kept (keep_derived) whose evidence lost forgotten ids."
    )
    rekeyed: list[str] = Field(
        default_factory=list,
        description="Later conversation turns whose embedded text quoted a forgotten turn, "
        "embedded again without it.",
    )
    already_forgotten: list[str] = Field(
        description="Node ids asked for that were forgotten before: nothing more to do."
    )
    remaining: int = Field(description="How many memories the persona has left.")
    erased: bool | None = Field(
        default=None,
        description="Whether the forgotten memories were erased from the store's own files "
        "(an embedded folder): false when they were only deleted, as Chroma deletes (see "
        "erasure); null for a Chroma server or PostgreSQL, whose files are their own, a dry "
        "run, or nothing forgotten.",
    )
    erasure: str | None = Field(
        default=None, description="Why the memories were not erased, when they were not."
    )


# ---------------------------------------------------------------------------- personas


class PersonaList(BaseModel):
    """The personas the caller's key may see."""

    personas: list[str]


class PersonaStats(BaseModel):
    """Counts, reflection trigger and settings of one persona."""

    persona: str
    memories: int
    types: dict[str, int]
    depths: dict[str, int]
    keyword_strength: dict[str, dict[str, int]]
    trigger: dict[str, Any]
    settings: dict[str, float | str] = Field(
        description="Weights, decay, relevance_mode (dense, lexical or hybrid) and lexical_weight."
    )
    vector_size: int | None
    clock: Instant


class Health(BaseModel):
    """Liveness, the input limits and the open personas."""

    status: Literal["ok"]
    version: str
    limits: dict[str, float]
    open_personas: int = Field(description="Persona streams open in the server now.")
    max_open_personas: int = Field(
        description="The most kept open; the least recently used is closed beyond it."
    )


class ErrorReply(BaseModel):
    """An error: what was wrong, and the field when there is one."""

    status: Literal["error"] = "error"
    message: str
    field: str | None = None
