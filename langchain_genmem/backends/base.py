"""The small storage interface every ``MemoryStream`` goes through.

A backend stores, per persona, numbered nodes with one vector each and one state record.
The state record is the commit point: a node ``node_N`` counts only when the committed
``state.node_count >= N``. A write that fails before its state record is stored leaves
nothing visible, so "either the memory is stored with its keywords and counters, or it is
not stored at all" holds even across a crash.

Chroma (:mod:`langchain_genmem.backends.chroma`) is the implementation today; a
PostgreSQL/pgvector one only has to provide these methods.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from langchain_genmem.nodes import MemoryNode
from langchain_genmem.state import StreamState


@dataclass(frozen=True)
class StoredNode:
    """A node with its vector, as stored.

    Attributes:
        node: the memory.
        vector: its embedding (1-d).
    """

    node: MemoryNode
    vector: np.ndarray


@dataclass(frozen=True)
class Head:
    """The cheap part of a persona's state, read before every retrieval.

    Attributes:
        rev: the state's revision.
        node_count: committed nodes.
        access_rev: bumped when access times are stored, where the backend tracks it
            (PostgreSQL); a stream that saw another value reloads the changed times.
    """

    rev: int
    node_count: int
    access_rev: int = 0


@runtime_checkable
class MemoryBackend(Protocol):
    """Storage of nodes, vectors and state, per persona."""

    def read_head(self, persona: str) -> Head | None:
        """The persona's revision and node count, or None for a persona never written."""

    def read_state(self, persona: str) -> StreamState | None:
        """The persona's committed state, or None for a persona never written."""

    def read_nodes(self, persona: str, first: int, last: int) -> list[StoredNode]:
        """Nodes ``node_first`` .. ``node_last`` (inclusive) with their vectors, in order."""

    def commit(self, persona: str, nodes: Sequence[StoredNode], state: StreamState) -> None:
        """Store new nodes, then the state that makes them visible; all or nothing."""

    def write_state(self, persona: str, state: StreamState) -> None:
        """Store a new state with no new nodes (settings, counters)."""

    def write_access(self, persona: str, times: Mapping[str, float]) -> None:
        """Store last-access times (epoch seconds) of existing nodes, by node id."""

    def personas(self) -> list[str]:
        """Every persona with a committed state."""

    def drop(self, persona: str) -> None:
        """Delete every node and the state of a persona."""
