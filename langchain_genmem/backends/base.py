"""The small storage interface every ``MemoryStream`` goes through.

A backend stores, per persona, numbered nodes with one vector each and one state record. The
state record is the commit point: a node ``node_N`` counts only when the committed
``state.node_count >= N``. (Chroma lets a one-node commit carry its state change in the node
record itself, one write instead of two; ``read_head``/``read_state`` then return the state
record with those changes applied, so callers see one committed state either way.) A write
that fails before its state record is stored leaves nothing visible, so "either the memory
is stored with its keywords and counters, or it is not stored at all" holds even across a
crash.

Writers: every write of a persona (nodes, state, settings) runs inside
``backend.write_lock(persona)``. Inside it the stream catches up with what other writers
committed (``read_head``, then ``read_state``/``read_nodes``), removes uncommitted records
left by a crashed writer (``remove_uncommitted``), numbers its new nodes from the committed
count and calls ``commit``/``write_state``. So a second writer of one persona is either
serialised behind the first (and numbers after it) or refused with
:class:`~langchain_genmem.errors.ConcurrentWriterError`; it is never silently lost.
``write_access`` (access times of existing nodes) needs no lock.

Chroma (:mod:`langchain_genmem.backends.chroma`) is the implementation today; a
PostgreSQL/pgvector one only has to provide these methods.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
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

    def write_lock(self, persona: str) -> AbstractContextManager[None]:
        """Hold the exclusive right to write ``persona`` until the ``with`` block exits.

        What the stream does inside the block, in this order, all in the one thread that
        entered it: ``read_head`` (and ``read_state``/``read_nodes`` if the head moved since
        its cache), ``remove_uncommitted``, then exactly one ``commit`` (new nodes) or
        ``write_state`` (settings, trigger reset, extras). Counters, ``kw_strength``,
        depths and node numbers are computed from the committed state read there. Slow work
        (scoring, embedding) happens before the block; ``write_access`` never takes it.

        The stream mirrors the write in its cache only after the block exits without an
        exception, so a backend may make the write durable at exit (PostgreSQL: one
        transaction holding ``pg_advisory_xact_lock`` on the persona, ``commit`` running
        inside it, COMMIT at exit, ROLLBACK if the block raised). If exiting fails, raise
        :class:`~langchain_genmem.errors.StorageError`: the stream then shows nothing of it.

        Threads of one process must be serialised too: two streams of one persona in one
        process are two writers (a stream serialises its own threads). The block is not
        re-entered by the thread holding it.

        A backend on which several writers are safe serialises them here, waiting up to a
        timeout of its own. One that cannot give the right, or waited too long, raises
        :class:`~langchain_genmem.errors.ConcurrentWriterError` naming the holder (host,
        pid, since when) before anything is written. A process that dies inside the block
        must not keep the right forever (OS locks and transactions die with the process,
        leases expire).

        Args:
            persona: the persona to write.

        Returns:
            A context manager; entering it may block and may raise.
        """

    def remove_uncommitted(self, persona: str, node_count: int) -> int:
        """Delete records of nodes numbered above ``node_count`` (a crashed write's leftovers).

        Called inside :meth:`write_lock` on every write, before new nodes are numbered, so
        no record can lend a field to a new node with the same id; keep it cheap. A backend
        whose commits are transactional has none and returns 0.

        Args:
            persona: the persona.
            node_count: the committed node count.

        Returns:
            How many records were removed.
        """

    def commit(self, persona: str, nodes: Sequence[StoredNode], state: StreamState) -> None:
        """Store new nodes, then the state that makes them visible; all or nothing.

        Each node record is stored whole: no field of an earlier record with the same id
        may survive (a replace, never a merge).
        """

    def write_state(self, persona: str, state: StreamState) -> None:
        """Store a new state with no new nodes (settings, counters)."""

    def write_access(self, persona: str, times: Mapping[str, float]) -> None:
        """Store last-access times (epoch seconds) of existing nodes, by node id."""

    def personas(self) -> list[str]:
        """Every persona with a committed state."""

    def drop(self, persona: str) -> None:
        """Delete every node and the state of a persona."""
