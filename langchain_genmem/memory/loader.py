"""Reading what the store committed into a stream's mirror, and catching up with other writers.

Opening reads the committed state and nodes (or a snapshot of them) as of one moment;
catching up loads what other writers committed since; other processes' access times come
from the store's access log; a lazy stream loads every node on first need. See
:mod:`~langchain_genmem.memory.mirror` for the parts of a stream.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from langchain_genmem.backends import snapshot
from langchain_genmem.backends.base import StoredNode, access_log_of, snapshots_of, views_of
from langchain_genmem.core.errors import UnknownNodeError
from langchain_genmem.core.nodes import NODE_TYPES, MemoryNode, node_number
from langchain_genmem.core.state import StreamState, number_runs
from langchain_genmem.memory.cache import GROWTH, NodeCache
from langchain_genmem.memory.mirror import without_forgotten

if TYPE_CHECKING:
    from langchain_genmem.backends.base import Head
    from langchain_genmem.memory.mirror import StreamMirror

logger = logging.getLogger(__name__)

LOAD_PAGE = 10_000  # nodes read from the backend per call when a stream opens or catches up


class StreamLoader:
    """Loads a persona's committed memory into its stream's mirror.

    Args:
        mirror: the mirror it fills.
    """

    def __init__(self, mirror: StreamMirror) -> None:
        self.mirror = mirror

    def columns(self) -> NodeCache:
        """The columns of every committed node, loaded first when the stream is lazy.

        Returns:
            The mirror's cache.
        """
        m = self.mirror
        if m.lazy:
            self.load_everything()
        return m.cache

    def load_everything(self) -> None:
        """Leave lazy mode: load every committed node, as a stream opened normally does."""
        m = self.mirror
        with m.lock, self.view():
            if not m.lazy:
                return
            head = m.backend.read_head(m.persona)  # first: later access times are read
            self.apply_state(m.state, nodes=True)
            m.access_rev = 0 if head is None else head.access_rev
            m.lazy = False

    def view(self) -> AbstractContextManager[None]:
        """One moment of the store for the reads of an open or a catch-up (if it needs one).

        An embedded folder another process writes: its writes wait meanwhile, so the state
        read and the vectors this process can read are of one moment
        (:mod:`~langchain_genmem.backends.gate`).

        Returns:
            The read view, or a context that does nothing.
        """
        views = views_of(self.mirror.backend)
        return nullcontext() if views is None else views.read_view(self.mirror.persona)

    def open(self) -> None:
        """Open: the committed state and nodes (or a snapshot of them), read as of one moment."""
        with self.view():
            self._open()

    def _open(self) -> None:
        m = self.mirror
        head = m.backend.read_head(m.persona)
        m.access_rev = 0 if head is None else head.access_rev
        snaps = snapshots_of(m.backend)
        if head is None:
            if snaps is not None:
                snaps.begin_load(m.persona)  # a new persona: every access time is this view's
            return
        if not m.lazy and self._load_snapshot():
            return
        key = snaps.begin_load(m.persona) if snaps is not None else None
        state = m.backend.read_state(m.persona)
        if state is None:
            return
        self.apply_state(state)
        if key is not None and key.rev == state.rev:
            self.save_snapshot(key)

    def _load_snapshot(self) -> bool:
        """Open from a snapshot that matches the store (embedded folders); False if none."""
        m = self.mirror
        snaps = snapshots_of(m.backend)
        held = snaps.read_snapshot(m.persona, GROWTH) if snaps is not None else None
        if held is None:
            return False
        state, content = held  # it matched the store's revision, state and access times
        try:
            m.cache.load(content)
            index = snapshot.index_from_json(content.meta["keywords"])
        except (KeyError, TypeError, ValueError) as e:
            logger.warning("snapshot of %r does not fit (%s): opening from the store",
                           m.persona, e)
            m.cache = NodeCache()
            return False
        m.keywords.index = {t: index.get(t, {}) for t in NODE_TYPES}
        m.install([], state)
        return True

    def save_snapshot(self, key: Any = None) -> None:
        """Save the committed nodes beside an embedded folder for the next open (if unchanged).

        Args:
            key: what the snapshot store gave when this load began (None: at close).
        """
        m = self.mirror
        snaps = snapshots_of(m.backend)
        if snaps is None:
            return
        with m.lock:
            n = m.state.live_count
            if m.cache.live != n or n == 0:
                return
            content = m.cache.snapshot_content()
            content.meta["keywords"] = snapshot.index_to_json(m.keywords.listed())
            snaps.write_snapshot(m.persona, key, content)

    def catch_up(self) -> bool:
        """Load what other writers committed since the mirror last looked (under its lock).

        Returns:
            True when something new was loaded.
        """
        with self.view():  # taken after the lock, as a flush takes a write
            return self._load_newer()

    def _load_newer(self) -> bool:
        m = self.mirror
        head: Head | None = m.backend.read_head(m.persona)
        if head is None or head.rev == m.state.rev:
            return False
        state = m.backend.read_state(m.persona)
        if state is None or state.rev == m.state.rev:
            return False
        self.apply_state(state)
        return True

    def apply_state(self, state: StreamState, *, nodes: bool | None = None) -> None:
        """Load the nodes ``state`` commits beyond the cache, page by page, then install it.

        Pages keep the peak memory of opening a large stream near what the cache holds.
        A lazy stream reads no node (``nodes=True`` reads them all the same). Pages run
        from the highest number held to ``state.node_count`` (the store leaves forgotten
        numbers out); held nodes re-keyed since the held state are read again; installing
        ``state`` then drops what it forgot since the held state and takes the re-keyed.

        Args:
            state: the committed state to catch up with.
            nodes: read the nodes (None: unless the stream is lazy).
        """
        m = self.mirror
        read = not m.lazy if nodes is None else nodes
        replaced: list[StoredNode] = []
        if read:
            forgotten = state.forgotten_numbers()
            replaced = _trimmed(self._rekeyed(state, forgotten), forgotten)
            for first in range(m.cache.highest + 1, state.node_count + 1, LOAD_PAGE):
                last = min(state.node_count, first + LOAD_PAGE - 1)
                page = m.backend.read_nodes(m.persona, first, last)
                m.append(_trimmed(page, forgotten), state.live_count)
        m.install([], state, replaced)

    def _rekeyed(self, state: StreamState, forgotten: frozenset[int]) -> list[StoredNode]:
        """The held nodes ``state`` re-keyed since the held state, read again from the store."""
        m = self.mirror
        highest = m.cache.highest
        wanted = [n for n in state.rekeyed_since(m.state.rev)
                  if n <= highest and n not in forgotten]
        out: list[StoredNode] = []
        for first, last in number_runs(wanted):
            out += m.backend.read_nodes(m.persona, first, last)
        return out

    def refresh(self) -> bool:
        """See what other processes committed since the mirror last looked.

        Returns:
            True when something new was loaded.
        """
        m = self.mirror
        head: Head | None = m.backend.read_head(m.persona)
        if head is None:
            return False
        if head.access_rev != m.access_rev:
            self._load_access(head.access_rev)
        if head.rev == m.state.rev:
            return False
        with m.lock:
            return self.catch_up()

    def _load_access(self, access_rev: int) -> None:
        """Take access times other processes stored since the mirror last looked."""
        m = self.mirror
        if m.lazy:  # nothing held: the store's access times are read with its rows
            m.access_rev = access_rev
            return
        log = access_log_of(m.backend)
        times = {} if log is None else log.read_access(m.persona, m.access_rev)
        with m.lock:
            self.columns().merge_access(times)
            m.access_rev = access_rev

    def node(self, node_id: str) -> MemoryNode:
        """The node with this id: held, or read from the store when the stream is lazy.

        Args:
            node_id: a ``node_N`` id.

        Returns:
            The node.

        Raises:
            UnknownNodeError: the persona has no such node.
        """
        if self.mirror.lazy:
            return self.read_stored(node_id).node
        with self.mirror.lock:  # the row and its node of one moment
            return self.columns().nodes[self.mirror.row_or_raise(node_id)]

    def read_stored(self, node_id: str) -> StoredNode:
        """One node and its vector, read from the store (a lazy stream).

        Args:
            node_id: a ``node_N`` id.

        Returns:
            The stored node.

        Raises:
            UnknownNodeError: the persona has no such node (or forgot it), even after a
                refresh.
        """
        m = self.mirror
        if m.row(node_id) is None:
            self.refresh()  # perhaps another process wrote it just now
            m.row_or_raise(node_id)
        number = node_number(node_id)
        found = m.backend.read_nodes(m.persona, number, number)
        if not found:  # forgotten by another process meanwhile
            raise UnknownNodeError(node_id, persona=m.persona)
        return _trimmed(found, m.state.forgotten_numbers())[0]


def _trimmed(stored: list[StoredNode], forgotten: frozenset[int]) -> list[StoredNode]:
    """The stored nodes with forgotten ids taken out of their evidence."""
    if not forgotten:
        return stored
    out = []
    for s in stored:
        node = without_forgotten(s.node, forgotten)
        out.append(s if node is None else StoredNode(node, s.vector))
    return out
