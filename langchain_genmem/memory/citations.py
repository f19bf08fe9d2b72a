"""Which memories cite which: the index a forget follows to what depends on what it forgets.

A thought cites its evidence (node ids in its ``filling``); an event may cite the chat it is
about. Forgetting a memory takes the thoughts citing it along (recursively) or, with
``keep_derived``, takes its id out of their evidence; either way a forget must find the
memories citing the ones it forgets. :class:`Citations` keeps that map by node number, so
finding them costs what is forgotten, not a pass over every memory: it is built once, on the
first forget of a stream (one pass over the memories' fillings), then kept in step as
memories are added and forgotten.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import numpy as np

from langchain_genmem.core.nodes import TYPE_CODES, MemoryNode, node_number_or_none

# The types whose filling may name memories: a thought's evidence, an event's chat.
_CITING = [TYPE_CODES["thought"], TYPE_CODES["event"]]


class Rows(Protocol):
    """What the index reads of a stream's cache when it is built."""

    node_number: np.ndarray
    type_code: np.ndarray

    def live_rows(self) -> np.ndarray:
        """Every live row."""

    def fillings(self, rows: Sequence[int]) -> list[Any]:
        """The ``filling`` of each row (no node made for it)."""


def cited(filling: Any) -> list[int]:
    """The node numbers a memory cites (the ids in its ``filling``), each once.

    Args:
        filling: the memory's filling.

    Returns:
        The numbers; none for a chat (its filling is what was said).
    """
    if not isinstance(filling, list):
        return []
    numbers = (node_number_or_none(x) for x in filling if isinstance(x, str))
    return list(dict.fromkeys(n for n in numbers if n is not None))


class Citations:
    """``{cited number: {citing number: is a thought}}`` over a stream's held memories."""

    def __init__(self) -> None:
        self._by_cited: dict[int, dict[int, bool]] = {}
        self.built = False

    def build(self, cache: Rows) -> None:
        """Index every live memory of ``cache`` (once; later calls do nothing).

        Args:
            cache: the stream's cache.
        """
        if self.built:
            return
        rows = cache.live_rows()
        rows = rows[np.isin(cache.type_code[rows], _CITING)]
        thought = TYPE_CODES["thought"]
        for number, code, filling in zip(cache.node_number[rows].tolist(),
                                         cache.type_code[rows].tolist(),
                                         cache.fillings(rows.tolist()), strict=True):
            self._index(number, code == thought, filling)
        self.built = True

    def add(self, nodes: Iterable[MemoryNode]) -> None:
        """Index memories as they are held.

        Args:
            nodes: the memories.
        """
        for node in nodes:
            self._index(node.node_count, node.type == "thought", node.filling)

    def _index(self, number: int, thought: bool, filling: Any) -> None:
        for cited_number in cited(filling):
            self._by_cited.setdefault(cited_number, {})[number] = thought

    def citing(self, numbers: Iterable[int], *, thoughts_only: bool = False) -> set[int]:
        """The memories citing any of ``numbers``.

        Args:
            numbers: cited node numbers.
            thoughts_only: only the thoughts among them.

        Returns:
            Their numbers.
        """
        out: set[int] = set()
        for number in numbers:
            for citing, thought in self._by_cited.get(number, {}).items():
                if thought or not thoughts_only:
                    out.add(citing)
        return out

    def remove(self, nodes: Iterable[MemoryNode]) -> None:
        """Stop indexing forgotten memories: as cited and as citing.

        Args:
            nodes: the forgotten memories.
        """
        for node in nodes:
            self._by_cited.pop(node.node_count, None)
            for number in cited(node.filling):
                held = self._by_cited.get(number)
                if held is not None:
                    held.pop(node.node_count, None)
                    if not held:
                        del self._by_cited[number]
