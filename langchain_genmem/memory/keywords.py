"""Keyword side-index and keyword strengths, with the original's rules.

The original ``AssociativeMemory`` keeps, per node type, a map keyword -> nodes (newest
first), and for events and thoughts a count of how often each keyword was written
(``kw_strength_event`` / ``kw_strength_thought``). Rules kept here:

- keywords are lowercased on write **and on lookup** (the original forgot the lookup, so a
  capitalised subject never matched in the original's AssociativeMemory);
- a node whose ``predicate object`` is ``is idle`` adds to the index but not to strengths;
- chats have an index but no strengths;
- lookups return node ids newest first without repeats, a defined order where the original
  returned a ``set``.

The index is derived data: it is rebuilt from the stored nodes when a stream opens. The
strengths are not (a loaded ``kw_strength.json`` replaces the replayed counts, as in the
original), so they are persisted with the stream's state.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from langchain_genmem.core.nodes import NODE_TYPES, STRENGTH_TYPES, MemoryNode, node_number
from langchain_genmem.core.text import unique

_LONG = 4096  # a keyword list longer than this marks forgotten ids stale, not removed
_STALE_MAX = 16384  # stale ids past which every list is cleaned of them at once

__all__ = [  # STRENGTH_TYPES and unique are the vocabulary's, importable here as before
    "STRENGTH_TYPES",
    "KeywordIndex",
    "Keyworded",
    "count_keywords",
    "counts_toward_strength",
    "default_keywords",
    "unique",
]


class Keyworded(Protocol):
    """What keyword strengths read of a memory: a :class:`MemoryNode` has it all."""

    @property
    def type(self) -> str:
        """The node type."""

    @property
    def predicate(self) -> str:
        """The triple's predicate."""

    @property
    def object(self) -> str:
        """The triple's object."""

    @property
    def keywords(self) -> Sequence[str]:
        """The keywords as written."""


def default_keywords(node_type: str, subject: str, predicate: str, obj: str) -> list[str]:
    """The keywords the original derives from a triple.

    Events and chats (``perceive.py``) use the subject and object, each cut to its part after
    the last ``:`` (``"the Ville:cafe:counter"`` gives ``"counter"``); thoughts (``reflect.py``)
    use subject, predicate and object as they are. Empty parts are dropped, repeats removed.

    Args:
        node_type: ``"event"``, ``"thought"`` or ``"chat"``.
        subject: the triple's subject.
        predicate: the triple's predicate.
        obj: the triple's object.

    Returns:
        The keywords in first-seen order.
    """
    if node_type == "thought":
        parts = [subject, predicate, obj]
    else:
        parts = [subject.split(":")[-1], obj.split(":")[-1]]
    return unique(p for p in parts if p and p.strip())


def counts_toward_strength(node: Keyworded) -> bool:
    """Whether a node adds to keyword strengths (events and thoughts that are not idle).

    Args:
        node: the node.

    Returns:
        True when its keywords are counted.
    """
    return node.type in STRENGTH_TYPES and f"{node.predicate} {node.object}" != "is idle"


@dataclass
class KeywordIndex:
    """Keyword -> node ids per node type (newest first), and keyword strengths.

    Attributes:
        index: ``index[type][keyword]`` lists node ids, oldest first (an append per node, so
            indexing n nodes is linear; :meth:`newest_first` gives the original's order).
            A long list may still hold ids in :attr:`stale`: read it through
            :meth:`lookup`, :meth:`newest_first` or :meth:`listed`.
        strength: ``strength["event"|"thought"][keyword]`` counts writes of the keyword.
        stale: ids of forgotten nodes left in long lists (a keyword most memories hold),
            skipped by every reader and taken out of the lists all at once later: so a
            forget costs what it forgets, not the length of such a list.
    """

    index: dict[str, dict[str, list[str]]] = field(
        default_factory=lambda: {t: {} for t in NODE_TYPES}
    )
    stale: set[str] = field(default_factory=set)
    # Never changed in place: a stream's committed states share these maps (an add copies
    # only the map it changes, see strength_after).
    strength: dict[str, dict[str, int]] = field(
        default_factory=lambda: {t: {} for t in STRENGTH_TYPES}
    )

    def add(self, node: MemoryNode) -> None:
        """Index a node newer than every node indexed so far, and count its keywords.

        Args:
            node: the node.
        """
        self.index_node(node)
        self.strength = self.strength_after(self.strength_changes([node]))

    def index_node(self, node: MemoryNode) -> None:
        """Index a node newer than every node indexed so far; strengths are left alone.

        Args:
            node: the node.
        """
        by_kw = self.index[node.type]
        for kw in unique(k.lower() for k in node.keywords):
            by_kw.setdefault(kw, []).append(node.node_id)

    def newest_first(self) -> dict[str, dict[str, list[str]]]:
        """A copy of the index with each list newest first, as the original keeps it.

        Returns:
            ``{type: {keyword: node ids}}``.
        """
        return {t: {k: v[::-1] for k, v in m.items()} for t, m in self.listed().items()}

    def strength_changes(self, nodes: Iterable[MemoryNode]) -> dict[str, dict[str, int]]:
        """The strengths adding ``nodes`` changes, with their new counts.

        Its cost is the nodes' keywords, not the persona's: a single add stays as quick
        with a hundred thousand distinct keywords as with ten.

        Args:
            nodes: nodes about to be written, oldest first.

        Returns:
            ``{type: {keyword: new count}}`` for the keywords they count, nothing else.
        """
        changes: dict[str, dict[str, int]] = {}
        for node in nodes:
            counted = _counted(node)
            if counted:
                before = self.strength.get(node.type, {})
                mine = changes.setdefault(node.type, {})
                for kw in counted:
                    mine[kw] = mine.get(kw, before.get(kw, 0)) + 1
        return changes

    def strength_after(self, changes: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
        """The strengths with ``changes`` applied; maps they leave alone are shared, not copied.

        Args:
            changes: from :meth:`strength_changes`.

        Returns:
            New strength maps (the current ones are not touched).
        """
        out = dict(self.strength)
        for kind, counts in changes.items():
            out[kind] = {**out.get(kind, {}), **counts}
        return out

    def remove(self, nodes: Iterable[MemoryNode]) -> None:
        """Stop indexing nodes (forgotten ones); keywords left with no node go.

        Costs the nodes' keywords: an id is found by bisection in its keyword's list (ids
        are indexed oldest first, so each list is ascending by node number) and taken out;
        in a long list (:data:`_LONG`) it is only marked :attr:`stale`, and every stale id
        is taken out of every list at once when they are many (:data:`_STALE_MAX`).

        Args:
            nodes: the nodes.
        """
        for node in nodes:
            by_kw = self.index.get(node.type, {})
            for kw in unique(k.lower() for k in node.keywords):
                held = by_kw.get(kw)
                if held is None:
                    continue
                if len(held) > _LONG:
                    self.stale.add(node.node_id)
                    continue
                at = bisect.bisect_left(held, node.node_count, key=node_number)
                if at < len(held) and held[at] == node.node_id:
                    del held[at]
                if not held:
                    del by_kw[kw]
        if len(self.stale) > _STALE_MAX:
            self.index, self.stale = self.listed(), set()

    def listed(self) -> dict[str, dict[str, list[str]]]:
        """The index without stale ids, oldest first (a copy where it differs).

        Returns:
            ``{type: {keyword: node ids}}``.
        """
        if not self.stale:
            return self.index
        stale = self.stale
        out: dict[str, dict[str, list[str]]] = {}
        for kind, by_kw in self.index.items():
            kept = {kw: [i for i in ids if i not in stale] for kw, ids in by_kw.items()}
            out[kind] = {kw: ids for kw, ids in kept.items() if ids}
        return out

    def strength_without(self, nodes: Sequence[MemoryNode]) -> dict[str, dict[str, int]]:
        """The strengths once ``nodes`` are forgotten (computed before the index drops them).

        Each keyword a forgotten node counted loses one per such node; a keyword no
        indexed node of its type holds any more goes whole (an imported strength may
        count more writes than the nodes held).

        Args:
            nodes: the forgotten nodes.

        Returns:
            New strength maps (the current ones are not touched).
        """
        gone = {node.node_id for node in nodes}
        lost: dict[str, dict[str, int]] = {}
        for node in nodes:
            mine = lost.setdefault(node.type, {})
            for kw in _counted(node):
                mine[kw] = mine.get(kw, 0) + 1
        out = dict(self.strength)
        for kind, counts in lost.items():
            if not counts or kind not in out:
                continue
            held, indexed = dict(out[kind]), self.index.get(kind, {})
            for kw, n in counts.items():
                if kw in held:
                    left = held.pop(kw) - n
                    if any(i not in gone and i not in self.stale for i in indexed.get(kw, ())):
                        held[kw] = max(left, 1)
            out[kind] = held
        return out

    def strength_without_all(
        self, cache: NodeLookup
    ) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
        """The strengths once every indexed node is forgotten, and what that changes.

        As :meth:`strength_without` of every node, at the cost of the keywords: a keyword
        some counted node holds goes whole (no node is left to hold it); a keyword only
        uncounted nodes hold (idle ones), or none (an imported strength), stays. A keyword's
        ids are read until one of a counted node.

        Args:
            cache: the stream's cache (its nodes by number).

        Returns:
            The new strength maps, and ``{type: {keyword: 0}}`` of those that go.
        """
        out = dict(self.strength)
        changes: dict[str, dict[str, int]] = {}
        for kind, counts in self.strength.items():
            indexed = self.index.get(kind, {})
            gone = {kw for kw in counts if _counted_by_any(indexed.get(kw, ()), cache)}
            if gone:
                out[kind] = {kw: n for kw, n in counts.items() if kw not in gone}
                changes[kind] = dict.fromkeys(gone, 0)
        return out, changes

    def lookup(self, node_type: str, terms: Sequence[str]) -> list[str]:
        """Node ids of one type indexed under any of the terms, newest first, no repeats.

        Args:
            node_type: ``"event"``, ``"thought"`` or ``"chat"``.
            terms: search terms, matched case-insensitively against whole keywords.

        Returns:
            The node ids.
        """
        by_kw, stale = self.index[node_type], self.stale
        found: dict[str, None] = {}
        for term in terms:
            for node_id in by_kw.get((term or "").lower(), ()):
                if node_id not in stale:
                    found[node_id] = None
        return sorted(found, key=node_number, reverse=True)


class NodeLookup(Protocol):
    """What :meth:`KeywordIndex.strength_without_all` reads of a stream's cache."""

    def row_of_number(self, number: int) -> int | None:
        """The live row of a node number."""

    @property
    def nodes(self) -> Sequence[MemoryNode]:
        """The MemoryNode of each row."""


def _counted_by_any(node_ids: Iterable[str], cache: NodeLookup) -> bool:
    """Whether a held node of ``node_ids`` counts toward its keywords' strengths."""
    for node_id in node_ids:
        row = cache.row_of_number(node_number(node_id))
        if row is not None and counts_toward_strength(cache.nodes[row]):
            return True
    return False


def changed_strengths(
    nodes: Iterable[MemoryNode], after: dict[str, dict[str, int]]
) -> dict[str, dict[str, int]]:
    """The strengths of the keywords ``nodes`` count, as ``after`` holds them (0: gone).

    What a forget of ``nodes`` changes, for a backend that stores only changed strengths.

    Args:
        nodes: the nodes forgotten.
        after: the strengths once they are forgotten (:meth:`KeywordIndex.strength_without`).

    Returns:
        ``{type: {keyword: count}}``.
    """
    out: dict[str, dict[str, int]] = {}
    for node in nodes:
        held = after.get(node.type, {})
        for kw in _counted(node):
            out.setdefault(node.type, {})[kw] = held.get(kw, 0)
    return out


def count_keywords(strength: dict[str, dict[str, int]], node: Keyworded) -> None:
    """Add a node's keywords to strength maps when the node counts (see module docstring).

    Args:
        strength: ``strength["event"|"thought"][keyword]`` counts, changed in place.
        node: the node.
    """
    counted = _counted(node)
    if counted:
        counts = strength[node.type]
        for kw in counted:
            counts[kw] = counts.get(kw, 0) + 1


def _counted(node: Keyworded) -> list[str]:
    """The keywords a node adds to its type's strengths (lowercased, once each), if any."""
    if not counts_toward_strength(node):
        return []
    return unique(k.lower() for k in node.keywords)
