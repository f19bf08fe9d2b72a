"""Access times: exact in process at once, written to the store behind.

A retrieval moves its results' ``last_accessed`` forward in the stream's columns at once;
the store gets them within ``flush_interval`` seconds (a timer), at a flush, at close or at
interpreter exit (:mod:`~langchain_genmem.memory.shutdown`). A lazy stream holds no column
and writes them at once. See :mod:`~langchain_genmem.memory.mirror` for the parts of a
stream.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

import numpy as np

from langchain_genmem.core.errors import StorageError

if TYPE_CHECKING:
    from langchain_genmem.memory.loader import StreamLoader
    from langchain_genmem.memory.mirror import StreamMirror

logger = logging.getLogger(__name__)


class AccessRecorder:
    """Records one persona's access times and sends them to the store behind.

    Args:
        mirror: the stream's mirror.
        loader: gives the columns (loading them first when the stream is lazy).
        flush_interval: seconds within which deferred access times reach the store.

    Attributes:
        flush_interval: as given; may be changed.
        pending: access times not stored yet, by node id (epoch seconds).
    """

    def __init__(self, mirror: StreamMirror, loader: StreamLoader, flush_interval: float) -> None:
        self.mirror = mirror
        self.loader = loader
        self.flush_interval = flush_interval
        self.pending: dict[str, float] = {}
        self._timer: threading.Timer | None = None

    def mark(self, numbers: np.ndarray, when: float) -> None:
        """Record an access of nodes: at once in the store when lazy, else as :meth:`record`.

        Args:
            numbers: node numbers known to the mirror (int64 array).
            when: the access time, epoch seconds.
        """
        m = self.mirror
        if m.lazy:
            m.backend.write_access(m.persona, {f"node_{n}": when for n in numbers.tolist()})
            return
        self.record(numbers, when)

    def record(self, numbers: np.ndarray, when: float) -> None:
        """Move the access times of nodes to ``when`` where that is later; store them behind.

        Nodes are named by number, so the access lands on exactly those memories whatever
        the cache a caller read them from; one forgotten meanwhile is skipped.

        Args:
            numbers: node numbers (int64 array).
            when: the access time, epoch seconds.
        """
        m = self.mirror
        with m.lock:
            cache = self.loader.columns()
            rows = cache.rows_of_numbers(numbers)
            moved = cache.touch(rows[rows >= 0], when)  # never backwards: only later times
            nodes = cache.nodes
            for row in moved.tolist():
                self.pending[nodes[row].node_id] = when
            if self._timer is None and self.pending:
                self._timer = threading.Timer(self.flush_interval, self._flush_from_timer)
                self._timer.daemon = True
                self._timer.start()

    def _flush_from_timer(self) -> None:
        try:
            self.flush()
        except StorageError as e:  # an outage: one line, the times stay pending
            logger.warning("deferred access times of %r not stored yet: %s",
                           self.mirror.persona, e)

    def flush(self) -> int:
        """Write deferred access times to the store now.

        Returns:
            How many access times were written.

        Raises:
            StorageError: the store refused them (they stay pending).
        """
        m = self.mirror
        with m.lock:
            pending, self.pending = self.pending, {}
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            pending = {i: t for i, t in pending.items() if m.row(i) is not None}  # forgotten
            if not pending:
                return 0
            try:
                m.backend.write_access(m.persona, pending)
            except Exception as e:
                self.pending = {**pending, **self.pending}
                msg = f"could not store access times of {m.persona!r}: {e}"
                raise StorageError(msg) from e
            return len(pending)

