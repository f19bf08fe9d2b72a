"""The open memory streams of a running service: at most ``max_open`` personas, shared.

A :class:`~langchain_genmem.MemoryStream` is safe to share between threads: its writes and
access-time updates run under its lock, and its node numbers are given inside that lock, so
concurrent writes never lose or repeat a memory. The pool opens a persona's stream on the
first request that needs it and shares it with every request after.

It keeps at most ``max_open`` streams (``genmem serve --max-open-personas``). Past that, the
least recently used persona that no request is using is closed: its deferred access times
are flushed, a snapshot is saved for the next open, and its memory is freed. Its next request
opens it again. A stream in use is never closed (each request holds it from start to end),
so the pool can run over its limit only while more personas than that are in use at once.
Everything left open is closed once, when the server stops.

Where the memories live is the business of the ``opener``; :meth:`StreamPool.from_store`
opens them on a :class:`~langchain_genmem.memory.location.StoreLocation` (the ``genmem``
command's ``Store`` is one), so every store the library opens (an embedded folder, a Chroma
server, PostgreSQL, any backend) serves unchanged.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from langchain_genmem.core import validation
from langchain_genmem.memory.location import StoreLocation
from langchain_genmem.service.heap import release_freed_memory

if TYPE_CHECKING:
    from langchain_genmem.backends.base import MemoryBackend
    from langchain_genmem.memory.stream import MemoryStream

Opener = Callable[[str], "MemoryStream"]

DEFAULT_MAX_OPEN = 64
"""Personas kept open by default. A small persona's stream costs about 2 MB, one with
10,000 memories about 20 MB (its vectors and fields); reopening one from its snapshot takes
milliseconds, so a server with many personas stays within a few hundred MB."""

TRIM_EVERY = 16
"""Personas closed between two returns of freed memory to the system (it scans the heap)."""

logger = logging.getLogger(__name__)


@dataclass
class _Open:
    """One open persona: its stream, how many requests use it, its reflection lock."""

    stream: MemoryStream
    users: int = 0
    reflecting: threading.Lock = field(default_factory=threading.Lock)


class StreamPool:
    """Each persona's stream, opened once, shared, and closed when least recently used.

    Args:
        opener: opens a persona's stream (a new, empty one for a persona never written).
        backend: gives the storage backend, for listing personas and telling whether one
            exists without opening it.
        on_close: called after every stream is closed (e.g. the store's own close).
        importance: an importance scorer given to every stream opened, or None.
        max_open: the most personas kept open (at least 1).
        on_evict: called with each stream closed to stay within ``max_open`` (e.g. so the
            store lets go of it).
    """

    def __init__(
        self,
        opener: Opener,
        backend: Callable[[], MemoryBackend],
        *,
        on_close: Callable[[], None] | None = None,
        importance: Any = None,
        max_open: int = DEFAULT_MAX_OPEN,
        on_evict: Callable[[MemoryStream], None] | None = None,
    ) -> None:
        if max_open < 1:
            msg = f"max_open: keep at least one persona open, not {max_open}"
            raise ValueError(msg)
        self._opener = opener
        self._backend_of = backend
        self._backend: MemoryBackend | None = None
        self._on_close = on_close
        self._on_evict = on_evict
        self.importance = importance
        self.max_open = max_open
        self._open: OrderedDict[str, _Open] = OrderedDict()  # least recently used first
        self._busy: dict[str, threading.Event] = {}  # personas being opened or closed
        self._lock = threading.Lock()
        self._closed_since_trim = 0

    @classmethod
    def from_store(
        cls,
        store: StoreLocation,
        *,
        importance: Any = None,
        lazy: bool = False,
        max_open: int = DEFAULT_MAX_OPEN,
    ) -> StreamPool:
        """A pool over a store (the command line's ``--path``, ``--chroma-host``, ``--dsn``...).

        Args:
            store: where the memories live.
            importance: an importance scorer for memories added without poignancy.
            lazy: open lazy streams (``MemoryStream(..., lazy=True)``): no node held.
            max_open: the most personas kept open.

        Returns:
            The pool; nothing is opened until a request needs it.
        """
        opener = partial(store.open, create=True, lazy=lazy)  # a write may start a persona
        return cls(opener, store.backend, on_close=store.close, importance=importance,
                   max_open=max_open, on_evict=store.forget)

    @property
    def backend(self) -> MemoryBackend:
        """The storage backend (opened on first use)."""
        with self._lock:
            if self._backend is None:
                self._backend = self._backend_of()
            return self._backend

    @property
    def open_count(self) -> int:
        """How many personas are open now."""
        with self._lock:
            return len(self._open)

    def open_personas(self) -> list[str]:
        """The personas open here now, in name order."""
        with self._lock:
            return sorted(self._open)

    def personas(self) -> list[str]:
        """Every persona with memories in the store, or open here."""
        with self._lock:
            open_now = list(self._open)
        return sorted({*self.backend.personas(), *open_now})

    @contextmanager
    def reading(self, persona: str) -> Iterator[MemoryStream | None]:
        """Use a persona's stream for a read; None when the store holds no memory of it.

        Args:
            persona: the persona.

        Yields:
            The stream (kept open until the block ends), or None.

        Raises:
            ValidationError: not a persona name (checked before the store is asked).
        """
        entry = self._acquire(persona, create=False)
        if entry is None:
            yield None
            return
        try:
            yield entry.stream
        finally:
            self._release(entry)

    @contextmanager
    def writing(self, persona: str) -> Iterator[MemoryStream]:
        """Use a persona's stream for a write; a new, empty one when the store has none.

        Args:
            persona: the persona.

        Yields:
            The stream, kept open until the block ends.
        """
        entry = cast("_Open", self._acquire(persona, create=True))  # a write always opens
        try:
            yield entry.stream
        finally:
            self._release(entry)

    def reflection_lock(self, persona: str) -> threading.Lock:
        """The lock that keeps one reflection per persona at a time (inside ``reading``)."""
        with self._lock:
            return self._open[persona].reflecting

    def close(self) -> int:
        """Flush and close every open stream (at shutdown); a second call closes nothing.

        Returns:
            How many streams were closed.
        """
        with self._lock:
            entries, self._open = list(self._open.values()), OrderedDict()
        errors = []
        for entry in entries:
            try:
                entry.stream.close()
            except Exception as e:  # noqa: BLE001 - flush the others, then report
                errors.append(e)
        if self._on_close is not None:
            on_close, self._on_close = self._on_close, None
            on_close()
        if errors:
            raise errors[0]
        return len(entries)

    def _acquire(self, persona: str, *, create: bool) -> _Open | None:
        validation.persona_name(persona)  # checked before the store is asked
        while True:
            with self._lock:
                entry = self._open.get(persona)
                if entry is not None:
                    entry.users += 1
                    self._open.move_to_end(persona)
                    return entry
                busy = self._busy.get(persona)
                if busy is None:  # this request opens it; others of the persona wait
                    done = self._busy[persona] = threading.Event()
                    break
            busy.wait()
        entry = None
        try:
            backend = self.backend  # opened once, under the pool's lock, before any stream
            if create or backend.read_head(persona) is not None:
                stream = self._opener(persona)
                if self.importance is not None:
                    stream.importance = self.importance
                entry = _Open(stream, users=1)
        finally:
            with self._lock:
                if entry is not None:
                    self._open[persona] = entry
                del self._busy[persona]
            done.set()
        self._evict()
        return entry

    def _release(self, entry: _Open) -> None:
        with self._lock:
            entry.users -= 1
            persona = entry.stream.persona
            unborn = (entry.users == 0 and entry.stream.committed.rev == 0
                      and self._open.get(persona) is entry)
            if unborn:  # a write was refused before it stored anything: no persona yet
                del self._open[persona]
        if unborn and self._on_evict is not None:
            self._on_evict(entry.stream)
        self._evict()

    def _evict(self) -> None:
        """Close least recently used personas no request is using, down to ``max_open``."""
        while True:
            with self._lock:
                if len(self._open) <= self.max_open:
                    return
                persona = next((p for p, e in self._open.items() if e.users == 0), None)
                if persona is None:  # every open persona is in use: close one later
                    return
                entry = self._open.pop(persona)
                done = self._busy[persona] = threading.Event()
            try:
                entry.stream.close()
            except Exception:  # noqa: BLE001 - the request that made room must not fail
                logger.warning("closing persona %r to make room failed", persona,
                               exc_info=True)
            finally:
                if self._on_evict is not None:
                    self._on_evict(entry.stream)
                with self._lock:
                    del self._busy[persona]
                    self._closed_since_trim += 1
                    trim = self._closed_since_trim >= TRIM_EVERY
                    if trim:
                        self._closed_since_trim = 0
                done.set()
            if trim:  # the closed caches' memory, back to the system
                release_freed_memory()
