"""The options several ``genmem`` commands share: value types, ``Annotated`` option aliases, times.

The retrieval options (recency mode, weights, decay) are declared once here and reach a
command as one :class:`Weights` through :func:`weight_options`.
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

from langchain_genmem import validation
from langchain_genmem.errors import ValidationError
from langchain_genmem.interop.generative_agents import SCRATCH_TIME_FORMAT

if TYPE_CHECKING:
    from langchain_genmem.retrievers import GenerativeAgentsRetriever
    from langchain_genmem.store import MemoryStream

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


class RecencyMode(str, Enum):
    """The recency modes of :class:`~langchain_genmem.GenerativeAgentsRetriever`."""

    hours = "hours"
    rank = "rank"
    reverie = "reverie"


class NodeKind(str, Enum):
    """The kinds of memory ``genmem add`` writes."""

    event = "event"
    thought = "thought"
    chat = "chat"


K = Annotated[int, typer.Option("-k", min=0, help="How many memories to show.")]
Mode = Annotated[
    RecencyMode,
    typer.Option(
        "--recency-mode",
        help="hours: decay ** hours since last access (the paper); rank: decay ** position "
        "by last access; reverie: the original code exactly.",
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
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


@dataclass
class Weights:
    """Retrieval options shared by ``search``, ``explain`` and ``demo``.

    Attributes:
        mode: recency mode.
        recency_w: recency weight, None for the persona's.
        relevance_w: relevance weight, None for the persona's.
        importance_w: importance weight, None for the persona's.
        decay: recency decay, None for the persona's.
    """

    mode: RecencyMode = RecencyMode.hours
    recency_w: float | None = None
    relevance_w: float | None = None
    importance_w: float | None = None
    decay: float | None = None

    def __post_init__(self) -> None:
        """Check the options with the library's rules, naming the option that was wrong.

        Raises:
            ValidationError: a weight that is not finite and >= 0, or a decay outside (0, 1].
        """
        for name in ("recency_w", "relevance_w", "importance_w"):
            value = getattr(self, name)
            if value is not None:
                validation.weight(value, "--" + name.replace("_", "-"))
        if self.decay is not None:
            validation.decay(self.decay, "--decay")

    def retriever(self, stream: MemoryStream, k: int, *, touch: bool) -> GenerativeAgentsRetriever:
        """A retriever over the stream with these options.

        Args:
            stream: the stream.
            k: how many documents.
            touch: update ``last_accessed`` of what is returned.

        Returns:
            The retriever.
        """
        from langchain_genmem.retrievers import GenerativeAgentsRetriever

        return GenerativeAgentsRetriever(
            stream=stream,
            k=k,
            recency_mode=self.mode.value,
            recency_decay=self.decay,
            recency_w=self.recency_w,
            relevance_w=self.relevance_w,
            importance_w=self.importance_w,
            update_access=touch,
        )


# The command-line options of each Weights field, in the order the help lists them.
_WEIGHT_OPTIONS: tuple[tuple[str, Any, Any], ...] = (
    ("mode", Mode, RecencyMode.hours),
    ("recency_w", RecencyW, None),
    ("relevance_w", RelevanceW, None),
    ("importance_w", ImportanceW, None),
    ("decay", Decay, None),
)


def weight_options(command: Callable[..., None]) -> Callable[..., None]:
    """Give a command the recency mode, weight and decay options as one ``weights`` parameter.

    Typer sees the options of :class:`Weights` where the command declares
    ``weights: Weights``; the command is called with them gathered into that parameter.

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
        weights = Weights(**{name: kwargs.pop(name) for name, _, _ in _WEIGHT_OPTIONS})
        command(*args, weights=weights, **kwargs)

    run.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in parameters}
    run.__annotations__["return"] = signature.return_annotation
    return run


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
