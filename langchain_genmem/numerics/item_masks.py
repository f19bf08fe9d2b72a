"""Which rows of a stream hold a live item, and tests on their fields, as boolean masks.

A store that keeps items as memories (the LangGraph store) needs, for every search, the
memories that are some key's current version, in a namespace under a prefix, whose value
passes a filter. Testing every item in Python per search costs a call per item; here each
row's group (namespace) and each filtered value field are *interned*: rows holding equal
values share a code, a test runs once per distinct value, and the mask over every row is
one gather of the verdicts by code. A mask is indexed by node number - 1 (not by cache row:
forgotten numbers leave gaps), as a candidate filter's ``node_mask`` is.

The masks are kept up to date item by item (:meth:`ItemMasks.put`, :meth:`ItemMasks.retire`);
verdicts of a test are kept for the values seen so far and extended to new ones, so a
repeated search tests nothing again.

Example:
    .. code-block:: python

        masks = ItemMasks()
        masks.put(0, ("memories", "u1"), {"topic": "food"}, indexed=True)
        masks.select(ValueTest(("memories",), lambda ns: ns[:1] == ("memories",)),
                     {"topic": ValueTest("food", lambda v: v == "food")})
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

_SCALARS = (str, bool, int, float, type(None))
_KEPT_TESTS = 64  # verdict tables kept per column (the most recent tests)

Rows = Literal["items", "ranked", "unranked"]
"""Which rows a selection keeps: one per live item (its first memory), every row ranked search
may return (an item's other facets too), or the items ranked search does not see."""


@dataclass(frozen=True)
class ValueTest:
    """A test on one field's values.

    Attributes:
        key: what identifies the test (equal keys must mean the same test), e.g. the
            filter's ``repr``.
        passes: value -> whether a row holding it passes.
        only: a text that is the one value passing, when the test is plain equality with
            it: the rows holding it are found by their code, with no call per value.
    """

    key: Hashable
    passes: Callable[[Any], bool]
    only: str | None = None


def _identity(value: Any) -> Hashable:
    """A key equal only for values no test can tell apart (type included: 1, 1.0, True differ)."""
    if isinstance(value, _SCALARS):
        return (type(value), value)
    return (type(value), repr(value))


class InternedColumn:
    """One field of every row: rows holding equal values share a code (-1: no row)."""

    def __init__(self) -> None:
        self.codes = np.full(0, -1, dtype=np.int32)
        self.values: list[Any] = []
        self._code_of: dict[Hashable, int] = {}
        self._verdicts: dict[Hashable, np.ndarray] = {}

    def set(self, row: int, value: Any) -> None:
        """Hold ``value`` at ``row``.

        Args:
            row: the row.
            value: its value.
        """
        if row >= self.codes.size:
            grown = np.full(max(row + 1, 2 * self.codes.size, 64), -1, dtype=np.int32)
            grown[: self.codes.size] = self.codes
            self.codes = grown
        ident = _identity(value)
        code = self._code_of.get(ident)
        if code is None:
            code = self._code_of[ident] = len(self.values)
            self.values.append(value)
        self.codes[row] = code

    def clear(self, row: int) -> None:
        """Hold nothing at ``row`` (it passes no test).

        Args:
            row: the row.
        """
        if row < self.codes.size:
            self.codes[row] = -1

    def mask(self, test: ValueTest, n: int) -> np.ndarray:
        """Rows ``0..n-1`` whose value passes ``test``; a row holding nothing passes none.

        Args:
            test: the test.
            n: how many rows.

        Returns:
            A boolean array of length ``n``.
        """
        if test.only is not None:
            code = self._code_of.get(_identity(test.only))
            out = np.zeros(n, dtype=bool)
            if code is not None:
                codes = self.codes[:n]
                out[: codes.size] = codes == code
            return out
        held = self._verdicts.pop(test.key, np.zeros(0, dtype=bool))
        if held.size < len(self.values):
            fresh = [bool(test.passes(v)) for v in self.values[held.size :]]
            held = np.concatenate([held, np.array(fresh, dtype=bool)])
        self._verdicts[test.key] = held  # most recent last
        while len(self._verdicts) > _KEPT_TESTS:
            del self._verdicts[next(iter(self._verdicts))]
        table = np.append(held, False)  # code -1 picks the last: no row passes
        codes = self.codes[:n]
        out = table[codes]
        if codes.size < n:
            out = np.concatenate([out, np.zeros(n - codes.size, dtype=bool)])
        return out


class ItemMasks:
    """The rows holding live items: their group, whether ranked search sees them, their fields.

    An item may be held by several rows (the memories of its facets): the first is its
    *primary* row, the one a listing shows; ranked search sees all of them. Field columns
    are made on the first test of a field and kept up to date after.
    """

    def __init__(self) -> None:
        self.size = 0  # rows 0..size-1 may hold an item
        self.live = np.zeros(0, dtype=bool)
        self.indexed = np.zeros(0, dtype=bool)
        self.primary = np.zeros(0, dtype=bool)
        self.groups = InternedColumn()
        self._values: dict[int, Mapping[str, Any]] = {}
        self._fields: dict[str, InternedColumn] = {}
        self._memo: dict[Hashable, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self._values)

    def put(self, row: int, group: Hashable, value: Mapping[str, Any], *, indexed: bool,
            facet: bool = False) -> None:
        """Hold a live item at ``row``.

        Args:
            row: the row (node number - 1).
            group: its group (e.g. the namespace).
            value: its value fields.
            indexed: whether ranked search may return it.
            facet: the row is one of the item's other facets, not its primary row.
        """
        self._memo.clear()
        if row >= self.live.size:
            cap = max(row + 1, 2 * self.live.size, 64)
            self.live = _grown(self.live, cap)
            self.indexed = _grown(self.indexed, cap)
            self.primary = _grown(self.primary, cap)
        self.size = max(self.size, row + 1)
        self.live[row], self.indexed[row], self.primary[row] = True, indexed, not facet
        self.groups.set(row, group)
        self._values[row] = value
        for name, column in self._fields.items():
            column.set(row, field_value(value, name))

    def retire(self, row: int) -> None:
        """Hold no item at ``row`` any more (a superseded or deleted item).

        Args:
            row: the row.
        """
        if self._values.pop(row, None) is None:
            return
        self._memo.clear()
        self.live[row] = self.indexed[row] = self.primary[row] = False
        self.groups.clear(row)
        for column in self._fields.values():
            column.clear(row)

    def select(
        self, group: ValueTest, fields: Mapping[str, ValueTest], *, rows: Rows = "items"
    ) -> np.ndarray:
        """The live rows whose group and fields pass the tests (a missing field is None).

        Args:
            group: the test on the group.
            fields: field name -> the test on its value.
            rows: which rows (:data:`Rows`): one per item, those ranked search sees, or the
                items it does not see.

        Returns:
            A boolean array of length :attr:`size` (do not modify it: it is kept for the
            same selection until an item changes).
        """
        memo = (group.key, tuple((k, t.key) for k, t in fields.items()), rows)
        held = self._memo.get(memo)
        if held is not None:
            return held
        n = self.size
        if rows == "ranked":
            keep = self.indexed[:n].copy()
        elif rows == "items":
            keep = self.primary[:n].copy()
        else:
            keep = self.primary[:n] & ~self.indexed[:n]
        if keep.any():
            keep &= self.groups.mask(group, n)
        for name, test in fields.items():
            if not keep.any():
                break
            keep &= self._column(name).mask(test, n)
        keep.flags.writeable = False
        self._memo[memo] = keep
        return keep

    def _column(self, name: str) -> InternedColumn:
        column = self._fields.get(name)
        if column is None:
            column = self._fields[name] = InternedColumn()
            for row, value in self._values.items():
                column.set(row, field_value(value, name))
        return column


def field_value(value: Mapping[str, Any], name: str) -> Any:
    """A value's field: the key itself, else a dotted path into nested objects.

    Args:
        value: an item's value.
        name: a key (``"access-level"``) or a dotted path (``"user.access-level"``), as
            LangGraph's SQL stores read filter keys.

    Returns:
        The field's value, or None when the value has none.
    """
    if name in value or "." not in name:
        return value.get(name)
    found: Any = value
    for part in name.split("."):
        if not isinstance(found, Mapping) or part not in found:
            return None
        found = found[part]
    return found


def _grown(column: np.ndarray, cap: int) -> np.ndarray:
    out = np.zeros(cap, dtype=column.dtype)
    out[: column.size] = column
    return out
