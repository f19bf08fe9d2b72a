"""The in-process columns of one persona's nodes that scoring runs on.

The store is the source of truth; this cache only mirrors what was committed, row ``i`` being
``node_{i+1}``. It holds what scoring reads as numpy columns (vectors, their norms, their int8
codes for the fast first pass of :mod:`langchain_genmem.quantized`, access and creation
times, expirations, poignancies, type codes, the idle flag) so that a retrieval
is a handful of vectorised operations over every node, never a Python loop per memory.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from langchain_genmem.backends.base import StoredNode
from langchain_genmem.errors import EmbeddingDimensionError
from langchain_genmem.nodes import MemoryNode
from langchain_genmem.quantized import quantize
from langchain_genmem.scoring import inverse_norms, minmax
from langchain_genmem.timeutil import from_epoch, to_epoch

TYPE_CODES = {"event": 0, "thought": 1, "chat": 2}
_GROWTH = 1.5
_FIRST = 1024
_QUANTIZE_BLOCK = 8192
# Moved rows beyond which the access order is sorted afresh rather than patched.
_RESORT_SHARE = 16  # rows quantised at once, so the float64 copies stay small


@dataclass(frozen=True)
class StaticCandidates:
    """Candidate rows and their columns that only change when nodes are added.

    Attributes:
        n: the cache size they were computed at.
        rows: candidate rows, ascending.
        type_code: their type codes.
        node_count: their node numbers.
        poignancy: their raw importance.
        importance: their normalised importance.
        any_expiration: whether any candidate has an expiration.
        idle: events and thoughts left out because their embedding_key holds "idle".
    """

    n: int
    rows: np.ndarray
    type_code: np.ndarray
    node_count: np.ndarray
    poignancy: np.ndarray
    importance: np.ndarray
    any_expiration: bool
    idle: int = 0


class NodeCache:
    """Columnar mirror of a persona's committed nodes.

    Attributes:
        n: number of rows (committed nodes).
        dim: vector size, once a vector is held.
        nodes: the MemoryNode of each row.
        key_row: a row holding the vector of each embedding_key (the newest such node).
    """

    def __init__(self) -> None:
        self.n = 0
        self.dim: int | None = None
        self.nodes: list[MemoryNode] = []
        self.key_row: dict[str, int] = {}
        self._cap = 0
        self.vectors = np.zeros((0, 0), dtype=np.float32)
        self.codes = np.zeros((0, 0), dtype=np.int8)
        self.unit_scale = np.zeros(0)
        self.max_relative_residual = 0.0
        self.norms = np.zeros(0)
        self.inv_norms = np.zeros(0)
        self.last_accessed = np.zeros(0)
        self.created = np.zeros(0)
        self.expiration = np.zeros(0)
        self.poignancy = np.zeros(0)
        self.type_code = np.zeros(0, dtype=np.int8)
        self.idle = np.zeros(0, dtype=bool)
        self._candidates: StaticCandidates | None = None
        self._with_idle: StaticCandidates | None = None
        self._order_lock = threading.Lock()
        self._order: np.ndarray | None = None  # candidate rows in tie order
        self._order_n = 0  # the cache size the order's candidates were taken at
        self._moved: list[np.ndarray] = []  # rows whose access time changed since

    def append(self, stored: Sequence[StoredNode], *, total: int = 0) -> None:
        """Add committed nodes, oldest first; each must be the next node_count.

        Args:
            stored: the nodes with their vectors.
            total: the row count these nodes are part of, when known: room for it is
                made at once instead of growing (and copying) the columns page by page.

        Raises:
            EmbeddingDimensionError: a vector's size differs from the ones held.
        """
        if not stored:
            return
        block = np.vstack([np.asarray(s.vector, dtype=np.float32).reshape(1, -1) for s in stored])
        if self.dim is None:
            self.dim = block.shape[1]
        if block.shape[1] != self.dim:
            raise EmbeddingDimensionError(self.dim, block.shape[1])
        self._reserve(max(self.n + len(stored), total))
        lo, hi = self.n, self.n + len(stored)
        self.vectors[lo:hi] = block
        self.norms[lo:hi] = np.linalg.norm(block.astype(np.float64), axis=1)
        self.inv_norms[lo:hi] = inverse_norms(self.norms[lo:hi])
        for start in range(lo, hi, _QUANTIZE_BLOCK):
            end = min(hi, start + _QUANTIZE_BLOCK)
            q = quantize(self.vectors[start:end])
            inv = self.inv_norms[start:end]
            self.codes[start:end] = q.codes
            self.unit_scale[start:end] = q.scale * inv
            relative = float((q.residual * inv).max())
            self.max_relative_residual = max(self.max_relative_residual, relative)
        for row, s in enumerate(stored, start=lo):
            self._fill(row, s.node)
        self.n = hi

    def candidates(self, idle_filter: bool = True) -> StaticCandidates:
        """The original's candidates and their columns that change only when nodes are added.

        Candidates are events and thoughts whose embedding_key has no "idle" (all events
        and thoughts with ``idle_filter=False``); recomputed only when nodes were added.

        Args:
            idle_filter: leave out memories whose embedding_key holds "idle" (the original).

        Returns:
            The rows and their static columns.
        """
        held = self._candidates
        if held is None or held.n != self.n:
            n = self.n
            kinds = self.type_code[:n] < 2
            idle = kinds & self.idle[:n]
            held = self._static(n, np.flatnonzero(kinds & ~idle), int(idle.sum()))
            self._candidates = held
        if idle_filter or not held.idle:
            return held
        full = self._with_idle
        if full is None or full.n != held.n:
            full = self._static(held.n, np.flatnonzero(self.type_code[: held.n] < 2), 0)
            self._with_idle = full
        return full

    def _static(self, n: int, rows: np.ndarray, idle: int) -> StaticCandidates:
        poignancy = self.poignancy[rows]
        return StaticCandidates(
            n=n,
            rows=rows,
            type_code=self.type_code[rows],
            node_count=rows + 1,
            poignancy=poignancy,
            importance=minmax(poignancy),
            any_expiration=bool(np.isfinite(self.expiration[rows]).any()),
            idle=idle,
        )

    def touch(self, rows: np.ndarray, when: float) -> None:
        """Mark rows accessed at ``when`` (epoch seconds), in the columns and the nodes.

        Args:
            rows: row numbers.
            when: the access time.
        """
        with self._order_lock:  # the access order sees a change whole or not at all
            self.last_accessed[rows] = when
            self._note_moved(np.asarray(rows, dtype=np.int64))
        moment = from_epoch(when)
        for row in rows.tolist():
            self.nodes[row].last_accessed = moment

    def merge_access(self, times: Mapping[int, float]) -> None:
        """Take access times stored elsewhere where they are later than the ones held.

        Args:
            times: ``{node_count: epoch seconds}``; nodes not held yet are skipped.
        """
        moved = []
        with self._order_lock:
            for number, when in times.items():
                row = number - 1
                if row < self.n and when > self.last_accessed[row]:
                    self.last_accessed[row] = when
                    self.nodes[row].last_accessed = from_epoch(when)
                    moved.append(row)
            self._note_moved(np.asarray(moved, dtype=np.int64))

    def access_order(self, static: StaticCandidates) -> np.ndarray:
        """Every candidate row in the original's candidate order (see ``scoring.tie_order``).

        The order is kept between retrievals and patched: rows whose access time changed
        since (the k returned by the last retrieval, times loaded from other processes)
        and rows added since are taken out and inserted again where they now belong, so a
        ``"reverie"`` retrieval costs a few linear passes instead of a full sort. Many
        changes at once are sorted afresh.

        Args:
            static: the candidates (``candidates()``) the order is for.

        Returns:
            The rows of ``static.rows``, ordered by last access ascending, then events
            before thoughts, then newest first.
        """
        with self._order_lock:
            if static.n < self._order_n:  # an older view than the order's: do not keep it
                return static.rows[_tie_sort(self, static.rows)]
            moved = np.concatenate(self._moved) if self._moved else np.zeros(0, np.int64)
            added = static.rows[np.searchsorted(static.rows, self._order_n) :]
            if self._order is None or moved.size + added.size > max(
                1024, static.rows.size // _RESORT_SHARE
            ):
                self._order = static.rows[_tie_sort(self, static.rows)]
            else:
                self._order = self._patch(self._order, moved, added, static)
            self._order_n, self._moved = static.n, []
            return self._order

    def _patch(
        self, order: np.ndarray, moved: np.ndarray, added: np.ndarray, static: StaticCandidates
    ) -> np.ndarray:
        """``order`` with ``moved`` rows taken out and ``moved``/``added`` rows reinserted."""
        moved = np.unique(moved)
        if moved.size:
            at = np.minimum(np.searchsorted(static.rows, moved), static.rows.size - 1)
            moved = moved[static.rows[at] == moved]  # candidates only
            out = np.zeros(self.n, dtype=bool)
            out[moved] = True
            order = order[~out[order]]
        insert = np.concatenate([moved, added])
        if insert.size == 0:
            return order
        insert = insert[_tie_sort(self, insert)]
        la = self.last_accessed[order]
        at = np.searchsorted(la, self.last_accessed[insert], side="left")
        end = np.searchsorted(la, self.last_accessed[insert], side="right")
        ties = np.flatnonzero(end > at)
        if ties.size:  # equal access times: order by (type, newest first) within the run
            within = _secondary_key(self, order)
            mine = _secondary_key(self, insert)
            for i in ties.tolist():
                at[i] += np.searchsorted(within[at[i] : end[i]], mine[i], side="left")
        return np.insert(order, at, insert)

    def _note_moved(self, rows: np.ndarray) -> None:
        """Remember rows whose access time changed (the caller holds ``_order_lock``)."""
        if rows.size and self._order is not None:
            self._moved.append(rows.copy())

    def vector_of_key(self, key: str) -> np.ndarray | None:
        """The stored vector of an embedding_key, or None.

        Args:
            key: the embedding_key.

        Returns:
            A copy of the vector.
        """
        row = self.key_row.get(key)
        return None if row is None else self.vectors[row].copy()

    def _fill(self, row: int, node: MemoryNode) -> None:
        self.nodes.append(node)
        self.key_row[node.embedding_key] = row
        self.last_accessed[row] = to_epoch(node.last_accessed)
        self.created[row] = to_epoch(node.created)
        self.expiration[row] = np.inf if node.expiration is None else to_epoch(node.expiration)
        self.poignancy[row] = node.poignancy
        self.type_code[row] = TYPE_CODES[node.type]
        self.idle[row] = "idle" in node.embedding_key

    def _reserve(self, size: int) -> None:
        if size <= self._cap:
            return
        cap = max(size, int(self._cap * _GROWTH), _FIRST)
        vectors = np.zeros((cap, self.dim or 0), dtype=np.float32)
        if self.n:
            vectors[: self.n] = self.vectors[: self.n]
        self.vectors = vectors
        codes = np.zeros((cap, self.dim or 0), dtype=np.int8)
        if self.n:
            codes[: self.n] = self.codes[: self.n]
        self.codes = codes
        for name in ("norms", "inv_norms", "unit_scale", "last_accessed", "created",
                     "expiration", "poignancy"):
            setattr(self, name, _grow(getattr(self, name), cap, self.n))
        self.type_code = _grow(self.type_code, cap, self.n)
        self.idle = _grow(self.idle, cap, self.n)
        self._cap = cap


def _tie_sort(cache: NodeCache, rows: np.ndarray) -> np.ndarray:
    """Positions sorting ``rows`` by last access ascending, events first, newest first."""
    return np.lexsort((-rows, cache.type_code[rows], cache.last_accessed[rows]))


def _secondary_key(cache: NodeCache, rows: np.ndarray) -> np.ndarray:
    """One int64 per row ordering rows of equal access time: type, then newest first."""
    return cache.type_code[rows].astype(np.int64) * (1 << 40) - rows


def _grow(column: np.ndarray, cap: int, n: int) -> np.ndarray:
    out = np.zeros(cap, dtype=column.dtype)
    out[:n] = column[:n]
    return out
