"""What the declared requests are made of: limits, field types, patterns and the base model.

Every front end reads an operation from one declaration (:mod:`.remember`, :mod:`.recall`,
:mod:`.forget`): its HTTP body is the model, the MCP tool's arguments and the command line's
bounds and defaults are derived from it (:mod:`.derive`). The fields are flat objects of plain
strings, numbers and booleans, so that Dify's custom-tool importer (which reads each
top-level property of a JSON body as one tool input, resolves ``$ref`` one level only and
reads ``anyOf`` as a string) turns each into a typed input. An optional number is declared as
a plain ``number`` in the schema and accepts an explicit ``null`` (Dify sends ``null`` for an
input left empty). Lists a caller may give in one field (keywords, evidence) are
comma-separated text; only a batch of memories takes an array.

Every rule a request enforces is stated in its JSON schema: lengths and bounds, and patterns
(:data:`NAME_PATTERN`, :data:`NODE_IDS_PATTERN`, :data:`TYPES_PATTERN`,
:data:`NOT_BLANK_PATTERN`, :data:`NO_NUL_PATTERN`); the rules between fields are said in the
fields' descriptions.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from datetime import datetime
from types import UnionType
from typing import Annotated, Any, Literal, TypedDict, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)
from pydantic.config import JsonDict
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError
from typing_extensions import Unpack

from langchain_genmem.core.modes import (
    DECAY,
    DEFAULT_RELEVANCE_MODE,
    LEXICAL_WEIGHT,
    POIGNANCY,
    RELEVANCE,
    TIME_IN_QUERY,
    RelevanceMode,
    TimeInQuery,
    describe,
)
from langchain_genmem.core.nodes import TYPE_CHOICES
from langchain_genmem.core.state import DEFAULT_LEXICAL_WEIGHT, DEFAULT_RECENCY_DECAY
from langchain_genmem.core.validation import PERSONA_NAME_MAX
from langchain_genmem.memory.expiry import FORMS, lifetime
from langchain_genmem.numerics.candidate_filter import ISO_EXAMPLE, make_filter
from langchain_genmem.retrieval.presets import Preset

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
HEADER_TIMEOUT = 10.0
"""Seconds a connection has to send a request's headers, once open or after a response
(closed beyond it)."""
BODY_TIMEOUT = 60.0
"""Seconds a request has to send its whole body (408 beyond it): 4 MB at about 70 KB/s."""



def limits(*, body_bytes: int = MAX_BODY_BYTES, header_seconds: float = HEADER_TIMEOUT,
           body_seconds: float = BODY_TIMEOUT) -> dict[str, float]:
    """Every limit, as the README and ``GET /healthz`` state them.

    Args:
        body_bytes: the largest request body the server takes.
        header_seconds: the header deadline the server runs with.
        body_seconds: the body deadline the server runs with.

    Returns:
        The limits by name.
    """
    return {
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
        "request body bytes": body_bytes,
        "header seconds": header_seconds,
        "body seconds": body_seconds,
    }


LIMITS = limits()
"""Every limit at its default (:func:`limits`)."""

_SEP = r"[,，、;；\n]"
_SPLIT = re.compile(_SEP)
_GAP = r"[,，、;；\s]*"
_NAME_CHAR = r"[^\u0000-\u001f\u007f-\u009f]"
NAME_PATTERN = rf"^{_NAME_CHAR}*[^\s\u0000-\u001f\u007f-\u009f]{_NAME_CHAR}*$"
"""A persona, conversation or speaker name: not blank, no control character (the library's
rule, :func:`~langchain_genmem.core.validation.persona_name`)."""
NODE_ID_PATTERN = r"^node_[1-9][0-9]*$"
"""One node id, ``node_N`` (N from 1)."""
NODE_IDS_PATTERN = rf"^{_GAP}node_[1-9][0-9]*(\s*{_SEP}{_GAP}node_[1-9][0-9]*)*{_GAP}$"
"""Node ids, each ``node_N`` (N from 1), separated by commas (also ``，``, ``、``, ``;``)."""
TYPES_PATTERN = rf"^{_GAP}(event|thought|chat)(\s*{_SEP}{_GAP}(event|thought|chat))*{_GAP}$"
"""Memory types, each ``event``, ``thought`` or ``chat``, separated as node ids are."""
NOT_BLANK_PATTERN = r"^[^\u0000]*[^\s\u0000][^\u0000]*$"
"""A text with a character that is not a space (and no NUL)."""
_NUMBER = r"[0-9]+(?:\.[0-9]+)?"
_NOT_ZERO = r"(?:[0-9]*[1-9][0-9]*(?:\.[0-9]+)?|[0-9]+\.[0-9]*[1-9][0-9]*)"
_UNIT = r"\s*[dhmsDHMS]\s*"
DURATION_PATTERN = (rf"^\s*(?:{_NOT_ZERO}\s*"
                    rf"|(?:{_NUMBER}{_UNIT})*{_NOT_ZERO}{_UNIT}(?:{_NUMBER}{_UNIT})*)$")
"""A lifetime as text: seconds, or parts such as ``30d``, ``12h``, ``1d12h`` (not zero)."""
NO_NUL_PATTERN = r"^[^\u0000]*$"
"""A free text: anything but NUL, which no store keeps (a request holding one is refused,
not silently changed)."""


def text_info(description: str, max_length: int, *, min_length: int = 0) -> FieldInfo:
    """A required free text's bounds, description and pattern, for ``Annotated[str, ...]``.

    At most ``max_length`` characters, stated with no NUL; one that must hold something
    (``min_length``) must not be blank either.

    Args:
        description: what the field holds.
        max_length: the most characters.
        min_length: the fewest characters.

    Returns:
        The field's bounds, description and stated pattern.
    """
    pattern = NOT_BLANK_PATTERN if min_length else NO_NUL_PATTERN
    return Field(min_length=min_length, max_length=max_length, description=description,
                 json_schema_extra={"pattern": pattern})


def name_info(description: str) -> FieldInfo:
    """An optional conversation or speaker name's bounds and stated rule (:data:`NAME_PATTERN`).

    For ``Annotated[str | None, name_info(...)]``; the names are held to the persona name's
    length.

    Args:
        description: what the field holds.

    Returns:
        The field's bounds, description and stated schema.
    """
    return optional_info("string", str, description, pattern=NAME_PATTERN,
                         max_length=PERSONA_NAME_MAX)


def iso_time(value: Any) -> Any:
    """A time given as text, read as ISO (a date is its midnight); other values as given.

    Raises:
        PydanticCustomError: a text that is not an ISO date or time, in words that say so.
    """
    if not isinstance(value, str):
        return value
    try:
        return datetime.fromisoformat(value.strip())
    except ValueError:
        shown = repr(value) if len(value) <= 60 else repr(value[:60]) + "…"
        raise PydanticCustomError(
            "iso_time", "{given} is not an ISO date or time (e.g. {example})",
            {"given": shown, "example": ISO_EXAMPLE}) from None


IsoTime = Annotated[datetime, BeforeValidator(iso_time)]
"""A time: a ``datetime``, or its ISO text read by :func:`iso_time` (a date is its midnight)."""


class Bounds(TypedDict, total=False):
    """The bounds of an optional field, as pydantic ``Field`` arguments (:func:`optional_info`).

    Attributes:
        gt: the value must be greater than this.
        ge: the value must be at least this.
        le: the value must be at most this.
        max_length: the text has at most this many characters.
    """

    gt: float
    ge: float
    le: float
    max_length: int


class _Stated:
    """A ``json_schema_extra`` that shows an optional field as its plain type, not ``anyOf``.

    Pydantic shows ``X | None`` as ``anyOf`` X or null; this puts the stated schema in its
    place. The field's own title, description and default stay (a front end that words a
    field its own way keeps its words).
    """

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema

    def __call__(self, json_schema: JsonDict) -> None:
        json_schema.pop("anyOf", None)
        for key, value in self.schema.items():
            json_schema.setdefault(key, copy.deepcopy(value))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.schema!r})"


def optional_info(json_type: str, inner: Any, description: str, pattern: str | None = None,
                  **bounds: Unpack[Bounds]) -> FieldInfo:
    """An optional field's bounds, description and schema, for ``Annotated[<inner> | None, ...]``.

    The field is shown as a plain type (no ``anyOf``) and accepts ``null``; the bounds apply
    to a value that is not ``None``. A ``Literal`` inner type is listed as the schema's
    ``enum`` (still a plain string); ``pattern`` states, in the schema only, a rule the
    field's validation enforces with its own words (a free text states
    :data:`NO_NUL_PATTERN`). A time is declared as :data:`IsoTime`, with ``datetime`` here.

    Args:
        json_type: the schema's ``type``.
        inner: the type of a value that is not ``None``.
        description: what the field holds.
        pattern: the pattern the schema states.
        **bounds: the bounds, as pydantic ``Field`` arguments.

    Returns:
        The field's bounds, description and stated schema.
    """
    names = {"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "max_length": "maxLength"}
    schema: dict[str, Any] = {"type": json_type, "description": description}
    if pattern is None and inner is str:
        pattern = NO_NUL_PATTERN
    if pattern is not None:
        schema["pattern"] = pattern
    schema.update({names[k]: v for k, v in bounds.items()})
    if get_origin(inner) is Literal:
        schema["enum"] = list(get_args(inner))
    if json_type == "string" and inner is datetime:
        schema["format"] = "date-time"
    return Field(description=description, json_schema_extra=_Stated(schema), **bounds)


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
Weight = Annotated[float | None, optional_info(
    "number", float, "Weight of this component (default: the persona's own, 1.0 unless changed).",
    ge=0.0, le=MAX_WEIGHT,
)]
Decay = Annotated[float | None, optional_info(
    "number", float, f"Recency decay per hour (or per rank), in {DECAY.text()} (default: the "
    f"persona's, {DEFAULT_RECENCY_DECAY} unless changed).", **DECAY.field(),
)]
Poignancy = Annotated[float | None, optional_info(
    "number", float, f"Importance from {POIGNANCY.low:g} (mundane, e.g. brushing teeth) to "
    f"{POIGNANCY.high:g} (poignant, e.g. a break-up); leave empty to let the server's chat model "
    "rate it (required when the server has no chat model).", **POIGNANCY.field(),
)]
When = Annotated[IsoTime | None, optional_info(
    "string", datetime, "ISO time, e.g. '2023-02-13 18:00:00' (default: now).",
)]
Since = Annotated[IsoTime | None, optional_info(
    "string", datetime, "Only memories created at or after this ISO time, e.g. '2023-02-13' "
    "(its midnight) or '2023-02-13 07:00:00' (default: no limit).",
)]
Until = Annotated[IsoTime | None, optional_info(
    "string", datetime, "Only memories created before this ISO time, which must come after "
    "created_after; with created_after '2023-02-13' and created_before '2023-02-14' that day "
    "(default: no limit).",
)]
Kinds = Annotated[str | None, optional_info(
    "string", str, f"Only memories of these types, comma-separated, each {TYPE_CHOICES}, e.g. "
    "'event,thought' (default: events and thoughts, the original's candidates; chats only "
    "when named).", pattern=TYPES_PATTERN, max_length=MAX_FIELD_CHARS,
)]
Relevance = Annotated[RelevanceMode | None, optional_info(
    "string", RelevanceMode, f"The relevance signal: {describe(RELEVANCE)} (default: the "
    f"persona's setting, {DEFAULT_RELEVANCE_MODE} unless changed).",
)]
LexicalWeight = Annotated[float | None, optional_info(
    "number", float, "Share of the lexical signal in the hybrid relevance, 0 (dense only) to 1 "
    f"(lexical only) (default: the persona's setting, {DEFAULT_LEXICAL_WEIGHT} unless changed).",
    **LEXICAL_WEIGHT.field(),
)]
IdleFilter = Annotated[bool | None, optional_info(
    "boolean", bool, "Leave out memories whose embedding key contains 'idle', as the original "
    "simulation does; false keeps them (e.g. 'the idle reactor') (default: the preset's, true "
    "for simulation, false for conversation).",
)]
PresetField = Annotated[
    Preset,
    Field(description="Defaults of the scoring fields left empty: 'simulation' (the original's "
          "weights, or the persona's settings) or 'conversation' (measured best for chat "
          "memories: hybrid relevance alone, the time a question names narrows the "
          "candidates, idle memories kept)."),
]
TimeInQueryField = Annotated[TimeInQuery | None, optional_info(
    "string", TimeInQuery, f"What a time the focal text names does: {describe(TIME_IN_QUERY)} "
    "(default: the preset's).",
)]
MinPoignancy = Annotated[float | None, optional_info(
    "number", float, "Only memories at least this important, 1..10 (default: no limit).",
    ge=0.0, le=MAX_WEIGHT,
)]


def _seconds_as_text(value: Any) -> Any:
    """A number of seconds as its text (a duration text as it is); a boolean is refused."""
    if isinstance(value, bool):
        msg = f"expected {FORMS}"
        raise ValueError(msg)
    return repr(value) if isinstance(value, int | float) else value


def _a_lifetime(value: str) -> str:
    """The text, once it matched :data:`DURATION_PATTERN` and ``lifetime`` read it as one."""
    if not _DURATION.fullmatch(value):
        msg = f"expected {FORMS}"
        raise ValueError(msg)
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


_BLANK = re.compile(r"\s*")
_DURATION = re.compile(DURATION_PATTERN.removeprefix("^").removesuffix("$"))


def not_blank(value: str) -> str:
    """The text, if it holds a character that is not a space (else ValueError)."""
    if _BLANK.fullmatch(value):
        msg = "must not be blank"
        raise ValueError(msg)
    return value


def known_types(value: str | None) -> str | None:
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


def plain_value(value: Any, kind: str | None) -> Any:
    """``value`` if it is of the plain kind its field takes (and holds no NUL), else an error.

    A boolean for a number, or a number for a boolean, was read as 0 or false
    (``{"limit": false}``, ``{"include_superseded": 0}``); a NUL was silently removed.

    Args:
        value: what the caller gave.
        kind: ``"bool"``, ``"number"`` or None (any other field).

    Returns:
        The value, unchanged.

    Raises:
        PydanticCustomError: the value is of the wrong kind, or a text with NUL.
    """
    if value is None:
        return value
    if isinstance(value, str) and "\x00" in value:
        raise PydanticCustomError("nul_character",
                                  "must not hold the control character NUL (\\u0000)")
    if kind == "number" and isinstance(value, bool):
        raise PydanticCustomError("number_type", "expected a number, got {got}",
                                  {"got": json.dumps(value)})
    if kind == "bool" and not isinstance(value, bool):
        raise PydanticCustomError("bool_type", "expected true or false, got {got}",
                                  {"got": json.dumps(value, default=str)[:40]})
    return value


@functools.cache
def field_kind(model: type[BaseModel], name: str) -> str | None:
    """Whether a declared field takes only a boolean (``"bool"``) or a number (``"number"``).

    Worked out once per model and field (every request asks again).

    Args:
        model: the declared request.
        name: the field.

    Returns:
        The kind, or None for any other field.
    """
    return _kind(model.model_fields[name].annotation)


class Request(BaseModel):
    """A declared request: no field beyond those declared, strict numbers and booleans."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)

    @field_validator("*", mode="before")
    @classmethod
    def _plain(cls, value: Any, info: ValidationInfo) -> Any:
        """Every field through :func:`plain_value`."""
        if info.field_name is None:
            return value
        return plain_value(value, field_kind(cls, info.field_name))
