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
:class:`~langchain_genmem.core.errors.ConcurrentWriterError`; it is never silently lost.
``write_access`` (access times of existing nodes) needs no lock.

Forgetting (:meth:`MemoryBackend.forget`) deletes nodes for good: their records (text,
vector, fields, keyword and access rows) leave the store, and the state that lists their
numbers in :attr:`~langchain_genmem.core.state.StreamState.forgotten` is committed with the
deletion, all or nothing. Numbers are never reused (``node_count`` stays the highest ever
given), so :meth:`MemoryBackend.read_nodes` returns the nodes of a range that still exist,
with gaps, and a process that cached an older revision drops
:meth:`~langchain_genmem.core.state.StreamState.forgotten_since` its revision. A kept
conversation turn embedded with a forgotten turn gets its new embedded text and vector in the
same write (``replaced``, listed in
:attr:`~langchain_genmem.core.state.StreamState.rekeyed` at the forget's revision), and a
process that cached an older revision reloads
:meth:`~langchain_genmem.core.state.StreamState.rekeyed_since` its revision. It is a
required method, not a capability: a user's right to have a memory deleted holds on every
store.

Required and optional: every backend provides the methods of :class:`MemoryBackend` (eleven
for the memory, ``close`` to release what it holds) and says in ``capabilities`` which
optional ones it adds, each a protocol here: :class:`SnapshotStore` (``"snapshots"``: the
stream opens from a saved copy of its cache), :class:`AccessLog` (``"access_log"``: access
times other processes stored are read back by revision), :class:`StoreRanking`
(``"ranking"``: the store ranks every candidate itself, ``score_in="database"``) and
:class:`ReadViews` (``"views"``: the reads of one open or catch-up see one moment of the
store) and :class:`Compaction` (``"compaction"``: whole-store work a forget leaves out, such
as rebuilding a database file, run when asked). Callers ask :func:`snapshots_of`,
:func:`access_log_of`, :func:`ranking_of`, :func:`views_of` and :func:`compaction_of`, never
the class.

Backends today: Chroma (:mod:`~langchain_genmem.backends.chroma`; ``"snapshots"``,
``"views"`` and ``"compaction"`` on an embedded folder) and PostgreSQL
(:mod:`~langchain_genmem.backends.postgres`; ``"access_log"`` and ``"ranking"``).
:func:`~langchain_genmem.backends.opener.open_backend` opens either from a folder, a Chroma
server or client, or a DSN.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol, cast, runtime_checkable

import numpy as np

from langchain_genmem.backends import snapshot
from langchain_genmem.core.errors import ValidationError
from langchain_genmem.core.modes import RecencyMode
from langchain_genmem.core.nodes import MemoryNode
from langchain_genmem.core.state import StreamState, number_runs
from langchain_genmem.numerics.scoring import Weights

STORE_TIMEOUT_VARIABLE = "GENMEM_STORE_TIMEOUT"
"""The environment variable a backend that waits for connections (PostgreSQL) reads its
request timeout from when its caller gives none (``genmem serve --store-timeout`` reads it)."""

CONFLICT_ATTEMPTS = 3
"""How many times, in all, a transaction the store ended in a conflict (a deadlock, a
serialization failure: :class:`~langchain_genmem.core.errors.StorageConflictError`) is run:
by a backend for a call that is its own transaction, by the stream for a write."""

CONFLICT_BACKOFF = 0.05
"""Seconds: before its attempt ``n + 1`` such a transaction waits a random time up to
``CONFLICT_BACKOFF * 2 ** n`` (jitter, so the transactions that met do not meet again)."""


def conflict_pause(attempt: int) -> float:
    """Seconds to wait before running a transaction again after its ``attempt``-th conflict.

    Args:
        attempt: how many attempts ended in a conflict so far (1 after the first).

    Returns:
        A random time up to ``CONFLICT_BACKOFF * 2 ** (attempt - 1)``.
    """
    return random.uniform(0, CONFLICT_BACKOFF * 2 ** (attempt - 1))  # noqa: S311 - jitter


Capability = Literal["snapshots", "access_log", "ranking", "views", "compaction"]
CAPABILITIES: tuple[Capability, ...] = ("snapshots", "access_log", "ranking", "views",
                                        "compaction")


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
        node_count: the highest committed node number (forgotten ones included).
        access_rev: bumped when access times are stored, where the backend tracks it
            (PostgreSQL); a stream that saw another value reloads the changed times.
    """

    rev: int
    node_count: int
    access_rev: int = 0


@dataclass(frozen=True)
class ScoredRow:
    """One candidate a store ranked: the node and its components.

    Attributes:
        node: the memory.
        score: the weighted score.
        recency: normalised recency.
        relevance: normalised relevance.
        importance: normalised importance.
        cosine: raw cosine similarity.
    """

    node: MemoryNode
    score: float
    recency: float
    relevance: float
    importance: float
    cosine: float


@dataclass(frozen=True)
class DatabaseRanking:
    """The outcome of one ranking in the store.

    Attributes:
        rows: the top k, best first.
        candidate_count: how many candidates were scored.
        min_score: the lowest score among candidates.
    """

    rows: list[ScoredRow]
    candidate_count: int
    min_score: float | None


@dataclass(frozen=True)
class Erasure:
    """Whether a forget's records were erased from the store's own files.

    Attributes:
        erased: True when what held them was overwritten before their delete; False when
            they were only deleted, as the store deletes.
        reason: why they were not erased, in one line (None when they were).
    """

    erased: bool
    reason: str | None = None


@runtime_checkable
class MemoryBackend(Protocol):
    """Storage of nodes, vectors and state, per persona: what every backend provides.

    Attributes:
        capabilities: the optional protocols this backend (this instance: an embedded Chroma
            folder has snapshots, a Chroma server has none) provides, by name.
    """

    @property
    def capabilities(self) -> frozenset[Capability]:
        """The optional protocols provided (read-only: a class attribute or a property)."""

    def read_head(self, persona: str) -> Head | None:
        """The persona's revision and node count, or None for a persona never written."""

    def read_state(self, persona: str) -> StreamState | None:
        """The persona's committed state, or None for a persona never written."""

    def read_nodes(self, persona: str, first: int, last: int) -> list[StoredNode]:
        """The nodes numbered ``first`` .. ``last`` (inclusive) that exist, with their vectors.

        In ascending order; forgotten numbers are left out (the list may have gaps), also
        while a forget is being finished. A committed number that is neither stored nor
        forgotten raises :class:`~langchain_genmem.core.errors.StorageError`.
        """

    def write_lock(self, persona: str) -> AbstractContextManager[None]:
        """Hold the exclusive right to write ``persona`` until the ``with`` block exits.

        What the stream does inside the block, in this order, all in the one thread that
        entered it: ``read_head`` (and ``read_state``/``read_nodes`` if the head moved since
        its cache), ``remove_uncommitted``, then exactly one ``commit`` (new nodes),
        ``forget`` (deleting nodes) or ``write_state`` (settings, trigger reset, extras).
        Counters, ``kw_strength``, depths and node numbers are computed from the committed
        state read there. Slow work (scoring, embedding) happens before the block;
        ``write_access`` never takes it.

        The stream mirrors the write in its cache only after the block exits without an
        exception, so a backend may make the write durable at exit (PostgreSQL: one
        transaction holding ``pg_advisory_xact_lock`` on the persona, ``commit`` running
        inside it, COMMIT at exit, ROLLBACK if the block raised). If exiting fails, raise
        :class:`~langchain_genmem.core.errors.StorageError`: the stream then shows nothing of it.

        Threads of one process must be serialised too: two streams of one persona in one
        process are two writers (a stream serialises its own threads). The block is not
        re-entered by the thread holding it.

        A backend on which several writers are safe serialises them here, waiting up to a
        timeout of its own. One that cannot give the right, or waited too long, raises
        :class:`~langchain_genmem.core.errors.ConcurrentWriterError` naming the holder (host,
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

    def commit(
        self,
        persona: str,
        nodes: Sequence[StoredNode],
        state: StreamState,
        *,
        strength_changes: Mapping[str, Mapping[str, int]] | None = None,
    ) -> None:
        """Store new nodes, then the state that makes them visible; all or nothing.

        Each node record is stored whole: no field of an earlier record with the same id
        may survive (a replace, never a merge).

        Args:
            persona: the persona.
            nodes: the new nodes, numbered right after the committed ones.
            state: the state that commits them (``rev`` one above the committed one).
            strength_changes: the keyword strengths ``state`` changes from the committed
                state, ``{type: {keyword: new count}}``, and nothing else changed in
                ``state.kw_strength``; a backend may store only these instead of comparing
                every strength. None: not known, compare if needed.
        """

    def write_state(self, persona: str, state: StreamState) -> None:
        """Store a new state with no new nodes (settings, counters)."""

    def forget(
        self,
        persona: str,
        node_numbers: Sequence[int],
        state: StreamState,
        replaced: Sequence[StoredNode] = (),
        *,
        strength_changes: Mapping[str, Mapping[str, int]] | None = None,
    ) -> Erasure | None:
        """Delete nodes for good, re-key kept ones and commit the state; all or nothing.

        Called inside :meth:`write_lock` (after ``read_head``/``read_state`` and
        ``remove_uncommitted``), instead of ``commit``/``write_state``. Each node's record
        goes whole (description, vector, fields, keyword and access-time rows); ``state``
        is the committed state with ``rev`` one above it, ``node_count`` unchanged and the
        numbers added to ``forgotten``
        (:meth:`~langchain_genmem.core.state.StreamState.forgetting`), its counters
        adjusted by the caller. Each of ``replaced`` (kept turns whose embedded text quoted
        a forgotten one) gets its new ``embedding_key`` and vector; its other stored fields
        (its access time too) stay. A forget interrupted midway is either not visible at all
        (a record already given its new text then quotes a turn less, nothing more) or
        finished by the next writer of the persona (its ``remove_uncommitted``); readers
        never get a forgotten node from :meth:`read_nodes` once ``state`` is committed, nor
        the old text of a re-keyed one.

        A backend that keeps files of its own (an embedded folder) returns whether the
        records were erased from them (:class:`Erasure`); one that does not (a server, a
        database) returns None.

        Args:
            persona: the persona.
            node_numbers: the numbers to forget (committed, not forgotten yet).
            state: the state that commits the forget.
            replaced: kept nodes with their new ``embedding_key`` and vector, listed in
                ``state.rekeyed`` at its revision
                (:meth:`~langchain_genmem.core.state.StreamState.rekeying`).
            strength_changes: the keyword strengths the forget changed, with their new
                counts (0: the keyword goes), as for :meth:`commit`; None: not known (the
                backend compares with ``state.kw_strength``).

        Raises:
            ValidationError: ``state`` does not list exactly these numbers as newly
                forgotten (and those of ``replaced`` as re-keyed) at its revision.
            StorageConflictError: the store ended the write in a conflict with another
                transaction; nothing was forgotten, running the write again is safe.
            StorageError: the store failed; nothing was forgotten (or, where the store has
                no transactions, the next write finishes it).
        """

    def write_access(self, persona: str, times: Mapping[str, float]) -> None:
        """Store last-access times (epoch seconds) of existing nodes, by node id.

        A time never moves a stored access time backwards: where another process stored a
        later one, the later one stays.
        """

    def personas(self) -> list[str]:
        """Every persona with a committed state."""

    def drop(self, persona: str) -> None:
        """Delete everything of a persona: nodes, state, keyword strengths, access, snapshots."""

    def close(self) -> None:
        """Release what the backend holds (connections, a folder's write right); reads reopen."""


@runtime_checkable
class SnapshotStore(Protocol):
    """``"snapshots"``: a copy of a stream's cache saved beside the store, opened instead of it.

    The stream calls :meth:`begin_load` before a full load, then :meth:`write_snapshot` with
    the key it returned; at the next open :meth:`read_snapshot` gives the copy back only if
    the store still holds exactly what it was taken from.
    """

    def begin_load(self, persona: str) -> snapshot.Key | None:
        """The key a snapshot of a load starting now is written under (None: no snapshot)."""

    def read_snapshot(
        self, persona: str, growth: float = 1.0
    ) -> tuple[StreamState, snapshot.Content] | None:
        """The committed state and the cache's content from a matching snapshot, or None."""

    def write_snapshot(
        self, persona: str, key: snapshot.Key | None, content: snapshot.Content
    ) -> bool:
        """Save the cache's content if the store still matches ``key``; True when written."""


@runtime_checkable
class AccessLog(Protocol):
    """``"access_log"``: access times stored by other processes, read back by revision.

    A backend with it bumps :attr:`Head.access_rev` when it stores access times; a stream
    that sees a new value reads what changed since the revision it knew.
    """

    def read_access(self, persona: str, since: int) -> dict[int, float]:
        """``{node_count: last_accessed epoch}`` of times stored after revision ``since``."""


@runtime_checkable
class StoreRanking(Protocol):
    """``"ranking"``: the store scores every candidate itself and returns the top k."""

    def rank(
        self,
        persona: str,
        query: Any,
        *,
        k: int,
        mode: RecencyMode,
        decay: float,
        weights: Weights,
        now: datetime,
        include_expired: bool = False,
        where: tuple[str, dict[str, Any]] = ("", {}),
    ) -> DatabaseRanking:
        """The top ``k`` with their components, as the in-process ranking would give them."""


@runtime_checkable
class ReadViews(Protocol):
    """``"views"``: the reads a stream makes to open or catch up see one moment of the store.

    For a store whose reads can meet another process's write, or read a state newer than
    what the reading process can load (an embedded Chroma folder: see
    :mod:`~langchain_genmem.backends.gate`). While the view is held no other process
    writes; a write in flight is waited for first.
    """

    def read_view(self, persona: str) -> AbstractContextManager[None]:
        """A context manager holding the view for the reads of its ``with`` block."""


@runtime_checkable
class Compaction(Protocol):
    """``"compaction"``: whole-store work that a forget leaves out, run when asked.

    A forget costs what it forgets; what only a pass over the whole store can do (an
    embedded Chroma folder: rebuilding its database so that nothing freed stays in it) is
    this separate call.
    """

    def compact(self) -> dict[str, Any] | None:
        """Do the whole-store work; what it did (None: nothing to do here)."""


PROTOCOLS: dict[Capability, type] = {
    "snapshots": SnapshotStore,
    "access_log": AccessLog,
    "ranking": StoreRanking,
    "views": ReadViews,
    "compaction": Compaction,
}


def snapshots_of(backend: MemoryBackend) -> SnapshotStore | None:
    """The backend as a :class:`SnapshotStore`, or None when it has no snapshots."""
    return cast(SnapshotStore, backend) if "snapshots" in backend.capabilities else None


def access_log_of(backend: MemoryBackend) -> AccessLog | None:
    """The backend as an :class:`AccessLog`, or None when it keeps none."""
    return cast(AccessLog, backend) if "access_log" in backend.capabilities else None


def ranking_of(backend: MemoryBackend) -> StoreRanking | None:
    """The backend as a :class:`StoreRanking`, or None when it cannot rank in the store."""
    return cast(StoreRanking, backend) if "ranking" in backend.capabilities else None


def views_of(backend: MemoryBackend) -> ReadViews | None:
    """The backend as a :class:`ReadViews`, or None when its reads need no view."""
    return cast(ReadViews, backend) if "views" in backend.capabilities else None


def compaction_of(backend: MemoryBackend) -> Compaction | None:
    """The backend as a :class:`Compaction`, or None when it has no whole-store work."""
    return cast(Compaction, backend) if "compaction" in backend.capabilities else None


def contract_problems(backend: object) -> list[str]:
    """What a backend lacks of the contract it declares (empty: it keeps it).

    Args:
        backend: the backend to check.

    Returns:
        One line per missing method or unknown capability.
    """
    problems = [f"missing {name}()" for name in _methods(MemoryBackend)
                if not callable(getattr(backend, name, None))]
    declared = getattr(backend, "capabilities", None)
    if not isinstance(declared, frozenset):
        return [*problems, "capabilities: not a frozenset of capability names"]
    for capability in declared:
        protocol = PROTOCOLS.get(capability)
        if protocol is None:
            problems.append(f"capabilities: unknown {capability!r}")
            continue
        problems += [f"{capability}: missing {name}()" for name in _methods(protocol)
                     if not callable(getattr(backend, name, None))]
    return problems


def forgotten_runs(
    persona: str, node_numbers: Sequence[int], state: StreamState
) -> list[tuple[int, int]]:
    """The ``(first, last)`` runs a forget deletes, checked against the state that commits it.

    Args:
        persona: the persona (for the message).
        node_numbers: the numbers the caller forgets.
        state: the state it commits.

    Returns:
        The runs, ascending.

    Raises:
        ValidationError: ``state`` does not list exactly these numbers, at its revision.
    """
    wanted = sorted({int(n) for n in node_numbers})
    listed = [(lo, hi) for lo, hi, rev in state.forgotten if rev == state.rev]
    if not wanted or number_runs(wanted) != sorted(listed):
        msg = (
            f"persona {persona!r}: forget: the state of revision {state.rev} must list the "
            f"{len(wanted)} numbers forgotten as its newest ranges "
            "(use StreamState.forgetting); nothing was forgotten"
        )
        raise ValidationError(msg, field="state")
    return number_runs(wanted)


def check_replaced(persona: str, replaced: Sequence[StoredNode], state: StreamState) -> None:
    """Refuse re-keyed nodes the state committing a forget does not list as re-keyed.

    Args:
        persona: the persona (for the message).
        replaced: the kept nodes given a new embedded text.
        state: the state that commits the forget.

    Raises:
        ValidationError: ``state.rekeyed`` does not list exactly these numbers at its
            revision, or one of them is forgotten.
    """
    numbers = sorted({int(s.node.node_count) for s in replaced})
    if numbers == state.rekeyed_at(state.rev) and not any(map(state.is_forgotten, numbers)):
        return
    msg = (
        f"persona {persona!r}: forget: the state of revision {state.rev} must list the "
        f"{len(numbers)} kept memories given a new embedded text as re-keyed at its "
        "revision (use StreamState.rekeying); nothing was forgotten"
    )
    raise ValidationError(msg, field="state")


def _methods(protocol: type) -> list[str]:
    return [n for n, v in vars(protocol).items() if callable(v) and not n.startswith("_")]
