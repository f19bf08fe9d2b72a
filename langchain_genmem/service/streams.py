"""The open memory streams of a running service, one per persona, shared by every request.

A :class:`~langchain_genmem.MemoryStream` is safe to share between threads: its writes and
access-time updates run under its lock, and its node numbers are given inside that lock, so
concurrent writes never lose or repeat a memory. The pool opens each persona's stream once,
on the first request that needs it, and closes (flushes) them all when the server stops.

Where the memories live is the business of the ``opener``; :meth:`StreamPool.from_store`
opens them on a :class:`~langchain_genmem.memory.location.StoreLocation` (the ``genmem``
command's ``Store`` is one), so every store the library opens (an embedded folder, a Chroma
server, PostgreSQL, any backend) serves unchanged.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from langchain_genmem.core import validation
from langchain_genmem.memory.location import StoreLocation

if TYPE_CHECKING:
    from langchain_genmem.backends.base import MemoryBackend
    from langchain_genmem.memory.stream import MemoryStream

Opener = Callable[[str], "MemoryStream"]


class StreamPool:
    """Each persona's stream, opened once and shared.

    Args:
        opener: opens a persona's stream (a new, empty one for a persona never written).
        backend: gives the storage backend, for listing personas and telling whether one
            exists without opening it.
        on_close: called after every stream is closed (e.g. the store's own close).
        importance: an importance scorer given to every stream opened, or None.
    """

    def __init__(
        self,
        opener: Opener,
        backend: Callable[[], MemoryBackend],
        *,
        on_close: Callable[[], None] | None = None,
        importance: Any = None,
    ) -> None:
        self._opener = opener
        self._backend_of = backend
        self._backend: MemoryBackend | None = None
        self._on_close = on_close
        self.importance = importance
        self._streams: dict[str, MemoryStream] = {}
        self._lock = threading.Lock()
        self._reflecting: dict[str, threading.Lock] = {}

    @classmethod
    def from_store(
        cls, store: StoreLocation, *, importance: Any = None, lazy: bool = False
    ) -> StreamPool:
        """A pool over a store (the command line's ``--path``, ``--chroma-host``, ``--dsn``...).

        Args:
            store: where the memories live.
            importance: an importance scorer for memories added without poignancy.
            lazy: open lazy streams (``MemoryStream(..., lazy=True)``): no node held.

        Returns:
            The pool; nothing is opened until a request needs it.
        """
        opener = partial(store.open, create=True, lazy=lazy)  # a write may start a persona
        return cls(opener, store.backend, on_close=store.close, importance=importance)

    @property
    def backend(self) -> MemoryBackend:
        """The storage backend (opened on first use)."""
        with self._lock:
            if self._backend is None:
                self._backend = self._backend_of()
            return self._backend

    def personas(self) -> list[str]:
        """Every persona with memories in the store, or opened here."""
        return sorted({*self.backend.personas(), *self._open_names()})

    def find(self, persona: str) -> MemoryStream | None:
        """A persona's stream, or None when the store holds no memory of it (for reads).

        Args:
            persona: the persona.

        Returns:
            The stream, or None.

        Raises:
            ValidationError: not a persona name (checked before the store is asked).
        """
        stream = self._streams.get(validation.persona_name(persona))
        if stream is None and self.backend.read_head(persona) is not None:
            stream = self.open(persona)
        return stream

    def open(self, persona: str) -> MemoryStream:
        """A persona's stream, a new empty one when the store has none (for writes).

        Args:
            persona: the persona.

        Returns:
            The stream.
        """
        stream = self._streams.get(persona)
        if stream is not None:
            return stream
        with self._lock:
            stream = self._streams.get(persona)
            if stream is None:
                stream = self._opener(persona)
                if self.importance is not None:
                    stream.importance = self.importance
                self._streams[persona] = stream
                self._reflecting[persona] = threading.Lock()
            return stream

    def reflection_lock(self, persona: str) -> threading.Lock:
        """The lock that keeps one reflection per persona at a time (open the stream first)."""
        return self._reflecting[persona]

    def close(self) -> int:
        """Flush every open stream's deferred access times (at shutdown).

        Returns:
            How many streams were closed.
        """
        with self._lock:
            streams = list(self._streams.values())
        errors = []
        for stream in streams:
            try:
                stream.close()
            except Exception as e:  # noqa: BLE001 - flush the others, then report
                errors.append(e)
        if self._on_close is not None:
            self._on_close()
        if errors:
            raise errors[0]
        return len(streams)

    def _open_names(self) -> list[str]:
        with self._lock:
            return list(self._streams)
