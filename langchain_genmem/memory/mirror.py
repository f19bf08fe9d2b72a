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
<langchain_genmem.memory.writer.StreamWriter.write>` and mirrors the result here.

Every part changes the mirror under :attr:`StreamMirror.lock`; the committed state is
replaced whole, never changed in place, so a reader holding it keeps one moment.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime

from langchain_genmem.backends.base import MemoryBackend, StoredNode
from langchain_genmem.core.errors import UnknownNodeError
from langchain_genmem.core.nodes import node_number_or_none
from langchain_genmem.core.state import StreamState
from langchain_genmem.memory.cache import NodeCache
from langchain_genmem.memory.keywords import KeywordIndex
from langchain_genmem.memory.turns import TurnLog

Clock = Callable[[], datetime]


class StreamMirror:
    """One persona's committed memory as this process holds it.

    Attributes:
        persona: the persona's name.
        backend: the store the mirror follows.
        clock: the stream's clock (zero-argument callable giving the current datetime).
        lazy: True while no node is held (a lazy stream): only the committed state is.
        lock: guards every field below; taken before a store's read view.
        cache: the columns of every held node (row ``i`` is ``node_{i+1}``).
        keywords: the keyword index and keyword strengths of the held nodes.
        turns: the conversation turns of the held nodes, built on the first turn added.
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
        self.state = StreamState()
        self.access_rev = 0

    def known(self) -> int:
        """How many committed nodes this mirror knows of.

        Returns:
            The count (the state's, when no node is held).
        """
        return self.state.node_count if self.lazy else self.cache.n

    def row(self, node_id: str) -> int | None:
        """The row of a known node.

        Args:
            node_id: a ``node_N`` id.

        Returns:
            ``N - 1``, or None when the id is not a node id or names no known node.
        """
        number = node_number_or_none(node_id)
        if number is None or number > self.known():
            return None
        return number - 1

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

    def install(self, stored: Sequence[StoredNode], state: StreamState) -> None:
        """Mirror committed nodes and their state in the cache and the keyword index.

        Args:
            stored: the nodes ``state`` commits beyond those held (none when lazy).
            state: the committed state.
        """
        if not self.lazy:  # a lazy stream holds no node
            self.append(stored, state.node_count)
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
