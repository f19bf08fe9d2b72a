"""The retrieval's modes and value ranges, each declared once.

Every other place derives from here: the ``genmem`` options' choices and help
(:mod:`langchain_genmem.cli.options`), the service's JSON schema enums and descriptions
(:mod:`langchain_genmem.service.schemas`), the MCP tool's text
(:mod:`langchain_genmem.service.mcp`), the library's validation
(:mod:`langchain_genmem.core.validation`), the persona state's field
(:mod:`langchain_genmem.core.state`) and PostgreSQL's CHECK constraints
(:func:`langchain_genmem.backends.postgres_schema.sync_checks`).
``tests/unit_tests/test_modes.py`` checks that they agree.

A new mode is one more name in its ``Literal`` and one entry in its table below; then the
code that computes it (:mod:`langchain_genmem.numerics.scoring` for a relevance signal or a
recency curve, and the SQL of :mod:`langchain_genmem.backends.postgres_scoring` if the
database should rank by it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypedDict, TypeVar, get_args

__all__ = [
    "DATABASE_RELEVANCE_MODES",
    "DECAY",
    "DEFAULT_RECENCY_MODE",
    "DEFAULT_RELEVANCE_MODE",
    "DEFAULT_TIME_IN_QUERY",
    "LEXICAL_WEIGHT",
    "POIGNANCY",
    "RECENCY",
    "RECENCY_MODES",
    "RELEVANCE",
    "RELEVANCE_MODES",
    "TIME_BOOST",
    "TIME_IN_QUERY",
    "TIME_IN_QUERY_MODES",
    "WEIGHT",
    "FieldBounds",
    "ModeText",
    "Range",
    "RecencyMode",
    "RelevanceMode",
    "TimeInQuery",
    "describe",
    "sql_values",
]


@dataclass(frozen=True)
class ModeText:
    """How a mode is explained.

    Attributes:
        help: for people (command-line help, the service's JSON schema).
        hint: for a model choosing it (the MCP tool's text).
    """

    help: str
    hint: str


RecencyMode = Literal["hours", "rank", "reverie"]
RECENCY_MODES: tuple[RecencyMode, ...] = get_args(RecencyMode)
DEFAULT_RECENCY_MODE: RecencyMode = "hours"
RECENCY: Mapping[RecencyMode, ModeText] = {
    "hours": ModeText("decay ** hours since last access (the paper)", "hours since use"),
    "rank": ModeText("decay ** position by last access", "order of use"),
    "reverie": ModeText("the original code exactly", "the original simulation's order"),
}

RelevanceMode = Literal["dense", "lexical", "hybrid"]
RELEVANCE_MODES: tuple[RelevanceMode, ...] = get_args(RelevanceMode)
DEFAULT_RELEVANCE_MODE: RelevanceMode = "dense"
RELEVANCE: Mapping[RelevanceMode, ModeText] = {
    "dense": ModeText("embedding cosine (the original's)", "meaning"),
    "lexical": ModeText("BM25 over the words (English and Chinese)",
                        "the words themselves: names, numbers, rare terms"),
    "hybrid": ModeText("both fused", "both"),
}
# The time a question names ("last week", "上周日"), read by
# langchain_genmem.retrieval.time_window, and what the retrieval does with it.
TimeInQuery = Literal["off", "narrow", "weight"]
TIME_IN_QUERY_MODES: tuple[TimeInQuery, ...] = get_args(TimeInQuery)
DEFAULT_TIME_IN_QUERY: TimeInQuery = "off"
TIME_IN_QUERY: Mapping[TimeInQuery, ModeText] = {
    "off": ModeText("the question's words are not read as a time", "ignore it"),
    "narrow": ModeText("only memories created in the period the question names (all when "
                       "none is)", "only memories of that time"),
    "weight": ModeText("memories created in that period score higher", "prefer that time"),
}
TIME_BOOST = 0.5
"""With ``time_in_query="weight"``: what a memory created in the named period gains, as a
share of the largest relevance term (relevance weight x gain)."""

# What score_in="database" can rank by (the SQL ranking has the dense cosine only).
DATABASE_RELEVANCE_MODES: tuple[RelevanceMode, ...] = ("dense",)


class FieldBounds(TypedDict, total=False):
    """Pydantic ``Field`` bound arguments, as :meth:`Range.field` gives them.

    Attributes:
        gt: the value must be greater than this.
        ge: the value must be at least this.
        le: the value must be at most this.
    """

    gt: float
    ge: float
    le: float


@dataclass(frozen=True)
class Range:
    """The values a number may take: ``low <= x <= high`` (``low < x`` when ``low_open``).

    Attributes:
        low: the lowest value.
        high: the highest value (``math.inf``: no bound).
        low_open: ``low`` itself is not allowed.
    """

    low: float
    high: float = math.inf
    low_open: bool = False

    def __contains__(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        return above and value <= self.high

    def field(self) -> FieldBounds:
        """The bounds as pydantic ``Field`` arguments (``ge``/``gt``, ``le``)."""
        out: FieldBounds = {"gt": self.low} if self.low_open else {"ge": self.low}
        if self.high != math.inf:
            out["le"] = self.high
        return out

    def text(self) -> str:
        """The range as in messages: ``(0, 1]``, ``[1, 10]``, ``>= 0``."""
        if self.high == math.inf:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        return f"{'(' if self.low_open else '['}{self.low:g}, {self.high:g}]"

    def sql(self, column: str) -> str:
        """The range as a SQL condition on ``column``."""
        low = f"{column} {'>' if self.low_open else '>='} {self.low:g}"
        return low if self.high == math.inf else f"{low} AND {column} <= {self.high:g}"


POIGNANCY = Range(1.0, 10.0)
"""A memory's importance: 1 (mundane) to 10 (poignant), as in the original."""
DECAY = Range(0.0, 1.0, low_open=True)
"""Recency decay per hour or per rank; 1 is no decay."""
LEXICAL_WEIGHT = Range(0.0, 1.0)
"""The lexical share of hybrid relevance: 0 dense only, 1 lexical only."""
WEIGHT = Range(0.0)
"""A retrieval weight or gain: any finite number >= 0 (the service caps it lower)."""


_Mode = TypeVar("_Mode", bound=str)


def describe(table: Mapping[_Mode, ModeText], *, for_model: bool = False) -> str:
    """Every mode of a table, explained.

    Args:
        table: :data:`RECENCY` or :data:`RELEVANCE`.
        for_model: the hints for a model (``"dense (meaning), ... or hybrid (both)"``)
            instead of the help for people (``"dense: embedding cosine ...; hybrid: ..."``).

    Returns:
        The text.
    """
    if not for_model:
        return "; ".join(f"{name}: {t.help}" for name, t in table.items())
    parts = [f"{name} ({t.hint})" for name, t in table.items()]
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} or {parts[-1]}"


def sql_values(modes: Sequence[str]) -> str:
    """``'dense', 'lexical', 'hybrid'``: the modes as a SQL ``IN`` list."""
    return ", ".join("'" + m.replace("'", "''") + "'" for m in modes)
