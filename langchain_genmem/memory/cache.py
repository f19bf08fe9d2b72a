"""The in-process columns of one persona's nodes that scoring runs on.

The store is the source of truth; this cache only mirrors what was committed: one row per
committed node, ascending by node number, each row's number in the ``node_number`` column
(row ``i`` is ``node_{i+1}`` until memories are forgotten; :meth:`NodeCache.row_of_number`
maps a number to its row). It holds what scoring reads as numpy columns (vectors, their
norms, their int8 codes for the fast first pass of :mod:`langchain_genmem.numerics.quantized`,
access and creation times, expirations, poignancies, type codes, the idle flag) so that a
retrieval is a handful of vectorised operations over every node, never a Python loop per
memory.

Forgotten memories are tombstones: a forget gives the stream a new cache object
(:meth:`NodeCache.without`) that shares every column with the old one and differs only in its
``alive`` mask, so it costs what is forgotten, not the size of the persona, and a reader
holding the old object keeps one consistent moment (rows never move under it). Rows of
forgotten memories stay in the columns, marked dead, until the columns are compacted
(:meth:`NodeCache.compacted`: when dead rows outnumber live ones, at
:meth:`~langchain_genmem.memory.stream.MemoryStream.compact`, and in every snapshot saved);
compaction renumbers rows and so changes :attr:`NodeCache.layout`.

A stream opened from a snapshot (:mod:`langchain_genmem.backends.snapshot`) loads these
columns whole (:meth:`NodeCache.load`) and makes each row's ``MemoryNode`` only when it is
first asked for (:class:`LazyNodes`); a new per-row column goes in :data:`ROW_COLUMNS`, so
that it grows with the others and is saved in and read from snapshots.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, overload

import numpy as np

from langchain_genmem.backends import snapshot
from langchain_genmem.backends.base import StoredNode
from langchain_genmem.core.errors import EmbeddingDimensionError
from langchain_genmem.core.nodes import CANDIDATE_TYPES, TYPE_CODES, TYPE_NAMES, MemoryNode
from langchain_genmem.core.timeutil import from_epoch, to_epoch
from langchain_genmem.numerics.quantized import quantize
from langchain_genmem.numerics.scoring import inverse_norms, minmax

# Nodes made from a snapshot are copies of this one with every field replaced (a copy with
# ``update`` is several times quicker than ``model_construct`` and validates nothing either).
_TEMPLATE = MemoryNode.model_construct(
    node_id="node_1", node_count=1, type_count=1, type="event", depth=0,
    created=from_epoch(0.0), expiration=None, last_accessed=from_epoch(0.0), subject="",
    predicate="", object="", description="-", embedding_key="-", poignancy=0.0, keywords=[],
    filling=None,
)
# Every per-row column: grown together, saved in and loaded from a snapshot together.
ROW_COLUMNS: dict[str, type] = {
    "vectors": np.float32, "codes": np.int8, "norms": np.float64, "inv_norms": np.float64,
    "unit_scale": np.float64, "last_accessed": np.float64, "created": np.float64,
    "expiration": np.float64, "poignancy": np.float64, "type_code": np.int8, "idle": bool,
    "type_count": np.int64, "depth": np.int64, snapshot.NUMBERS: np.int64,
}
GROWTH = 1.5  # how much room the columns make when they grow
_KEY_SCAN = 256  # rows read at once when looking for another row of an embedding_key
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
        idle: candidates left out because their embedding_key holds "idle".
    """

    n: int
    rows: np.ndarray
    type_code: np.ndarray
    node_count: np.ndarray
    poignancy: np.ndarray
    importance: np.ndarray
    any_expiration: bool
    idle: int = 0



def is_idle(embedding_key: str) -> bool:
    """Whether a memory is one the original's idle filter leaves out ("idle" in its key)."""
    return "idle" in embedding_key


class NodeCache:
    """Columnar mirror of a persona's committed nodes.

    Attributes:
        n: number of rows, those of forgotten memories (dead rows) included.
        dead: how many of the ``n`` rows are dead (forgotten, not compacted away yet).
        alive: per row, False once its memory was forgotten (this object's own array: a
            forget makes a new object with a new mask, never changes this one).
        layout: the row numbering: the same object for as long as rows keep their numbers
            (appends and forgets keep them; compaction gives a new one).
        highest: the highest node number held, dead rows included (0 when empty).
        moved: rows appended for memories that had a row already (a re-keyed turn: its
            old row is dead); they break the ascending order of ``node_number`` until the
            next compaction.
        dim: vector size, once a vector is held.
        node_number: the node number of each row, ascending but for ``moved`` rows.
        nodes: the MemoryNode of each row (made on first access for rows loaded from a
            snapshot, see :class:`LazyNodes`).
        key_row: a live row holding the vector of each embedding_key (the newest such node).
    """

    # The per-row columns of ROW_COLUMNS that are set by name (``setattr``), not in
    # ``__init__``'s own assignments: declared here so that their type is known.
    norms: np.ndarray
    inv_norms: np.ndarray
    unit_scale: np.ndarray
    last_accessed: np.ndarray
    created: np.ndarray
    expiration: np.ndarray
    poignancy: np.ndarray
    type_code: np.ndarray
    idle: np.ndarray
    type_count: np.ndarray
    depth: np.ndarray

    def __init__(self) -> None:
        self.n = 0
        self.dead = 0
        self.moved = 0
        self.highest = 0
        self.layout = object()
        self._row_of = np.zeros(0, dtype=np.int64)  # by node number: its live row, or -1
        self.dim: int | None = None
        self.nodes = LazyNodes(self)
        self.key_row: dict[str, int] = {}
        # embedding_keys held by more than one live row, with their count (None: not known
        # yet, for a cache loaded from a snapshot that did not save them)
        self._shared_keys: dict[str, int] | None = {}
        self._cap = 0
        self.vectors = np.zeros((0, 0), dtype=np.float32)
        self.codes = np.zeros((0, 0), dtype=np.int8)
        self.alive = np.zeros(0, dtype=bool)
        self.max_relative_residual = 0.0
        self.node_number = np.zeros(0, dtype=np.int64)
        for name, dtype in ROW_COLUMNS.items():
            if name not in ("vectors", "codes"):
                setattr(self, name, np.zeros(0, dtype=dtype))
        self._reset_derived()

    def _reset_derived(self) -> None:
        """Forget what is computed from the rows (candidates, the access order)."""
        self._candidates: dict[tuple[bool, bool], StaticCandidates] = {}
        self._order_lock = threading.Lock()
        self._order: np.ndarray | None = None  # candidate rows in tie order
        self._order_n = 0  # the cache size the order's candidates were taken at
        self._moved: list[np.ndarray] = []  # rows whose access time changed since

    @property
    def live(self) -> int:
        """How many rows hold a memory that exists (``n`` less the dead rows)."""
        return self.n - self.dead

    def row_of_number(self, number: int) -> int | None:
        """The live row holding ``node_{number}``.

        Args:
            number: a node number.

        Returns:
            Its row, or None when no live row holds it (never committed, or forgotten).
        """
        if number < 1 or number > self.highest:
            return None
        row = int(self._row_of[number])
        return row if row >= 0 else None

    def rows_of_numbers(self, numbers: np.ndarray) -> np.ndarray:
        """The live rows of node numbers, -1 where no live row holds one.

        Args:
            numbers: node numbers (int64).

        Returns:
            One row per number (int64).
        """
        numbers = np.asarray(numbers, dtype=np.int64)
        out = np.full(numbers.shape, -1, dtype=np.int64)
        known = (numbers >= 1) & (numbers <= self.highest)
        out[known] = self._row_of[numbers[known]]
        return out

    def live_rows(self) -> np.ndarray:
        """Every live row, ascending.

        Returns:
            The rows (int64).
        """
        if not self.dead:
            return np.arange(self.n, dtype=np.int64)
        return np.flatnonzero(self.alive[: self.n])

    def without(self, numbers: np.ndarray) -> NodeCache:
        """A new cache in which the rows of ``numbers`` are dead (forgotten memories).

        Costs what is forgotten: the new object shares every column with this one (rows
        keep their numbers) and holds a mask of its own, so a reader holding this cache
        keeps one moment; the stream replaces its cache with the one returned. ``key_row``
        (shared: writers read it under the stream's lock) stops naming dead rows.

        Args:
            numbers: node numbers to forget (numbers no live row holds are ignored).

        Returns:
            The new cache (this one when no live row holds any of the numbers).
        """
        rows = self.rows_of_numbers(np.asarray(numbers, dtype=np.int64))
        rows = np.unique(rows[rows >= 0])
        if not rows.size:
            return self
        out = self._forking()
        out._kill(rows)
        return out

    def _forking(self) -> NodeCache:
        """A new object sharing every column, with a mask and a number map of its own."""
        self._shared()  # counted over the rows alive now, before any dies (a dict shared)
        out = copy.copy(self)
        out.alive = self.alive.copy()
        out._row_of = self._row_of.copy()
        out._reset_derived()
        return out

    def _kill(self, rows: np.ndarray) -> None:
        """Mark live rows dead (this object only: a new one from :meth:`_forking`)."""
        self.alive[rows] = False
        self._row_of[self.node_number[rows]] = -1
        self.dead += int(rows.size)
        self._drop_keys(rows)

    def _drop_keys(self, rows: np.ndarray) -> None:
        """Keep ``key_row`` on live rows once ``rows`` are dead (this cache's mask)."""
        shared = self._shared()
        nodes = self.nodes
        for row in rows.tolist():
            key = nodes[row].embedding_key
            count = shared.pop(key, 1) - 1
            if count > 1:
                shared[key] = count
            if self.key_row.get(key) != row:
                continue
            if count:
                self.key_row[key] = self._newest_row_of(key, row)
            else:
                del self.key_row[key]

    def _newest_row_of(self, key: str, below: int) -> int:
        """The newest live row under ``below`` holding ``key`` (one is known to exist)."""
        nodes = self.nodes
        for end in range(below, 0, -_KEY_SCAN):
            start = max(0, end - _KEY_SCAN)
            block = nodes[start:end]
            for row in range(end - 1, start - 1, -1):
                if self.alive[row] and block[row - start].embedding_key == key:
                    return row
        msg = f"no live row holds the embedding_key {key[:40]!r}"
        raise ValueError(msg)

    def _shared(self) -> dict[str, int]:
        """The counts of embedding_keys held by more than one live row (computed once)."""
        if self._shared_keys is None:
            counts: dict[str, int] = {}
            for row in self.live_rows().tolist():
                key = self.nodes[row].embedding_key
                counts[key] = counts.get(key, 0) + 1
            self._shared_keys = {k: c for k, c in counts.items() if c > 1}
        return self._shared_keys

    def emptied(self) -> NodeCache:
        """A new cache holding no row, numbered as this one (every memory forgotten).

        Returns:
            The new cache: new memories are numbered above :attr:`highest`, as here.
        """
        out = NodeCache()
        out.dim = self.dim
        out._map_numbers(self.highest)
        return out

    def compacted(self) -> NodeCache:
        """A new cache holding the live rows only, renumbered (a new :attr:`layout`).

        Costs the size of the persona (every column is copied once); nodes not made yet
        stay unmade.

        Returns:
            The new cache (this one when no row is dead).
        """
        if not self.dead:
            return self
        rows = self.live_rows()
        if self.moved:
            rows = rows[np.argsort(self.node_number[rows], kind="stable")]
        out = NodeCache()
        out.dim, out.max_relative_residual = self.dim, self.max_relative_residual
        for name in ROW_COLUMNS:
            setattr(out, name, getattr(self, name)[rows])  # copies
        out._cap = out.n = int(rows.size)
        out.alive = np.ones(out.n, dtype=bool)
        out._map_numbers(self.highest)
        out.nodes = self.nodes.taking(out, rows)
        remap = np.full(self.n, -1, dtype=np.int64)
        remap[rows] = np.arange(rows.size)
        keys = list(self.key_row)
        held = remap[np.fromiter(self.key_row.values(), dtype=np.int64, count=len(keys))]
        out.key_row = {k: r for k, r in zip(keys, held.tolist(), strict=True) if r >= 0}
        out._shared_keys = None if self._shared_keys is None else dict(self._shared_keys)
        return out

    def rekeyed(self, stored: Sequence[StoredNode]) -> NodeCache:
        """A new cache in which these nodes have their new embedding_key and vector.

        Each memory moves to a new row appended for it (:attr:`moved`), its old row dead,
        so the new object costs what is re-keyed and a reader holding this one keeps the
        old vectors. Access times and every other column move with it.

        Args:
            stored: held nodes with their new embedding_key and vector.

        Returns:
            The new cache (this one when no live row holds any of the nodes).

        Raises:
            EmbeddingDimensionError: a vector's size differs from the ones held.
        """
        numbers = np.array([s.node.node_count for s in stored], dtype=np.int64)
        rows = self.rows_of_numbers(numbers)
        held = [(row, s) for row, s in zip(rows.tolist(), stored, strict=True) if row >= 0]
        if not held:
            return self
        block = np.vstack([np.asarray(s.vector, dtype=np.float32).reshape(1, -1) for _, s in held])
        if block.shape[1] != self.dim:
            raise EmbeddingDimensionError(self.dim or 0, block.shape[1])
        old = np.array([row for row, _ in held], dtype=np.int64)
        out = self._forking()
        out._kill(old)  # the old rows are dead rows: the live count stays
        out._reserve(out.n + old.size)
        new = np.arange(out.n, out.n + old.size)
        for name in ROW_COLUMNS:
            if name not in ("vectors", "codes"):
                column = getattr(out, name)
                column[new] = column[old]
        out._set_vectors(new, block)
        for row, (_, s) in zip(new.tolist(), held, strict=True):
            out.nodes.append(s.node)
            out.alive[row] = True
            out.idle[row] = is_idle(s.node.embedding_key)
            out._row_of[s.node.node_count] = row
            out._hold_key(row, s.node.embedding_key)
        out.n += old.size
        out.moved += old.size
        return out

    def fillings(self, rows: Sequence[int]) -> list[Any]:
        """The ``filling`` of each row, without making the node of a row that has none yet.

        Args:
            rows: rows.

        Returns:
            One filling per row.
        """
        return self.nodes.fillings(rows)

    def replace_nodes(self, nodes: Mapping[int, MemoryNode]) -> None:
        """Put other node objects of the same memories in rows (an evidence list trimmed).

        Args:
            nodes: ``{row: node}``; only texts that are not columns may differ.
        """
        self.nodes.replace(nodes)

    def append(self, stored: Sequence[StoredNode], *, total: int = 0) -> None:
        """Add committed nodes, oldest first, each numbered above every node held.

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
        self._set_vectors(np.arange(lo, hi), block)
        for row, s in enumerate(stored, start=lo):
            self._fill(row, s.node)
        self.n = hi

    def _set_vectors(self, rows: np.ndarray, block: np.ndarray) -> None:
        """Put vectors in rows (ascending, room made), with their norms and int8 codes."""
        self.vectors[rows] = block
        self.norms[rows] = np.linalg.norm(block.astype(np.float64), axis=1)
        self.inv_norms[rows] = inverse_norms(self.norms[rows])
        for start in range(0, rows.size, _QUANTIZE_BLOCK):
            part = rows[start : start + _QUANTIZE_BLOCK]
            q = quantize(self.vectors[part])
            inv = self.inv_norms[part]
            self.codes[part] = q.codes
            self.unit_scale[part] = q.scale * inv
            relative = float((q.residual * inv).max())
            self.max_relative_residual = max(self.max_relative_residual, relative)

    def load(self, content: snapshot.Content) -> None:
        """Take a snapshot's columns as they are (an empty cache only); nodes come lazily.

        Args:
            content: from :func:`langchain_genmem.backends.snapshot.read` with the columns
                :meth:`snapshot_content` gave.

        Raises:
            ValueError: the cache is not empty, or the content lacks a column or its texts.
        """
        if self.n:
            raise ValueError("a snapshot loads into an empty cache only")
        rows = dict(content.rows)
        if snapshot.NUMBERS not in rows and "norms" in rows:  # saved before forgetting existed
            rows[snapshot.NUMBERS] = np.arange(1, rows["norms"].shape[0] + 1, dtype=np.int64)
        missing = [name for name in ROW_COLUMNS if name not in rows]
        if missing or "texts" not in content.arrays:
            raise ValueError(f"snapshot lacks {missing or ['texts']}")
        n = int(content.meta["n"])
        texts = _Texts.of_array(content.arrays["texts"].tobytes(),
                                content.arrays["text_offsets"], n)
        for name, dtype in ROW_COLUMNS.items():
            if rows[name].dtype != np.dtype(dtype):
                raise ValueError(f"snapshot column {name} is {rows[name].dtype}")
        if rows["vectors"].ndim != 2 or rows["vectors"].shape[1] != content.meta["dim"]:
            raise ValueError("snapshot vectors do not have the snapshot's dimension")
        self.dim = content.meta["dim"]
        self.max_relative_residual = float(content.meta["max_relative_residual"])
        for name in ROW_COLUMNS:
            setattr(self, name, rows[name])
        self._cap = rows["norms"].shape[0]
        self.alive = np.ones(self._cap, dtype=bool)
        self.key_row = {k: int(r) for k, r in content.meta["key_row"].items()}
        shared = content.meta.get("shared_keys")
        self._shared_keys = None if shared is None else {k: int(c) for k, c in shared.items()}
        self.nodes.load(texts)
        self.n = n
        self._map_numbers(int(rows[snapshot.NUMBERS][n - 1]) if n else 0)

    def snapshot_content(self) -> snapshot.Content:
        """Every live row as a snapshot's content (see :meth:`load`).

        Dead rows are left out (the content is that of :meth:`compacted`). Nodes not made
        yet are not made: their texts come from the snapshot they came from.

        Returns:
            The columns (views, not copies), the nodes' texts and the values that go with them.
        """
        if self.dead:
            return self.compacted().snapshot_content()
        n = self.n
        texts, offsets = self.nodes.texts(n)
        return snapshot.Content(
            rows={name: getattr(self, name)[:n] for name in ROW_COLUMNS},
            arrays={"texts": np.frombuffer(texts, dtype=np.uint8), "text_offsets": offsets},
            meta={"n": n, "dim": self.dim, "max_relative_residual": self.max_relative_residual,
                  "key_row": self.key_row, "shared_keys": self._shared()},
        )

    def candidates(self, idle_filter: bool = True, chats: bool = False) -> StaticCandidates:
        """The candidates and their columns that change only when nodes are added.

        Candidates are the original's: events and thoughts whose embedding_key has no
        "idle" (all events and thoughts with ``idle_filter=False``); ``chats=True`` adds
        the chats, under the same rule, for a retrieval whose filter asks for them. Dead
        rows are never candidates. Recomputed only when nodes were added (a forget makes
        a new cache, which computes its own).

        Args:
            idle_filter: leave out memories whose embedding_key holds "idle" (the original).
            chats: chats are candidates too.

        Returns:
            The rows and their static columns.
        """
        held = self._candidates.get((True, chats))
        if held is None or held.n != self.n:
            n = self.n
            kinds = np.isin(self.type_code[:n], self._codes(chats))
            if self.dead:
                kinds &= self.alive[:n]
            idle = kinds & self.idle[:n]
            held = self._static(n, np.flatnonzero(kinds & ~idle), int(idle.sum()))
            self._candidates[True, chats] = held
        if idle_filter or not held.idle:
            return held
        full = self._candidates.get((False, chats))
        if full is None or full.n != held.n:
            kinds = np.isin(self.type_code[: held.n], self._codes(chats))
            if self.dead:
                kinds &= self.alive[: held.n]
            full = self._static(held.n, np.flatnonzero(kinds), 0)
            self._candidates[False, chats] = full
        return full

    @staticmethod
    def _codes(chats: bool) -> list[int]:
        """The type codes of the candidates (``CANDIDATE_TYPES`` of core.nodes)."""
        return [TYPE_CODES[t] for t in (*CANDIDATE_TYPES, *(("chat",) if chats else ()))]

    def _static(self, n: int, rows: np.ndarray, idle: int) -> StaticCandidates:
        poignancy = self.poignancy[rows]
        return StaticCandidates(
            n=n,
            rows=rows,
            type_code=self.type_code[rows],
            node_count=self.node_number[rows],
            poignancy=poignancy,
            importance=minmax(poignancy),
            any_expiration=bool(np.isfinite(self.expiration[rows]).any()),
            idle=idle,
        )

    def touch(self, rows: np.ndarray, when: float) -> np.ndarray:
        """Mark rows accessed at ``when`` (epoch seconds) where that is later than held.

        An access time never moves backwards, as in :meth:`merge_access`: a row that another
        process (or clock) accessed later than ``when`` keeps its time.

        Args:
            rows: row numbers.
            when: the access time.

        Returns:
            The rows whose access time changed.
        """
        rows = np.asarray(rows, dtype=np.int64)
        with self._order_lock:  # the access order sees a change whole or not at all
            later = rows[self.last_accessed[rows] < when]
            self.last_accessed[later] = when
            self._note_moved(later)
        self.nodes.set_accessed(later.tolist(), from_epoch(when))
        return later

    def merge_access(self, times: Mapping[int, float]) -> None:
        """Take access times stored elsewhere where they are later than the ones held.

        Args:
            times: ``{node_count: epoch seconds}``; nodes not held (yet) are skipped.
        """
        moved = []
        with self._order_lock:
            for number, when in times.items():
                row = self.row_of_number(number)
                if row is not None and when > self.last_accessed[row]:
                    self.last_accessed[row] = when
                    self.nodes.set_accessed([row], from_epoch(when))
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
        self.alive[row] = True
        self._hold_key(row, node.embedding_key)
        self.last_accessed[row] = to_epoch(node.last_accessed)
        self.created[row] = to_epoch(node.created)
        self.expiration[row] = np.inf if node.expiration is None else to_epoch(node.expiration)
        self.poignancy[row] = node.poignancy
        self.type_code[row] = TYPE_CODES[node.type]
        self.idle[row] = is_idle(node.embedding_key)
        self.type_count[row] = node.type_count
        self.depth[row] = node.depth
        self.node_number[row] = node.node_count
        self._map_number(node.node_count, row)

    def _map_number(self, number: int, row: int) -> None:
        """Let ``number`` name ``row`` (numbers above every one held)."""
        if number >= self._row_of.size:
            grown = np.full(max(number + 1, int(self._row_of.size * GROWTH), _FIRST), -1,
                            dtype=np.int64)
            grown[: self._row_of.size] = self._row_of
            self._row_of = grown
        self._row_of[number] = row
        self.highest = max(self.highest, number)

    def _map_numbers(self, highest: int) -> None:
        """Build the number map of the first ``n`` rows (their numbers ascending)."""
        self._row_of = np.full(max(highest + 1, _FIRST), -1, dtype=np.int64)
        numbers = self.node_number[: self.n]
        self._row_of[numbers] = np.arange(self.n)
        self.highest = max(highest, int(numbers[-1]) if self.n else 0)

    def _hold_key(self, row: int, key: str) -> None:
        """Count a live row holding ``key``; ``key_row`` names the newest such row."""
        held = self.key_row.get(key)
        if held is not None and self._shared_keys is not None:
            self._shared_keys[key] = self._shared_keys.get(key, 1) + 1
        self.key_row[key] = row if held is None else max(held, row)

    def _reserve(self, size: int) -> None:
        if size <= self._cap:
            return
        cap = max(size, int(self._cap * GROWTH), _FIRST)
        for name in (*ROW_COLUMNS, "alive"):
            setattr(self, name, _grow(getattr(self, name), cap, self.n, self.dim or 0))
        self._cap = cap


class LazyNodes(Sequence[MemoryNode]):
    """The MemoryNode of each row of a cache, made when first asked for.

    Rows appended by :meth:`NodeCache.append` hold their node at once. Rows loaded from a
    snapshot (:meth:`NodeCache.load`) hold none until asked: the node is then made from the
    cache's columns and the snapshot's texts, equal to the one a load from the store gives,
    and kept, so each row always answers with the same object.
    """

    def __init__(self, cache: NodeCache) -> None:
        self._cache = cache
        self._held: list[MemoryNode | None] = []
        self._texts: _Texts | None = None
        self._replaced: set[int] = set()  # rows of the texts whose node replaced them
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._held)

    @overload
    def __getitem__(self, index: int) -> MemoryNode: ...

    @overload
    def __getitem__(self, index: slice) -> list[MemoryNode]: ...

    def __getitem__(self, index: int | slice) -> MemoryNode | list[MemoryNode]:
        if isinstance(index, slice):
            rows = range(*index.indices(len(self._held)))
            self._make([r for r in rows if self._held[r] is None])
            return [self._held[r] for r in rows]  # type: ignore[misc]
        node = self._held[index]
        if node is None:
            self._make([index % len(self._held)])
            node = self._held[index]
        return node  # type: ignore[return-value]

    def __iter__(self) -> Iterator[MemoryNode]:
        return iter(self[:])

    def append(self, node: MemoryNode) -> None:
        """Hold the node of the next row.

        Args:
            node: the node.
        """
        self._held.append(node)

    def extend(self, nodes: Sequence[MemoryNode]) -> None:
        """Hold the nodes of the next rows, in order.

        Args:
            nodes: the nodes.
        """
        self._held.extend(nodes)

    def replace(self, nodes: Mapping[int, MemoryNode]) -> None:
        """Hold other node objects in rows (see :meth:`NodeCache.replace_nodes`).

        A replaced row of a snapshot is saved from its node from then on, not from the
        snapshot's text (nothing else is made).

        Args:
            nodes: ``{row: node}``.
        """
        with self._lock:
            for row, node in nodes.items():
                self._held[row] = node
                if self._texts is not None and row < self._texts.n:
                    self._replaced.add(row)

    def fillings(self, rows: Sequence[int]) -> list[Any]:
        """The ``filling`` of each row: its node's, or read from the texts if not made.

        Args:
            rows: rows.

        Returns:
            One filling per row.
        """
        held = self._held
        unmade = [r for r in rows if held[r] is None]
        parsed: dict[int, list] = {}
        if unmade:
            assert self._texts is not None  # only rows loaded from a snapshot hold no node
            parsed = dict(zip(unmade, self._texts.parse(unmade), strict=True))
        return [parsed[r][6] if held[r] is None else held[r].filling  # type: ignore[union-attr]
                for r in rows]

    def taking(self, cache: NodeCache, rows: np.ndarray) -> LazyNodes:
        """The nodes of ``rows``, in order, as the rows of another cache (a compaction).

        Nodes not made yet stay unmade: they are made from ``cache``'s columns and the
        same texts.

        Args:
            cache: the cache the new rows belong to.
            rows: rows of this list, ascending.

        Returns:
            The new list.
        """
        out = LazyNodes(cache)
        picked = rows.tolist()
        with self._lock:
            out._held = [self._held[r] for r in picked]
            if self._texts is not None:
                loaded = picked[: int(np.searchsorted(rows, self._texts.n))]
                out._texts = self._texts.taking(np.asarray(loaded, dtype=np.int64))
                old = {r: i for i, r in enumerate(loaded)}
                out._replaced = {old[r] for r in self._replaced if r in old}
        return out

    def load(self, texts: _Texts) -> None:
        """Stand for the rows of a snapshot (an empty list only).

        Args:
            texts: the snapshot's texts of rows ``0 .. texts.n - 1``.
        """
        self._texts = texts
        self._held = [None] * texts.n
        self._replaced = set()

    def set_accessed(self, rows: Sequence[int], moment: datetime) -> None:
        """Set ``last_accessed`` of the rows' nodes made so far (the rest read the column).

        Args:
            rows: row numbers.
            moment: the access time.
        """
        with self._lock:
            for row in rows:
                node = self._held[row]
                if node is not None:
                    node.last_accessed = moment

    def texts(self, n: int) -> tuple[bytes, np.ndarray]:
        """The JSON array of the first ``n`` rows' texts and where each row starts in it.

        Rows of the snapshot are taken as they were read (their bytes, never parsed), the
        others, and replaced rows, from their nodes.

        Args:
            n: how many rows.

        Returns:
            The UTF-8 text and ``n + 1`` offsets (row i ends one byte before ``i + 1``).
        """
        texts = self._texts
        loaded = 0 if texts is None else min(n, texts.n)
        out = bytearray(b"[")
        starts: list[np.ndarray] = []
        row = 0
        while row < loaded:  # runs of rows whose bytes lie one after another
            end = texts.run_end(row, loaded, self._replaced)  # type: ignore[union-attr]
            if end > row:
                shift = len(out) - int(texts.starts[row])  # type: ignore[union-attr]
                starts.append(texts.starts[row:end] + shift)  # type: ignore[union-attr]
                out += texts.blob[texts.starts[row] : texts.ends[end - 1]]  # type: ignore[union-attr]
                out += b","
                row = end
            else:
                starts.append(np.asarray([len(out)], dtype=np.int64))
                out += _row_text(self._held[row]) + b","  # type: ignore[arg-type]
                row += 1
        new: list[int] = []
        for row in range(loaded, n):
            new.append(len(out))
            out += _row_text(self._held[row]) + b","  # type: ignore[arg-type]
        if n:
            out[-1:] = b"]"
        else:
            out += b"]"
        new.append(len(out))
        return bytes(out), np.concatenate([*starts, np.asarray(new, dtype=np.int64)])

    def _make(self, rows: list[int]) -> None:
        """Make the nodes of rows holding none (under the lock: one object per row)."""
        if not rows or self._texts is None:
            return
        with self._lock:
            # rows may be numpy integers (a ranking's positions): node fields are plain ints
            rows = [int(r) for r in rows if self._held[r] is None]
            if not rows:
                return
            parsed = self._texts.parse(rows)
            c, at = self._cache, np.asarray(rows, dtype=np.int64)
            expires = c.expiration[at]
            columns = zip(
                rows, parsed, c.node_number[at].tolist(), c.type_count[at].tolist(),
                c.type_code[at].tolist(), c.depth[at].tolist(), c.poignancy[at].tolist(),
                from_epochs(c.created[at]), from_epochs(c.last_accessed[at]),
                from_epochs(np.where(np.isfinite(expires), expires, 0.0)),
                np.isfinite(expires).tolist(), strict=True,
            )
            for (row, texts, number, type_count, code, depth, poignancy, created, accessed, ends,
                 finite) in columns:
                subject, predicate, obj, description, key, keywords, filling = texts[:7]
                conversation, speaker = (*texts[7:], None, None)[:2]
                self._held[row] = _TEMPLATE.model_copy(update={  # every field: no validation
                    "node_id": f"node_{number}",
                    "node_count": number,
                    "type_count": type_count,
                    "type": TYPE_NAMES[code],
                    "depth": depth,
                    "created": created,
                    "expiration": ends if finite else None,
                    "last_accessed": accessed,
                    "subject": subject,
                    "predicate": predicate,
                    "object": obj,
                    "description": description,
                    "embedding_key": key,
                    "poignancy": poignancy,
                    "keywords": keywords,
                    "filling": filling,
                    "conversation": conversation,
                    "speaker": speaker,
                })


def from_epochs(seconds: np.ndarray) -> list[datetime]:
    """:func:`~langchain_genmem.core.timeutil.from_epoch` of each value, in one numpy pass.

    Args:
        seconds: epoch seconds (finite, within the years 1 to 9999).

    Returns:
        Naive datetimes rounded to the microsecond, half to even, as ``from_epoch`` does.
    """
    micros = np.round(np.asarray(seconds, dtype=np.float64) * 1e6).astype(np.int64)
    return micros.astype("datetime64[us]").tolist()


class _Texts:
    """A snapshot's texts of its rows: row i is ``blob[starts[i]:ends[i]]``, one JSON array.

    Row i is ``[subject, predicate, object, description, embedding_key, keywords, filling]``,
    then ``conversation, speaker`` for a conversation memory. As read from a snapshot, the
    blob is the JSON array of every row (row i ends one byte before row i + 1 starts); a
    compaction keeps the blob and takes some of the rows (:meth:`taking`).
    """

    def __init__(self, blob: bytes, starts: np.ndarray, ends: np.ndarray,
                 whole: bool = False) -> None:
        self.blob, self.starts, self.ends, self.whole = blob, starts, ends, whole
        self.n = int(starts.shape[0])

    @classmethod
    def of_array(cls, blob: bytes, offsets: np.ndarray, n: int) -> _Texts:
        """The texts of a snapshot: ``blob`` the JSON array of its ``n`` rows.

        Raises:
            ValueError: the offsets do not fit the blob.
        """
        if offsets.shape != (n + 1,) or (n and offsets[n] != len(blob)):
            raise ValueError("snapshot texts do not match its rows")
        offsets = offsets.astype(np.int64, copy=False)
        return cls(blob, offsets[:n], offsets[1:] - 1, whole=True)

    def taking(self, rows: np.ndarray) -> _Texts:
        """The texts of ``rows`` (ascending), as rows ``0 .. len(rows) - 1``."""
        return _Texts(self.blob, self.starts[rows], self.ends[rows])

    def run_end(self, row: int, limit: int, replaced: set[int]) -> int:
        """Where a run of rows lying one after another in the blob ends (``row`` if none).

        Args:
            row: the first row.
            limit: the end of the rows asked for.
            replaced: rows whose text is not to be taken from the blob.

        Returns:
            The first row after the run.
        """
        if row in replaced:
            return row
        if self.whole and not replaced:
            return limit
        end = row + 1
        while end < limit and end not in replaced and self.starts[end] == self.ends[end - 1] + 1:
            end += 1
        return end

    def parse(self, rows: list[int]) -> list[list]:
        """The parsed texts of rows (the whole array at once when many are asked)."""
        if self.whole and len(rows) > self.n // 8:
            every = json.loads(self.blob.decode("utf-8", "surrogatepass"))
            return [every[r] for r in rows]
        out = []
        for r in rows:
            raw = self.blob[self.starts[r] : self.ends[r]]
            out.append(json.loads(raw.decode("utf-8", "surrogatepass")))
        return out


def _row_text(node: MemoryNode) -> bytes:
    """A node's texts as one snapshot row (see :class:`_Texts`)."""
    fields = [node.subject, node.predicate, node.object, node.description, node.embedding_key,
              node.keywords, node.filling]
    if node.conversation is not None or node.speaker is not None:
        fields += [node.conversation, node.speaker]
    return json.dumps(fields, ensure_ascii=False).encode("utf-8", "surrogatepass")


def _tie_sort(cache: NodeCache, rows: np.ndarray) -> np.ndarray:
    """Positions sorting ``rows`` by last access ascending, events first, newest first."""
    return np.lexsort((-cache.node_number[rows], cache.type_code[rows],
                       cache.last_accessed[rows]))


def _secondary_key(cache: NodeCache, rows: np.ndarray) -> np.ndarray:
    """One int64 per row ordering rows of equal access time: type, then newest first."""
    return cache.type_code[rows].astype(np.int64) * (1 << 40) - cache.node_number[rows]


def _grow(column: np.ndarray, cap: int, n: int, dim: int) -> np.ndarray:
    out = np.zeros((cap, dim) if column.ndim == 2 else cap, dtype=column.dtype)
    if n:
        out[:n] = column[:n]
    return out
