"""A persona's live items, as a store last read them from the persona's key records.

The key records live in the persona's state (``extra["langgraph_store"]``): per namespace,
per key, the item's value, times, the memory that holds it (``node_id``), the other memories
it is embedded as (``facets``), the versions it superseded, and its TTL and expiry. This
module keeps them as entries by key, the rows (node number - 1) of each item's memories as
masks (:mod:`langchain_genmem.numerics.item_masks`), and the expiry of the items that have
one.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, TypedDict

import numpy as np
from langgraph.store.base import Item, SearchItem

from langchain_genmem.core.nodes import node_number_or_none
from langchain_genmem.core.state import StreamState
from langchain_genmem.numerics.item_masks import ItemMasks

__all__ = ["REGISTRY", "Items", "Key", "Record", "forgotten", "memory_ids", "ns_text",
           "live_version"]

REGISTRY = "langgraph_store"
"""The key of a persona's state ``extra`` that holds the store's key records."""

Key = tuple[tuple[str, ...], str]
"""An item's namespace and key."""


class _ItemFields(TypedDict):
    """The arguments an ``Item`` and a ``SearchItem`` share."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Record:
    """One live item: its memories and what ``get`` returns."""

    namespace: tuple[str, ...]
    key: str
    node_id: str
    facets: tuple[str, ...]
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    indexed: bool

    def holds(self, node_id: str) -> bool:
        """Whether ``node_id`` is one of this item's memories."""
        return node_id == self.node_id or node_id in self.facets

    def item(self, score: float | None = None, *, search: bool = False) -> Item:
        """The item as ``get`` (or, with ``search``, as ``search``) returns it."""
        fields = _ItemFields(namespace=self.namespace, key=self.key,
                             value=copy.deepcopy(self.value), created_at=self.created_at,
                             updated_at=self.updated_at)
        return SearchItem(**fields, score=score) if search else Item(**fields)


def live_version(entry: Mapping[str, Any]) -> list[str]:
    """The memories of a key's current version: its memory, then its other facets."""
    return [entry["node_id"], *entry.get("facets", ())]


def memory_ids(entry: Mapping[str, Any]) -> list[str]:
    """Every memory a key's record stands for: those it superseded, then its live ones."""
    return [*entry.get("superseded", ()), *live_version(entry)]


def ns_text(namespace: tuple[str, ...]) -> str:
    """A namespace as the key of its records."""
    return json.dumps(list(namespace), ensure_ascii=False)


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


def _rows(entry: Mapping[str, Any]) -> list[int]:
    """The rows of an entry's live memories (ids that are no memory of a stream left out)."""
    numbers = (node_number_or_none(i) for i in live_version(entry))
    return [n - 1 for n in numbers if n is not None]


def _same(held: Mapping[str, Any] | None, entry: Mapping[str, Any]) -> bool:
    return held is entry or (held is not None and held["node_id"] == entry["node_id"]
                             and held.get("expires_at") == entry.get("expires_at"))


class Items:
    """A persona's live items as this store last read them: entries by key, masks by row.

    Kept up to date by this store's own writes; a state another writer committed is
    compared with it entry by entry (by node id and expiry) and only the keys that changed
    are redone.
    """

    def __init__(self) -> None:
        self.rev = -1  # the state revision these items were read at
        self.entries: dict[Key, Mapping[str, Any]] = {}
        self.forgotten: set[Key] = set()  # records whose memory is forgotten: no items
        self.keys: dict[int, Key] = {}  # row -> key (every facet's row)
        self.expiring: dict[Key, datetime] = {}  # key -> when it expires (items with a TTL)
        self.masks = ItemMasks()
        self._records: dict[Key, Record] = {}  # made when first asked for

    def set(self, namespace: tuple[str, ...], key: str, entry: Mapping[str, Any]) -> None:
        """Hold a key's entry (replacing what the key held)."""
        self.drop(namespace, key)
        rows = _rows(entry)
        if not rows or rows[0] != (node_number_or_none(entry["node_id"]) or 0) - 1:
            return  # not a memory of this stream: nothing to find
        held = (namespace, key)
        self.entries[held] = entry
        if entry.get("expires_at"):
            self.expiring[held] = datetime.fromisoformat(entry["expires_at"])
        indexed = entry.get("indexed", True)
        for i, row in enumerate(rows):
            self.keys[row] = held
            self.masks.put(row, namespace, entry["value"], indexed=indexed, facet=i > 0)

    def drop(self, namespace: tuple[str, ...], key: str) -> None:
        """Hold nothing for a key."""
        held = (namespace, key)
        self._records.pop(held, None)
        self.expiring.pop(held, None)
        entry = self.entries.pop(held, None)
        for row in () if entry is None else _rows(entry):
            if self.keys.get(row) == held:
                del self.keys[row]
                self.masks.retire(row)

    def sync(
        self, registry: Mapping[str, Mapping[str, Mapping[str, Any]]], state: StreamState
    ) -> None:
        """Take a registry another writer committed: redo only the keys that changed.

        A record whose memory is forgotten in ``state`` is no item (the memory was forgotten
        outside the store, or by a delete of an earlier release, which wrote the key records
        after the forget and may have stopped in between); such records are kept in
        :attr:`forgotten` for the next write to drop.
        """
        seen: set[Key] = set()
        changed: list[tuple[Key, Mapping[str, Any]]] = []
        for text, entries in registry.items():
            namespace = tuple(json.loads(text))
            for key, entry in entries.items():
                seen.add((namespace, key))
                if not _same(self.entries.get((namespace, key)), entry):
                    changed.append(((namespace, key), entry))
        for gone in [k for k in self.entries if k not in seen]:
            self.drop(*gone)
        self.forgotten &= seen
        every = [(lo, hi) for lo, hi, _ in state.forgotten]
        lost = forgotten([entry for _, entry in changed], every)
        for ((namespace, key), entry), is_lost in zip(changed, lost, strict=True):
            if is_lost:
                self.lose(namespace, key)
            else:
                self.set(namespace, key, entry)
        since = state.forgotten_since(self.rev)  # held records whose memory went since
        if since:
            held = list(self.entries.items())
            lost = forgotten([entry for _, entry in held], since)
            for ((namespace, key), _), is_lost in zip(held, lost, strict=True):
                if is_lost:
                    self.lose(namespace, key)

    def lose(self, namespace: tuple[str, ...], key: str) -> None:
        """A record whose memory is forgotten: no item, and the next write drops it."""
        self.drop(namespace, key)
        self.forgotten.add((namespace, key))

    def expired(self, now: datetime) -> list[Key]:
        """The keys whose items expired at ``now`` (the stream's clock, naive)."""
        return [k for k, when in self.expiring.items() if when <= now]

    def is_expired(self, held: Key, now: datetime) -> bool:
        """Whether the item of a key expired at ``now``."""
        when = self.expiring.get(held)
        return when is not None and when <= now

    def expired_rows(self, now: datetime) -> np.ndarray:
        """Every row of every item expired at ``now`` (facets too)."""
        rows = [row for k in self.expired(now) for row in _rows(self.entries[k])]
        return np.asarray(rows, dtype=np.int64)

    def record(self, namespace: tuple[str, ...], key: str) -> Record | None:
        """The live item of a key (None: no item)."""
        made = self._records.get((namespace, key))
        if made is not None:
            return made
        r = self.entries.get((namespace, key))
        if r is None:
            return None
        made = self._records[(namespace, key)] = Record(
            namespace, key, r["node_id"], tuple(r.get("facets", ())), r["value"],
            _utc(r["created_at"]), _utc(r["updated_at"]), r.get("indexed", True),
        )
        return made


def forgotten(
    entries: Sequence[Mapping[str, Any]], ranges: Sequence[tuple[int, int]]
) -> list[bool]:
    """Whether each record's memory is in one of the forgotten ``(first, last)`` ranges."""
    if not ranges or not entries:
        return [False] * len(entries)
    numbers = np.array([node_number_or_none(e["node_id"]) or 0 for e in entries], dtype=np.int64)
    first, last = np.array(sorted(ranges), dtype=np.int64).T  # disjoint: ascending both
    at = np.searchsorted(first, numbers, side="right") - 1
    return ((at >= 0) & (numbers <= last[np.maximum(at, 0)])).tolist()
