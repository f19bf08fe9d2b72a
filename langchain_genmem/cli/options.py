"""The options several ``genmem`` commands share: value types, ``Annotated`` option aliases, times.

The retrieval options (recency mode, weights, decay, relevance signal, filters) are declared
once here and reach a command as one :class:`RetrievalOptions` through :func:`weight_options`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from langchain_genmem.core import validation
from langchain_genmem.core.errors import GenMemError, StorageError, ValidationError
from langchain_genmem.core.modes import (
    DEFAULT_RECENCY_MODE,
    DEFAULT_RELEVANCE_MODE,
    RECENCY,
    RECENCY_MODES,
    RELEVANCE,
    RELEVANCE_MODES,
    TIME_IN_QUERY,
    TIME_IN_QUERY_MODES,
    describe,
)
from langchain_genmem.core.nodes import NODE_TYPES, TYPE_CHOICES
from langchain_genmem.core.state import DEFAULT_LEXICAL_WEIGHT
from langchain_genmem.core.timeutil import SCRATCH_TIME_FORMAT
from langchain_genmem.numerics.candidate_filter import make_filter
from langchain_genmem.retrieval.time_window import find_time_window

if TYPE_CHECKING:
    from langchain_genmem.memory.stream import MemoryStream
    from langchain_genmem.retrieval.weighted import WeightedRetrieval

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


# The choices typer shows, made from the one declaration of the modes (core.modes) and of
# the node types. A type checker reads the members of Enum() only from a literal; to it
# each is a str Enum, its members known at run time.
if TYPE_CHECKING:
    class RecencyMode(str, Enum):
        """The recency modes."""

    class Relevance(str, Enum):
        """The relevance signals."""

    class TimeInQuery(str, Enum):
        """What a time named in the query does."""

    class NodeKind(str, Enum):
        """The kinds of memory ``genmem add`` writes."""
else:
    RecencyMode = Enum("RecencyMode", {m: m for m in RECENCY_MODES}, type=str, module=__name__)
    Relevance = Enum("Relevance", {m: m for m in RELEVANCE_MODES}, type=str, module=__name__)
    TimeInQuery = Enum("TimeInQuery", {m: m for m in TIME_IN_QUERY_MODES}, type=str,
                       module=__name__)
    NodeKind = Enum("NodeKind", [(t, t) for t in NODE_TYPES], type=str, module=__name__)
RecencyMode.__doc__ = "The recency modes of :class:`~langchain_genmem.GenerativeAgentsRetriever`."
Relevance.__doc__ = "The relevance signals of :class:`~langchain_genmem.GenerativeAgentsRetriever`."
TimeInQuery.__doc__ = "What a time named in the query does (``time_in_query``)."
NodeKind.__doc__ = "The kinds of memory ``genmem add`` writes: those of ``NODE_TYPES``."


K = Annotated[int, typer.Option("-k", min=validation.K_MIN, help="How many memories to show.")]
Mode = Annotated[
    RecencyMode,
    typer.Option(
        "--recency-mode",
        help=f"{describe(RECENCY)}.",
    ),
]
RecencyW = Annotated[
    float | None, typer.Option("--recency-w", help="Recency weight (default: the persona's).")
]
RelevanceW = Annotated[
    float | None, typer.Option("--relevance-w", help="Relevance weight (default: the persona's).")
]
ImportanceW = Annotated[
    float | None,
    typer.Option("--importance-w", help="Importance weight (default: the persona's)."),
]
Decay = Annotated[
    float | None,
    typer.Option("--decay", help="Recency decay per hour or per rank (default: the persona's)."),
]
RelevanceOption = Annotated[
    Relevance | None,
    typer.Option(
        "--relevance",
        help=f"{describe(RELEVANCE)} (default: the persona's, {DEFAULT_RELEVANCE_MODE} unless "
        "changed).",
    ),
]
LexicalWeight = Annotated[
    float | None,
    typer.Option(
        "--lexical-weight",
        help="Share of the lexical signal in hybrid relevance, 0 (dense) to 1 (lexical) "
        f"(default: the persona's, {DEFAULT_LEXICAL_WEIGHT} unless changed).",
    ),
]
TimeInQueryOption = Annotated[
    TimeInQuery | None,
    typer.Option(
        "--time-in-query",
        help=f"A time the query names ('last week', '上周日', 'in late March'): "
        f"{describe(TIME_IN_QUERY)} (default: the retriever's).",
    ),
]
KeepIdle = Annotated[
    bool,
    typer.Option(
        "--keep-idle",
        help="Score memories whose embedding key says 'idle' too (the original drops them).",
    ),
]
IncludeSuperseded = Annotated[
    bool,
    typer.Option(
        "--include-superseded",
        help="Score memories a newer memory supersedes (corrects) too; left out by default.",
    ),
]
Since = Annotated[
    str | None,
    typer.Option(
        "--since",
        help="Only memories created at or after this time (2023-02-13 = its midnight; "
        "'yesterday', '3 days ago', '昨天' = that day's midnight by the store's clock).",
    ),
]
Until = Annotated[
    str | None,
    typer.Option(
        "--until",
        help="Only memories created before this time, read as --since is (--since 2023-02-13 "
        "--until 2023-02-14 is that day; --since yesterday --until today is yesterday).",
    ),
]
Types = Annotated[
    list[str] | None,
    typer.Option(
        "--type",
        help=f"Only memories of this type: {TYPE_CHOICES} (repeat; without it, events and "
        "thoughts, the original's candidates).",
    ),
]
MinPoignancy = Annotated[
    float | None, typer.Option("--min-poignancy", help="Only memories at least this poignant.")
]


class ScoreIn(str, Enum):
    """Where memories are ranked (``score_in`` of the retriever and the service)."""

    process = "process"
    database = "database"


ScoreInOption = Annotated[
    ScoreIn,
    typer.Option(
        "--score-in",
        help="process: load each persona and rank in this process; database: PostgreSQL "
        "ranks and the server holds no persona (stateless replicas; needs --dsn).",
    ),
]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


@dataclass
class RetrievalOptions:
    """Retrieval options shared by ``search``, ``explain`` and ``demo``.

    Attributes:
        mode: recency mode.
        recency_w: recency weight, None for the persona's.
        relevance_w: relevance weight, None for the persona's.
        importance_w: importance weight, None for the persona's.
        decay: recency decay, None for the persona's.
        relevance: the relevance signal, None for the persona's.
        lexical_weight: the lexical share of hybrid relevance, None for the persona's.
        keep_idle: score memories marked idle too (turns the idle filter off).
        since: keep memories created at or after this time (text), or None.
        until: keep memories created before this time (text), or None.
        types: keep memories of these types, or None.
        min_poignancy: keep memories at least this poignant, or None.
        time_in_query: what a time the query names does, None for the retriever's default.
        include_superseded: score memories a newer memory supersedes too.
    """

    mode: RecencyMode = RecencyMode(DEFAULT_RECENCY_MODE)
    recency_w: float | None = None
    relevance_w: float | None = None
    importance_w: float | None = None
    decay: float | None = None
    relevance: Relevance | None = None
    lexical_weight: float | None = None
    keep_idle: bool = False
    since: str | None = None
    until: str | None = None
    types: list[str] | None = None
    min_poignancy: float | None = None
    time_in_query: TimeInQuery | None = None
    include_superseded: bool = False

    def __post_init__(self) -> None:
        """Check the options with the library's rules, naming the option that was wrong.

        Raises:
            ValidationError: a weight that is not finite and >= 0, a decay outside (0, 1],
                a lexical weight outside [0, 1], a time neither ISO nor the original's
                format, an unknown type, or a window that ends before it starts.
        """
        for name in ("recency_w", "relevance_w", "importance_w"):
            value = getattr(self, name)
            if value is not None:
                validation.weight(value, "--" + name.replace("_", "-"))
        if self.decay is not None:
            validation.decay(self.decay, "--decay")
        if self.lexical_weight is not None:
            validation.lexical_weight(self.lexical_weight, "--lexical-weight")
        self.filters()

    def filters(self, now: datetime | None = None) -> dict[str, Any]:
        """The candidate filter of these options, as retriever arguments.

        Args:
            now: the stream's clock, which relative times (``yesterday``, ``昨天``) are read
                at; None only checks that they can be read (and leaves them out).

        Returns:
            ``created_after``, ``created_before``, ``types`` and ``min_poignancy``.

        Raises:
            ValidationError: a bad value, naming the option.
        """
        after, before = _when(self.since, "--since", now), _when(self.until, "--until", now)
        types = self.types or None
        option = {"created_after": "--since", "created_before": "--until", "types": "--type",
                  "min_poignancy": "--min-poignancy"}
        try:
            make_filter(created_after=after, created_before=before, types=types,
                        min_poignancy=self.min_poignancy)
        except ValidationError as e:  # name the option, not the library's field
            if e.field == "created_before":  # the times are read: the window is empty
                msg = (f"--until: {self.until!r} is not after --since {self.since!r} (--until "
                       "ends the window and is left out)")
                raise ValidationError(msg, field="--until") from None
            raise renamed(e, option.get(e.field or "", "--type")) from None
        return {"created_after": after, "created_before": before, "types": types,
                "min_poignancy": self.min_poignancy}

    def filter_options(self) -> str:
        """The candidate filter options given, as typed, e.g. ``--type chat --since 2023-02-13``.

        Returns:
            The options and their values; empty when none was given.
        """
        given = [("--since", self.since), ("--until", self.until),
                 *(("--type", t) for t in self.types or ()),
                 ("--min-poignancy", self.min_poignancy)]
        return " ".join(f"{option} {value:g}" if isinstance(value, float) else f"{option} {value}"
                        for option, value in given if value is not None)

    def retriever(
        self, stream: MemoryStream, k: int, *, touch: bool, score_in: ScoreIn = ScoreIn.process
    ) -> WeightedRetrieval:
        """A retriever over the stream with these options.

        The retriever's ranking without LangChain's Runnable machinery (a command ranks and
        reads the report only), so a command does not import it.

        Args:
            stream: the stream.
            k: how many documents.
            touch: update ``last_accessed`` of what is returned.
            score_in: where the memories are ranked (``--score-in``).

        Returns:
            The retriever.
        """
        from langchain_genmem.retrieval.weighted import WeightedRetrieval  # lazy: start-up time

        return WeightedRetrieval(
            stream=stream,
            k=k,
            recency_mode=self.mode.value,
            recency_decay=self.decay,
            recency_w=self.recency_w,
            relevance_w=self.relevance_w,
            importance_w=self.importance_w,
            relevance=None if self.relevance is None else self.relevance.value,
            lexical_weight=self.lexical_weight,
            idle_filter=not self.keep_idle,
            update_access=touch,
            score_in=score_in.value,
            include_superseded=self.include_superseded,
            **self.filters(stream.clock()),
            **({} if self.time_in_query is None else {"time_in_query": self.time_in_query.value}),
        )


# The command-line options of each RetrievalOptions field, in the order the help lists them.
_WEIGHT_OPTIONS: tuple[tuple[str, Any, Any], ...] = (
    ("mode", Mode, RecencyMode(DEFAULT_RECENCY_MODE)),
    ("recency_w", RecencyW, None),
    ("relevance_w", RelevanceW, None),
    ("importance_w", ImportanceW, None),
    ("decay", Decay, None),
    ("relevance", RelevanceOption, None),
    ("lexical_weight", LexicalWeight, None),
    ("keep_idle", KeepIdle, False),
    ("since", Since, None),
    ("until", Until, None),
    ("types", Types, None),
    ("min_poignancy", MinPoignancy, None),
    ("time_in_query", TimeInQueryOption, None),
    ("include_superseded", IncludeSuperseded, False),
)


def weight_options(command: Callable[..., None]) -> Callable[..., None]:
    """Give a command the recency mode, weight and decay options as one ``weights`` parameter.

    Typer sees the options of :class:`RetrievalOptions` where the command declares
    ``weights: RetrievalOptions``; the command is called with them gathered into that parameter.

    Args:
        command: a command function with a ``weights`` parameter.

    Returns:
        The command as typer should register it.
    """
    signature = inspect.signature(command, eval_str=True)
    parameters: list[inspect.Parameter] = []
    for parameter in signature.parameters.values():
        if parameter.name != "weights":
            parameters.append(parameter)
            continue
        parameters += [
            inspect.Parameter(name, parameter.kind, default=default, annotation=annotation)
            for name, annotation, default in _WEIGHT_OPTIONS
        ]

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> None:
        weights = RetrievalOptions(**{name: kwargs.pop(name) for name, _, _ in _WEIGHT_OPTIONS})
        command(*args, weights=weights, **kwargs)

    run.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in parameters}
    run.__annotations__["return"] = signature.return_annotation
    return run


def renamed(error: GenMemError, option: str) -> GenMemError:
    """A library error as the command line says it: naming the option, not the field.

    The library's messages start with the field they are about (``path: ...``,
    ``items[0].poignancy: ...``); the same words follow the option instead.

    Args:
        error: the library's error.
        option: the option (or argument) the user gave, e.g. ``--poignancy``.

    Returns:
        A ValidationError (for any kind of it) or StorageError whose message starts with
        the option; any other error as it is.
    """
    field, found, rest = str(error).partition(": ")
    text = f"{option}: {rest if found and ' ' not in field else error}"
    if isinstance(error, ValidationError):
        return ValidationError(text, field=option)
    if type(error) is StorageError:
        return StorageError(text)
    return error


def _when(text: str | None, option: str, now: datetime | None) -> datetime | None:
    """A ``--since``/``--until`` time: a time (:func:`parse_time`) or a day relative to ``now``.

    Args:
        text: the option's value, or None.
        option: the option, named in the error.
        now: the clock relative days are read at; None checks the text only (and gives None
            for a relative day).

    Returns:
        The time, or None.

    Raises:
        ValidationError: neither a time nor a day the time parser reads.
    """
    if text is None:
        return None
    try:
        return parse_time(text, option)
    except ValidationError as e:
        window = find_time_window(text, now or datetime.now())
        if window is None or window.phrase.casefold() != text.strip().casefold():
            msg = f"{e}, nor a day like 'yesterday', '3 days ago' or '昨天'"
            raise ValidationError(msg, field=option) from None
        return None if now is None else window.start


def parse_time(text: str, option: str) -> datetime:
    """A time given on the command line.

    ISO (``2023-02-13 18:00:00``) or the original's ``February 13, 2023, 18:00:00``.

    Args:
        text: the text.
        option: the option, named in the error.

    Returns:
        The (naive) datetime.

    Raises:
        ValidationError: neither format.
    """
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        pass
    try:
        return datetime.strptime(text.strip(), SCRATCH_TIME_FORMAT)
    except ValueError:
        msg = f"{option}: {text!r} is not a time like '2023-02-13 18:00:00'"
        raise ValidationError(msg, field=option) from None


Weights = RetrievalOptions  # the name it had; the retrieval's weights are numerics.scoring.Weights
