"""The in-process columns of one persona's nodes that scoring runs on.

The store is the source of truth; this cache only mirrors what was committed, row ``i`` being
``node_{i+1}``. It holds what scoring reads as numpy columns (vectors, their norms, their int8
codes for the fast first pass of :mod:`langchain_genmem.quantized`, access and creation
times, expirations, poignancies, type codes, the idle flag) so that a retrieval
is a handful of vectorised operations over every node, never a Python loop per memory.
"""

from __future__ import annotations

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
_QUANTIZE_BLOCK = 8192  # rows quantised at once, so the float64 copies stay small


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
        self.scale = np.zeros(0)
        self.residual = np.zeros(0)
        self.norms = np.zeros(0)
        self.inv_norms = np.zeros(0)
        self.last_accessed = np.zeros(0)
        self.created = np.zeros(0)
        self.expiration = np.zeros(0)
        self.poignancy = np.zeros(0)
        self.type_code = np.zeros(0, dtype=np.int8)
        self.idle = np.zeros(0, dtype=bool)
        self._candidates: StaticCandidates | None = None

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
            self.codes[start:end], self.scale[start:end] = q.codes, q.scale
            self.residual[start:end] = q.residual
        for row, s in enumerate(stored, start=lo):
            self._fill(row, s.node)
        self.n = hi

    def candidates(self) -> StaticCandidates:
        """The original's candidates and their columns that change only when nodes are added.

        Candidates are events and thoughts whose embedding_key has no "idle"; recomputed
        only when nodes were added.

        Returns:
            The rows and their static columns.
        """
        if self._candidates is None or self._candidates.n != self.n:
            n = self.n
            kinds = self.type_code[:n] < 2
            rows = np.flatnonzero(kinds & ~self.idle[:n])
            poignancy = self.poignancy[rows]
            self._candidates = StaticCandidates(
                n=n,
                rows=rows,
                type_code=self.type_code[rows],
                node_count=rows + 1,
                poignancy=poignancy,
                importance=minmax(poignancy),
                any_expiration=bool(np.isfinite(self.expiration[rows]).any()),
                idle=int((kinds & self.idle[:n]).sum()),
            )
        return self._candidates

    def touch(self, rows: np.ndarray, when: float) -> None:
        """Mark rows accessed at ``when`` (epoch seconds), in the columns and the nodes.

        Args:
            rows: row numbers.
            when: the access time.
        """
        self.last_accessed[rows] = when
        moment = from_epoch(when)
        for row in rows.tolist():
            self.nodes[row].last_accessed = moment

    def merge_access(self, times: Mapping[int, float]) -> None:
        """Take access times stored elsewhere where they are later than the ones held.

        Args:
            times: ``{node_count: epoch seconds}``; nodes not held yet are skipped.
        """
        for number, when in times.items():
            row = number - 1
            if row < self.n and when > self.last_accessed[row]:
                self.last_accessed[row] = when
                self.nodes[row].last_accessed = from_epoch(when)

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
        for name in ("norms", "inv_norms", "scale", "residual", "last_accessed", "created",
                     "expiration", "poignancy"):
            setattr(self, name, _grow(getattr(self, name), cap, self.n))
        self.type_code = _grow(self.type_code, cap, self.n)
        self.idle = _grow(self.idle, cap, self.n)
        self._cap = cap


def _grow(column: np.ndarray, cap: int, n: int) -> np.ndarray:
    out = np.zeros(cap, dtype=column.dtype)
    out[:n] = column[:n]
    return out
