"""The service's requests and replies, and the limits every input is held to.

Request bodies are flat objects of plain strings, numbers and booleans, so that Dify's
custom-tool importer (which reads each top-level property of a JSON body as one tool input,
resolves ``$ref`` one level only and reads ``anyOf`` as a string) turns each into a typed
input. An optional number is declared as a plain ``number`` in the schema and accepts an
explicit ``null`` (Dify sends ``null`` for an input left empty). Lists a caller may give in
one field (keywords, evidence) are comma-separated text; only ``/memories/batch`` takes an
array. Dify's importer makes that array a text input and its runner parses the text as JSON
before it sends the request; a client that sends the JSON text itself (a tool that passes
only strings) is read the same way.

Replies follow the Dify workflow's retrieval contract: ``retrieved_nodes`` (each with ``score`` and
the normalised ``recency``, ``relevance`` and ``importance``, and the parts of the relevance:
normalised ``dense`` and ``lexical``, raw ``cosine`` and ``bm25``), ``accessed_ids``,
``status`` (``ok``, ``no_candidates`` or ``error``), ``message`` and ``debug``.
"""

from __future__ import annotations

import functools
import json
import re
from datetime import datetime, timezone
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)
from pydantic_core import PydanticCustomError

from langchain_genmem.core.modes import (
    DECAY,
    DEFAULT_RECENCY_MODE,
    DEFAULT_RELEVANCE_MODE,
    LEXICAL_WEIGHT,
    POIGNANCY,
    RECENCY,
    RELEVANCE,
    TIME_IN_QUERY,
    RecencyMode,
    RelevanceMode,
    TimeInQuery,
    describe,
)
from langchain_genmem.core.nodes import TYPE_CHOICES, NodeType, node_number_or_none
from langchain_genmem.core.recall_sizes import RECALL_K
from langchain_genmem.core.state import DEFAULT_LEXICAL_WEIGHT, DEFAULT_RECENCY_DECAY
from langchain_genmem.core.validation import K_MIN, PERSONA_NAME_MAX
from langchain_genmem.memory.expiry import FORMS, lifetime
from langchain_genmem.numerics.candidate_filter import make_filter
from langchain_genmem.retrieval.presets import Preset, preset_options

# ---------------------------------------------------------------------------- limits

MAX_PERSONA_CHARS = PERSONA_NAME_MAX
"""Longest persona name: the library's rule (``core.validation.persona_name``)."""
MAX_TEXT_CHARS = 4000
"""Longest description or focal text."""
MAX_FIELD_CHARS = 500
"""Longest subject, predicate, object, keyword list or evidence list."""
MAX_TOP_K = 200
"""Most memories one retrieval returns."""
MAX_BATCH = 500
"""Most memories one ``/memories/batch`` call adds."""
MAX_BATCH_CHARS = 100_000
"""Most characters of descriptions one ``/memories/batch`` call embeds: 500 memories of 4,000
characters kept both cores busy for over ten minutes."""
MAX_FORGET_IDS = 500
"""Most node ids one ``/forget`` call names."""
MAX_IDS_CHARS = 10_000
"""Longest list of node ids, as comma-separated text (500 ids of up to 19 characters)."""
MAX_DURATION_CHARS = 64
"""Longest ``expires_in`` text, e.g. ``'1d12h'`` (seconds given as a number: their text)."""
MAX_WEIGHT = 1000.0
"""Largest retrieval weight."""
MAX_BODY_BYTES = 4 * 1024 * 1024
"""Largest request body (413 beyond it)."""

LIMITS: dict[str, float] = {
    "persona_name characters": MAX_PERSONA_CHARS,
    "description / focal_text characters": MAX_TEXT_CHARS,
    "subject / predicate / object / keywords / evidence characters": MAX_FIELD_CHARS,
    "top_k and limit": MAX_TOP_K,
    "memories per batch": MAX_BATCH,
    "description characters per batch": MAX_BATCH_CHARS,
    "node ids per forget": MAX_FORGET_IDS,
    "node_ids characters": MAX_IDS_CHARS,
    "expires_in characters": MAX_DURATION_CHARS,
    "weights": MAX_WEIGHT,
    "request body bytes": MAX_BODY_BYTES,
}
"""Every limit, as the README and ``GET /healthz`` state them."""

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

_SPLIT = re.compile(r"[,，、;；\n]")


_SEP = r"[,，、;；\n]"
_GAP = r"[,，、;；\s]*"
NAME_PATTERN = r"^(?=[\s\S]*\S)[^\u0000-\u001f\u007f-\u009f]+$"
"""A persona, conversation or speaker name: not blank, no control character (the library's
rule, :func:`~langchain_genmem.core.validation.persona_name`)."""
NODE_IDS_PATTERN = rf"^{_GAP}node_[1-9][0-9]*(\s*{_SEP}{_GAP}node_[1-9][0-9]*)*{_GAP}$"
"""Node ids, each ``node_N`` (N from 1), separated by commas (also ``，``, ``、``, ``;``)."""
TYPES_PATTERN = rf"^{_GAP}(event|thought|chat)(\s*{_SEP}{_GAP}(event|thought|chat))*{_GAP}$"
"""Memory types, each ``event``, ``thought`` or ``chat``, separated as node ids are."""
NOT_BLANK_PATTERN = r"\S"
"""A text with a character that is not a space."""


def _optional(json_type: str, inner: Any, description: str, pattern: str | None = None,
              **bounds: float) -> Any:
    """An optional field shown as a plain type (no ``anyOf``) that accepts ``null``.

    A ``Literal`` inner type is listed as the schema's ``enum`` (still a plain string);
    ``pattern`` states, in the schema only, a rule the field's validation enforces with its
    own words.
    """
    names = {"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "max_length": "maxLength"}
    schema: dict[str, Any] = {"type": json_type, "description": description}
    if pattern is not None:
        schema["pattern"] = pattern
    schema.update({names[k]: v for k, v in bounds.items()})
    if get_origin(inner) is Literal:
        schema["enum"] = list(get_args(inner))
    if json_type == "string" and inner is datetime:
        schema["format"] = "date-time"
    return Annotated[
        Annotated[inner, Field(**bounds)] | None,
        Field(description=description),
        WithJsonSchema(schema),
    ]


PersonaName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_PERSONA_CHARS,
        description="The agent whose memory this is, e.g. 'Isabella Rodriguez' or '伊莎贝拉' "
        "(not blank, no control character).",
        json_schema_extra={"pattern": NAME_PATTERN},
    ),
]
Weight = _optional(
    "number", float, "Weight of this component (default: the persona's own, 1.0 unless changed).",
    ge=0.0, le=MAX_WEIGHT,
)
Decay = _optional(
    "number", float, f"Recency decay per hour (or per rank), in {DECAY.text()} (default: the "
    f"persona's, {DEFAULT_RECENCY_DECAY} unless changed).", **DECAY.field(),
)
Poignancy = _optional(
    "number", float, f"Importance from {POIGNANCY.low:g} (mundane, e.g. brushing teeth) to "
    f"{POIGNANCY.high:g} (poignant, e.g. a break-up); leave empty to let the server's chat model "
    "rate it (required when the server has no chat model).", **POIGNANCY.field(),
)
When = _optional(
    "string", datetime, "ISO time, e.g. '2023-02-13 18:00:00' (default: now).",
)
ShortText = _optional("string", str, "", max_length=MAX_FIELD_CHARS)
Since = _optional(
    "string", datetime, "Only memories created at or after this ISO time, e.g. '2023-02-13' "
    "(its midnight) or '2023-02-13 07:00:00' (default: no limit).",
)
Until = _optional(
    "string", datetime, "Only memories created before this ISO time, which must come after "
    "created_after; with created_after '2023-02-13' and created_before '2023-02-14' that day "
    "(default: no limit).",
)
Kinds = _optional(
    "string", str, f"Only memories of these types, comma-separated, each {TYPE_CHOICES}, e.g. "
    "'event,thought' (default: events and thoughts, the original's candidates; chats only "
    "when named).", pattern=TYPES_PATTERN, max_length=MAX_FIELD_CHARS,
)
Relevance = _optional(
    "string", RelevanceName, f"The relevance signal: {describe(RELEVANCE)} (default: the "
    f"persona's setting, {DEFAULT_RELEVANCE_MODE} unless changed).",
)
LexicalWeight = _optional(
    "number", float, "Share of the lexical signal in the hybrid relevance, 0 (dense only) to 1 "
    f"(lexical only) (default: the persona's setting, {DEFAULT_LEXICAL_WEIGHT} unless changed).",
    **LEXICAL_WEIGHT.field(),
)
IdleFilter = _optional(
    "boolean", bool, "Leave out memories whose embedding key contains 'idle', as the original "
    "simulation does; false keeps them (e.g. 'the idle reactor') (default: the preset's, true "
    "for simulation, false for conversation).",
)
PresetField = Annotated[
    PresetName,
    Field(description="Defaults of the scoring fields left empty: 'simulation' (the original's "
          "weights, or the persona's settings) or 'conversation' (measured best for chat "
          "memories: hybrid relevance alone, the time a question names narrows the "
          "candidates, idle memories kept)."),
]
TimeInQueryField = _optional(
    "string", TimeInQueryName, f"What a time the focal text names does: {describe(TIME_IN_QUERY)} "
    "(default: the preset's).",
)
MinPoignancy = _optional(
    "number", float, "Only memories at least this important, 1..10 (default: no limit).",
    ge=0.0, le=MAX_WEIGHT,
)



def _seconds_as_text(value: Any) -> Any:
    """A number of seconds as its text (a duration text as it is); a boolean is refused."""
    if isinstance(value, bool):
        msg = f"expected {FORMS}"
        raise ValueError(msg)
    return repr(value) if isinstance(value, int | float) else value


def _a_lifetime(value: str) -> str:
    """The text, once :func:`~langchain_genmem.memory.expiry.lifetime` read it as one."""
    lifetime(value)
    return value


_DurationText = Annotated[str, Field(max_length=MAX_DURATION_CHARS)]
Duration = Annotated[
    _DurationText,
    BeforeValidator(_seconds_as_text, json_schema_input_type=_DurationText | float),
    AfterValidator(_a_lifetime),
]
"""A memory's lifetime as every front takes it (``expires_in``): seconds (a number) or a
duration text of at most :data:`MAX_DURATION_CHARS` characters, kept as its text. The length
is checked before the text is read as a duration."""


def _not_blank(value: str) -> str:
    if not value.strip():
        msg = "must not be blank"
        raise ValueError(msg)
    return value


def _known_types(value: str | None) -> str | None:
    """Comma-separated memory types, checked (an unknown type raises, naming ``types``)."""
    make_filter(types=split_list(value) or None)
    return value


def split_list(text: str | None) -> list[str] | None:
    """Comma-separated text as a list (also ``，``, ``、``, ``;`` and new lines).

    Args:
        text: the text, or None.

    Returns:
        The non-empty items, stripped; None for None.
    """
    if text is None:
        return None
    return [x.strip() for x in _SPLIT.split(text) if x.strip()]


def _kind(annotation: Any) -> str | None:
    """``"bool"`` or ``"number"`` for a field that takes only that (or null), else None."""
    options = [a for a in get_args(annotation) if a is not type(None)] \
        if get_origin(annotation) in (Union, UnionType) else [annotation]
    options = [get_args(a)[0] if get_origin(a) is Annotated else a for a in options]
    if options and all(a is bool for a in options):
        return "bool"
    if options and all(a in (int, float) for a in options):
        return "number"
    return None


@functools.cache
def _field_kind(model: type[BaseModel], name: str) -> str | None:
    """:func:`_kind` of a request field, worked out once (every request asks again)."""
    return _kind(model.model_fields[name].annotation)


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_number(cls, value: Any, info: ValidationInfo) -> Any:
        """Refuse a boolean for a number and a number for a boolean.

        ``{"limit": false}`` or ``{"include_superseded": 0}`` was read as 0 or false.
        """
        if value is None or info.field_name is None:
            return value
        kind = _field_kind(cls, info.field_name)
        if kind == "number" and isinstance(value, bool):
            raise PydanticCustomError("number_type", "expected a number, got {got}",
                                      {"got": json.dumps(value)})
        if kind == "bool" and not isinstance(value, bool):
            raise PydanticCustomError("bool_type", "expected true or false, got {got}",
                                      {"got": json.dumps(value, default=str)[:40]})
        return value


# ---------------------------------------------------------------------------- retrieval


class RetrieveRequest(_Request):
    """The Dify workflow's retrieval inputs: one focal text, every memory scored."""

    persona_name: PersonaName
    focal_text: Annotated[
        str,
        Field(
            min_length=1,
            max_length=MAX_TEXT_CHARS,
            description="What to remember things about: a question, an event or a topic.",
        ),
    ]
    top_k: Annotated[
        int, Field(ge=K_MIN, le=MAX_TOP_K, description="How many memories to return.")
    ] = RECALL_K
    recency_w: Weight = None
    relevance_w: Weight = None
    importance_w: Weight = None
    recency_decay: Decay = None
    recency_mode: Annotated[
        RecencyModeName,
        Field(
            description=f"{describe(RECENCY)}."
        ),
    ] = DEFAULT_RECENCY_MODE
    relevance: Relevance = None
    lexical_weight: LexicalWeight = None
    idle_filter: IdleFilter = None
    time_in_query: TimeInQueryField = None
    preset: PresetField = "simulation"
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
        return _not_blank(value)

    @field_validator("types")
    @classmethod
    def _types(cls, value: str | None) -> str | None:
        return _known_types(value)

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


class MemoryItem(_Request):
    """One memory to add, as flat fields."""

    type: Annotated[NodeKind, Field(description=f"{TYPE_CHOICES}.")] = "event"
    description: Annotated[
        str,
        Field(min_length=1, max_length=MAX_TEXT_CHARS, description="The memory in words."),
    ]
    poignancy: Poignancy = None
    subject: _optional(
        "string", str, "Triple subject (default: the persona).", max_length=MAX_FIELD_CHARS
    ) = None
    predicate: _optional(
        "string", str, "Triple predicate, e.g. 'is studying'.", max_length=MAX_FIELD_CHARS
    ) = None
    object: _optional(
        "string", str, "Triple object, e.g. 'physics'.", max_length=MAX_FIELD_CHARS
    ) = None
    keywords: _optional(
        "string", str, "Comma-separated keywords (default: from the triple).",
        max_length=MAX_FIELD_CHARS,
    ) = None
    evidence: _optional(
        "string", str, "A thought's evidence: comma-separated node ids, e.g. 'node_3, node_7'.",
        pattern=NODE_IDS_PATTERN, max_length=MAX_FIELD_CHARS,
    ) = None
    created: When = None
    expiration: _optional(
        "string", datetime, "ISO time the memory expires (default: never)."
    ) = None
    expires_in: _optional(
        "string", Duration, "How long after it was made the memory expires: seconds (a number) "
        "or a duration such as '30d', '12h', '90m', '45s' (default: never; not with "
        "expiration).", pattern=NOT_BLANK_PATTERN, max_length=MAX_DURATION_CHARS,
    ) = None
    supersedes: _optional(
        "string", str, "The memories this one corrects: comma-separated node ids, e.g. "
        "'node_3'; retrieval leaves them out from then on.", pattern=NODE_IDS_PATTERN,
        max_length=MAX_FIELD_CHARS,
    ) = None
    conversation: _optional(
        "string", str, "The conversation this memory is a turn of (any id, e.g. a session, "
        "not blank, no control character); a turn is embedded with the turns before it.",
        pattern=NAME_PATTERN, max_length=PERSONA_NAME_MAX,
    ) = None
    speaker: _optional(
        "string", str, "Who said the turn (not blank, no control character).",
        pattern=NAME_PATTERN, max_length=PERSONA_NAME_MAX,
    ) = None

    @field_validator("description")
    @classmethod
    def _description(cls, value: str) -> str:
        return _not_blank(value)

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


class MemoryBatchRequest(_Request):
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


class KeywordRequest(_Request):
    """The original's keyword retrieval for a perceived event (subject, predicate, object)."""

    persona_name: PersonaName
    subject: Annotated[str, Field(max_length=MAX_FIELD_CHARS, description="Event subject.")]
    predicate: Annotated[
        str, Field(max_length=MAX_FIELD_CHARS, description="Event predicate.")
    ] = ""
    object: Annotated[str, Field(max_length=MAX_FIELD_CHARS, description="Event object.")] = ""
    limit: Annotated[
        int, Field(ge=K_MIN, le=MAX_TOP_K,
                   description="Most memories listed per type, newest first.")
    ] = RECALL_K


class KeywordResponse(BaseModel):
    """Events and thoughts indexed under the subject, predicate or object, newest first."""

    persona_name: str
    status: Status
    event_count: int
    thought_count: int
    events: list[Memory]
    thoughts: list[Memory]


# ---------------------------------------------------------------------------- reflection


class ReflectRequest(_Request):
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

SELECTORS = (
    "created_after", "created_before", "types", "conversation", "speaker", "text", "expired",
)
"""The fields of a forget that select memories besides their ids."""


class ForgetRequest(_Request):
    """Forget memories of one persona: its node ids, or those a selector picks (both: AND)."""

    persona_name: PersonaName
    node_ids: _optional(
        "string", str, f"The memories to forget: comma-separated node ids, e.g. 'node_3, "
        f"node_7' (at most {MAX_FORGET_IDS}). With a selector, only those of them it picks.",
        pattern=NODE_IDS_PATTERN, max_length=MAX_IDS_CHARS,
    ) = None
    created_after: _optional(
        "string", datetime, "Forget only memories created at or after this ISO time, e.g. "
        "'2023-02-13' (its midnight).",
    ) = None
    created_before: _optional(
        "string", datetime, "Forget only memories created before this ISO time (after "
        "created_after).",
    ) = None
    types: _optional(
        "string", str, f"Forget only memories of these types, comma-separated, each "
        f"{TYPE_CHOICES} (default: every type, chats too).", pattern=TYPES_PATTERN,
        max_length=MAX_FIELD_CHARS,
    ) = None
    conversation: _optional(
        "string", str, "Forget only the turns of this conversation (its id, exactly).",
        pattern=NAME_PATTERN, max_length=PERSONA_NAME_MAX,
    ) = None
    speaker: _optional(
        "string", str, "Forget only what this speaker said (exactly).",
        pattern=NAME_PATTERN, max_length=PERSONA_NAME_MAX,
    ) = None
    text: _optional(
        "string", str, "Forget only memories whose description contains this text (any case).",
        max_length=MAX_TEXT_CHARS,
    ) = None
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
        return _known_types(value)

    @field_validator("conversation", "speaker", "text")
    @classmethod
    def _given(cls, value: str | None) -> str | None:
        return None if value is None else _not_blank(value)

    def ids(self) -> list[str]:
        """The node ids given, in order, each once."""
        return list(dict.fromkeys(split_list(self.node_ids) or []))

    def selectors(self) -> dict[str, Any]:
        """The selectors given, as :meth:`~langchain_genmem.MemoryStream.forget` takes them."""
        given = {name: getattr(self, name) for name in SELECTORS}
        given["types"] = split_list(self.types) or None
        given["expired"] = self.expired or None
        return {name: value for name, value in given.items() if value is not None}


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
