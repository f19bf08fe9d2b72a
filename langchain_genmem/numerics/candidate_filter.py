"""Which memories a retrieval may return: a time window, kinds, a poignancy floor, an id set.

A :class:`CandidateFilter` narrows the *candidates* of a retrieval before any scoring; the
scoring itself stays exact over the memories that pass. Normalisation (the min-max of
recency, relevance and importance) is over the filtered set: a filter asks "the best of
last week's memories", and a memory's place in that answer must not depend on memories the
caller excluded (with normalisation over the whole stream, one very old or very poignant
memory outside the window would squeeze every score inside it). The weighted ranking of the
filtered set is then exactly what a stream holding only those memories would give.

The time window is half-open: ``created_after <= created < created_before``, so
``created_after=day, created_before=day + 1 day`` is that day, with no memory counted in two
consecutive days. Naive datetimes are the stream's (simulation) time; aware ones are
converted to UTC; a ``date`` is its midnight; ISO texts (``"2023-02-13"``,
``"2023-02-13T07:00"``) are read as such.

Example:
    .. code-block:: python

        retriever.invoke("the party", created_after="2023-02-13", types=["event"])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import date, datetime
from typing import Any, overload

import numpy as np

from langchain_genmem.core.errors import ValidationError
from langchain_genmem.core.nodes import (
    NODE_TYPES,
    TYPE_CHOICES,
    TYPE_CODES,
    MemoryNode,
    node_number_or_none,
)
from langchain_genmem.core.timeutil import naive, to_epoch

FILTER_FIELDS = (
    "created_after", "created_before", "types", "min_poignancy", "node_ids", "node_mask",
)
ISO_EXAMPLE = "2023-02-13 or 2023-02-13T07:00"
"""How an ISO date or time is shown in an error that asks for one."""


@dataclass(frozen=True)
class CandidateFilter:
    """The memories a retrieval may consider; None (or empty) fields do not filter.

    Attributes:
        created_after: keep memories created at or after this time.
        created_before: keep memories created strictly before this time.
        types: keep memories of these types (``"event"``, ``"thought"``, ``"chat"``);
            None keeps the original's candidates, events and thoughts: chats are scored
            only when named here.
        min_poignancy: keep memories whose poignancy is at least this.
        node_ids: keep only these memories (``node_N`` ids), e.g. the live items of a
            LangGraph store namespace.
        node_mask: keep only the memories whose node number - 1 is True in this boolean
            array (indexed by number, not by cache row: forgotten numbers leave gaps), or
            in the array a zero-argument callable returns when the retrieval picks its
            candidates (after it caught up with the store, so the caller's array can follow
            writes made meanwhile); numbers past its end are left out. The same set as
            ``node_ids`` without naming every id.
    """

    created_after: datetime | None = None
    created_before: datetime | None = None
    types: tuple[str, ...] | None = None
    min_poignancy: float | None = None
    node_ids: frozenset[str] | None = None
    # left out of ==: an array has no single truth value
    node_mask: np.ndarray | Callable[[], np.ndarray] | None = field(default=None, compare=False)

    @property
    def active(self) -> bool:
        """Whether any field filters."""
        return any(getattr(self, f.name) is not None for f in fields(self))

    @property
    def chats(self) -> bool:
        """Whether chats are candidates: only when ``types`` names them."""
        return self.types is not None and "chat" in self.types

    def merged(self, overrides: Mapping[str, Any]) -> CandidateFilter:
        """This filter with the fields given per call replacing its own.

        Args:
            overrides: filter fields (as accepted by :func:`make_filter`); None values
                keep this filter's.

        Returns:
            The combined filter.
        """
        given = {k: v for k, v in overrides.items() if v is not None}
        if not given:
            return self
        mine = {f.name: getattr(self, f.name) for f in fields(self)}
        return make_filter(**{**mine, **given})

    def mask(self, created: np.ndarray, type_code: np.ndarray, poignancy: np.ndarray,
             node_count: np.ndarray) -> np.ndarray:
        """The candidates that pass, as a boolean array.

        Args:
            created: creation times (epoch seconds) of the candidates.
            type_code: their type codes (0 event, 1 thought, 2 chat).
            poignancy: their poignancy.
            node_count: their node numbers.

        Returns:
            True where a candidate passes.
        """
        keep = np.ones(created.shape[0], dtype=bool)
        if self.created_after is not None:
            keep &= created >= to_epoch(self.created_after)
        if self.created_before is not None:
            keep &= created < to_epoch(self.created_before)
        if self.types is not None:
            keep &= np.isin(type_code, [TYPE_CODES[t] for t in self.types])
        if self.min_poignancy is not None:
            keep &= poignancy >= self.min_poignancy
        if self.node_ids is not None:
            keep &= np.isin(node_count, self.node_numbers())
        if self.node_mask is not None:
            keep &= _rows_in(self.mask_rows(), np.asarray(node_count, dtype=np.int64) - 1)
        return keep

    def passes(self, node: MemoryNode) -> bool:
        """Whether one memory passes (the rule of :meth:`mask`).

        Args:
            node: the memory.

        Returns:
            True when it passes.
        """
        one = self.mask(
            np.array([to_epoch(node.created)]),
            np.array([TYPE_CODES[node.type]]),
            np.array([node.poignancy]),
            np.array([node.node_count]),
        )
        return bool(one[0])

    def node_numbers(self) -> list[int]:
        """The node numbers of ``node_ids`` (ids not of the ``node_N`` form match nothing)."""
        numbers = (node_number_or_none(i) for i in self.node_ids or ())
        return sorted(n for n in numbers if n is not None)

    def mask_rows(self) -> np.ndarray:
        """The boolean array of ``node_mask`` (calling it when it is a callable).

        Returns:
            True at the rows kept; an empty array when there is no ``node_mask``.
        """
        given = self.node_mask
        if given is None:
            return np.zeros(0, dtype=bool)
        return np.asarray(given() if callable(given) else given, dtype=bool)

    def sql(self) -> tuple[str, dict[str, Any]]:
        """The filter as a SQL condition over ``memory_nodes m`` (PostgreSQL), with parameters.

        Returns:
            ``("AND ...", params)``; ``("", {})`` when nothing filters. ``types`` are the
            parameter ``kinds``, which replaces the ranking query's own (the original's
            events and thoughts).
        """
        parts: list[str] = []
        params: dict[str, Any] = {}
        if self.created_after is not None:
            parts.append("extract(epoch FROM m.created_at)::float8 >= %(f_after)s")
            params["f_after"] = to_epoch(self.created_after)
        if self.created_before is not None:
            parts.append("extract(epoch FROM m.created_at)::float8 < %(f_before)s")
            params["f_before"] = to_epoch(self.created_before)
        if self.types is not None:  # the types scored, chats too when named
            params["kinds"] = list(self.types)
        if self.min_poignancy is not None:
            parts.append("m.poignancy >= %(f_poignancy)s")
            params["f_poignancy"] = float(self.min_poignancy)
        if self.node_ids is not None:
            parts.append("m.node_count = ANY(%(f_nodes)s)")
            params["f_nodes"] = self.node_numbers()
        if self.node_mask is not None:
            parts.append("m.node_count = ANY(%(f_rows)s)")
            params["f_rows"] = (np.flatnonzero(self.mask_rows()) + 1).tolist()
        return "".join(f" AND {p}" for p in parts), params


NO_FILTER = CandidateFilter()


def make_filter(
    *,
    created_after: datetime | date | str | None = None,
    created_before: datetime | date | str | None = None,
    types: Iterable[str] | str | None = None,
    min_poignancy: float | None = None,
    node_ids: Iterable[str] | None = None,
    node_mask: np.ndarray | Callable[[], np.ndarray] | None = None,
) -> CandidateFilter:
    """Validate filter values and build the filter.

    Args:
        created_after: a datetime, date or ISO text (inclusive).
        created_before: a datetime, date or ISO text (exclusive).
        types: memory types, e.g. ``["event"]`` or ``"thought"``.
        min_poignancy: a finite number.
        node_ids: ``node_N`` ids.
        node_mask: a boolean array over node rows, or a callable returning one.

    Returns:
        The filter.

    Raises:
        ValidationError: a value that is not a time, an unknown type, a poignancy that is
            not a finite number, or a window that ends before it starts; naming the field.
    """
    after = when(created_after, "created_after")
    before = when(created_before, "created_before")
    if after is not None and before is not None and before <= after:
        msg = f"created_before: {before.isoformat()} is not after created_after {after.isoformat()}"
        raise ValidationError(msg, field="created_before")
    return CandidateFilter(
        created_after=after,
        created_before=before,
        types=_types(types),
        min_poignancy=_poignancy(min_poignancy),
        node_ids=None if node_ids is None else frozenset(_ids(node_ids)),
        node_mask=_node_mask(node_mask),
    )


@overload
def when(value: None, field: str) -> None: ...


@overload
def when(value: datetime | date | str, field: str) -> datetime: ...


def when(value: datetime | date | str | None, field: str) -> datetime | None:
    """A time bound as the store compares it (naive; aware values converted to UTC).

    Args:
        value: a datetime, a date (its midnight), an ISO text, or None.
        field: the field name used in errors.

    Returns:
        The naive datetime, or None.

    Raises:
        ValidationError: anything else, or a text that is not an ISO date or time.
    """
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            msg = f"{field}: {value!r} is not an ISO date or time (e.g. {ISO_EXAMPLE})"
            raise ValidationError(msg, field=field) from None
    if isinstance(value, datetime):
        return naive(value, field)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    msg = f"{field}: expected a datetime, a date or an ISO text, got {type(value).__name__}"
    raise ValidationError(msg, field=field)


def _types(value: Iterable[str] | str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    items = [value] if isinstance(value, str) else list(value)
    for t in items:
        if t not in NODE_TYPES:
            msg = f"types: {t!r} is not a memory type; types are {TYPE_CHOICES}"
            raise ValidationError(msg, field="types")
    return tuple(dict.fromkeys(items))


def _poignancy(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value):
        msg = f"min_poignancy: expected a finite number, got {value!r}"
        raise ValidationError(msg, field="min_poignancy")
    return float(value)


def _node_mask(
    value: np.ndarray | Callable[[], np.ndarray] | None,
) -> np.ndarray | Callable[[], np.ndarray] | None:
    if value is None or callable(value):
        return value
    rows = np.asarray(value)
    if rows.ndim != 1 or rows.dtype != bool:
        msg = f"node_mask: expected a one-dimensional boolean array, got {rows.dtype} {rows.shape}"
        raise ValidationError(msg, field="node_mask")
    return rows


def _rows_in(allowed: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Whether each row is True in ``allowed`` (rows outside it are not)."""
    if rows.size == 0 or (rows.min() >= 0 and rows.max() < allowed.size):
        return allowed[rows]
    inside = (rows >= 0) & (rows < allowed.size)
    out = np.zeros(rows.shape, dtype=bool)
    out[inside] = allowed[rows[inside]]
    return out


def _ids(values: Iterable[str]) -> list[str]:
    if isinstance(values, str):
        msg = "node_ids: expected a list of node ids, got a single text"
        raise ValidationError(msg, field="node_ids")
    return [str(v) for v in values]
