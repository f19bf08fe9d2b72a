"""What a memory stream holds in process, shared by the parts that read and change it.

A :class:`~langchain_genmem.memory.stream.MemoryStream` is a facade over parts that each do
one thing to one :class:`StreamMirror`:

- :mod:`~langchain_genmem.memory.loader` reads what the store committed into it (opening,
  snapshots, catching up with other writers, their access times, leaving lazy mode);
- :mod:`~langchain_genmem.memory.writer` prepares, numbers and commits new memories and
  state, then mirrors them;
- :mod:`~langchain_genmem.memory.access` records access times and sends them to the store.

A part that changes which memories exist (forgetting, expiry, corrections) is one more
module of this kind: it commits through :meth:`StreamWriter.write
<langchain_genmem.memory.writer.StreamWriter.write>` and mirrors the result here
(:mod:`~langchain_genmem.memory.forgetting` forgets).

Forgotten memories: whenever the mirror installs a committed state, it drops the nodes that
state forgot since the one it held (:meth:`StreamState.forgotten_since
<langchain_genmem.core.state.StreamState.forgotten_since>`) from the cache, the keyword
index, the citations, the conversation turns and the lexical index, however it learnt of
them (its own forget, another process's caught up with, a lazy stream loading), at the cost
of what was forgotten. The cache is then a new object in which their rows are dead
(:meth:`NodeCache.without <langchain_genmem.memory.cache.NodeCache.without>`: the columns
are shared, rows keep their numbers), so a reader holding the old one keeps one moment and
the row-keyed lexical index stays valid. A kept memory that cites forgotten ones (a
thought's evidence) is shown without those ids. Kept turns the forget re-keyed (their
embedded text quoted a forgotten turn) get their new text and vector in place: from the
forget itself, or read again from the store (:meth:`StreamState.rekeyed_since
<langchain_genmem.core.state.StreamState.rekeyed_since>`) by a process catching up. Once
dead rows outnumber live ones (and at :meth:`StreamMirror.compact`), the cache is compacted.

Every part changes the mirror under :attr:`StreamMirror.lock`; the committed state is
replaced whole, never changed in place, so a reader holding it keeps one moment.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from langchain_genmem.backends.base import MemoryBackend, StoredNode
from langchain_genmem.core.errors import UnknownNodeError
from langchain_genmem.core.nodes import MemoryNode, node_number_or_none
from langchain_genmem.core.state import StreamState
from langchain_genmem.memory.cache import NodeCache
from langchain_genmem.memory.citations import Citations
from langchain_genmem.memory.keywords import KeywordIndex
from langchain_genmem.memory.turns import TurnLog

if TYPE_CHECKING:
    from langchain_genmem.numerics.lexical import LexicalIndex

Clock = Callable[[], datetime]

COMPACT_AFTER = 4096
"""Dead rows (forgotten memories) the cache keeps before it compacts itself, at least: it
compacts once dead rows outnumber both this and the live ones, so a compaction, which
copies every row, is paid for by as many forgotten memories."""


class StreamMirror:
    """One persona's committed memory as this process holds it.

    Attributes:
        persona: the persona's name.
        backend: the store the mirror follows.
        clock: the stream's clock (zero-argument callable giving the current datetime).
        lazy: True while no node is held (a lazy stream): only the committed state is.
        lock: guards every field below; taken before a store's read view.
        cache: the columns of every held node (one row per existing node, ascending by
            number).
        keywords: the keyword index and keyword strengths of the held nodes.
        turns: the conversation turns of the held nodes, built on the first turn added.
        lexical: the BM25 index of the held nodes, built on the first lexical query.
        citations: which held memories cite which, built on the first forget.
        state: the committed state this mirror is caught up with.
        access_rev: the revision of the store's access log this mirror has read.
    """

    def __init__(self, persona: str, backend: MemoryBackend, clock: Clock, *, lazy: bool) -> None:
        self.persona = persona
        self.backend = backend
        self.clock = clock
        self.lazy = lazy
        self.lock = threading.RLock()
        self.cache = NodeCache()
        self.keywords = KeywordIndex()
        self.turns = TurnLog()
        self.lexical: LexicalIndex | None = None
        self.citations = Citations()
        self.state = StreamState()
        self.access_rev = 0

    def known(self) -> int:
        """The highest node number this mirror accounts for (held or forgotten).

        New nodes are numbered after it; numbers are never reused.

        Returns:
            The committed ``node_count`` it is caught up with.
        """
        return self.state.node_count

    def live(self) -> int:
        """How many memories exist: held rows (the state's live count when lazy).

        Returns:
            The count.
        """
        return self.state.live_count if self.lazy else self.cache.live

    def row(self, node_id: str) -> int | None:
        """The row of a known node that exists.

        Args:
            node_id: a ``node_N`` id.

        Returns:
            Its row in the cache (``N - 1`` when lazy: rows are numbers there), or None
            when the id is not a node id, names no known node, or a forgotten one.
        """
        number = node_number_or_none(node_id)
        if number is None or number > self.known():
            return None
        if self.lazy:
            return None if self.state.is_forgotten(number) else number - 1
        return self.cache.row_of_number(number)

    def row_or_raise(self, node_id: str) -> int:
        """The row of a known node.

        Args:
            node_id: a ``node_N`` id.

        Returns:
            ``N - 1``.

        Raises:
            UnknownNodeError: no such node is known.
        """
        row = self.row(node_id)
        if row is None:
            raise UnknownNodeError(node_id, persona=self.persona)
        return row

    def install(self, stored: Sequence[StoredNode], state: StreamState,
                replaced: Sequence[StoredNode] = ()) -> None:
        """Mirror committed nodes and their state in the cache and the keyword index.

        Nodes forgotten since the held state are dropped first, then held nodes re-keyed
        since take their new text and vector (see the module docstring).

        Args:
            stored: the nodes ``state`` commits beyond those held (none when lazy).
            state: the committed state.
            replaced: held nodes re-keyed since the held state, with their new vectors.
        """
        gone = state.forgotten_since(self.state.rev)
        if not self.lazy:  # a lazy stream holds no node
            if gone:
                self.drop(gone, state)
            if replaced:
                self.rekey(replaced)
            self.append(stored, state.live_count)
        self.keywords.strength = dict(state.kw_strength)  # maps never changed in place
        self.state = state

    def append(self, stored: Sequence[StoredNode], total: int) -> None:
        """Hold more committed nodes: their columns and their keywords.

        Args:
            stored: the nodes, numbered after those held.
            total: how many nodes will be held once the load in progress ends (room made
                at once).
        """
        self.cache.append(stored, total=total)
        for s in stored:
            self.keywords.index_node(s.node)
        if self.citations.built:
            self.citations.add(s.node for s in stored)

    def release(self) -> None:
        """Hold no node again: a lazy stream after an operation that had to load them."""
        with self.lock:
            self.cache = NodeCache()
            self.keywords = KeywordIndex(strength=self.keywords.strength)
            self.turns, self.lexical, self.citations = TurnLog(), None, Citations()
            self.lazy = True

    def drop(self, ranges: Sequence[tuple[int, int]], state: StreamState) -> None:
        """Stop holding forgotten nodes: cache rows, keywords, citations, turns, lexical index.

        Costs what is forgotten (the citations are built first if this is the first forget
        this mirror sees).

        Args:
            ranges: the ``(first, last)`` number ranges forgotten.
            state: the state that forgot them.
        """
        old = self.cache
        highest = old.highest
        wanted = np.asarray([n for lo, hi in ranges for n in range(lo, min(hi, highest) + 1)],
                            dtype=np.int64)
        rows = old.rows_of_numbers(wanted)
        rows = rows[rows >= 0]
        if not rows.size:
            return
        if rows.size == old.live:  # every memory went: nothing held is kept
            self.cache = old.emptied()
            self.keywords = KeywordIndex(strength=self.keywords.strength)
            self.turns, self.lexical, self.citations = TurnLog(), None, Citations()
            return
        nodes = [old.nodes[r] for r in rows.tolist()]
        gone = {node.node_count for node in nodes}
        self.citations.build(old)
        cache = old.without(np.fromiter(gone, dtype=np.int64, count=len(gone)))
        trimmed = {}
        for number in sorted(self.citations.citing(gone) - gone):  # evidence to trim
            row = cache.row_of_number(number)
            if row is not None and (t := without_forgotten(cache.nodes[row], gone)) is not None:
                trimmed[row] = t
        if trimmed:
            cache.replace_nodes(trimmed)
        self.citations.remove(nodes)
        self.keywords.remove(nodes)
        self.turns.remove(nodes)
        if self.lexical is not None:
            self.lexical.forget_rows(old, rows)
        self.cache = cache
        if cache.dead > max(COMPACT_AFTER, cache.live):
            self.compact()

    def rekey(self, replaced: Sequence[StoredNode]) -> None:
        """Hold the new embedded text and vector of re-keyed nodes (a new cache object).

        Args:
            replaced: held nodes with their new ``embedding_key`` and vector.
        """
        old = self.cache
        cache = old.rekeyed(replaced)
        if cache is old:
            return
        if self.lexical is not None:  # the moved rows are indexed anew when next synced
            moved = np.flatnonzero(old.alive[: old.n] & ~cache.alive[: old.n])
            self.lexical.forget_rows(old, moved)
        self.cache = cache

    def compact(self) -> int:
        """Renumber the held rows without the dead ones (a new cache; costs every row).

        The lexical index and the turns are built again from the new rows on their next
        use; a reader holding the old cache keeps it.

        Returns:
            How many dead rows went.
        """
        with self.lock:
            old = self.cache
            cache = old.compacted()
            if cache is old:
                return 0
            self.cache = cache
            self.turns, self.lexical = TurnLog(), None
            return old.n - cache.n


def without_forgotten(node: MemoryNode, forgotten: Collection[int]) -> MemoryNode | None:
    """The node with forgotten ids taken out of its filling (a thought's evidence).

    Args:
        node: a node that exists.
        forgotten: the forgotten node numbers.

    Returns:
        A copy without them, or None when it cites none.
    """
    filling = node.filling
    if not forgotten or not isinstance(filling, list):
        return None
    kept = [x for x in filling
            if not (isinstance(x, str) and node_number_or_none(x) in forgotten)]
    if len(kept) == len(filling):
        return None
    return node.model_copy(update={"filling": kept})
