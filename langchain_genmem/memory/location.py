"""Where memories live, and the streams opened there: :class:`StoreLocation`.

A location names one store (an embedded folder, a Chroma server or client, a PostgreSQL
database, or a ready backend), opens it once through
:func:`~langchain_genmem.backends.opener.open_backend`, opens persona streams on that one
backend and closes them together. The ``genmem`` command's
:class:`~langchain_genmem.cli.store.Store` is a location with the command line's options;
the service's stream pool and the deployed graphs take any location.

Example:
    .. code-block:: python

        from langchain_genmem.memory.location import StoreLocation

        place = StoreLocation(".genmem")                 # or host=..., dsn=..., backend=...
        stream = place.open("Maria Lopez", create=True)  # a new persona may start here
        place.personas()
        place.close()                                    # flushes and releases the store

An embedded folder is written by one process at a time (embedded Chroma keeps one index per
process). A location that writes one takes its writer lock before it reads anything from
it (:meth:`StoreLocation.claim`), so racing writers wait for each other instead of writing
from a view that misses another's write; a server claims its folder with its command and
URL before it serves, and keeps it until it stops. A reader of a folder that a server owns is
refused with the server's address.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from langchain_genmem.backends.base import MemoryBackend
from langchain_genmem.backends.chroma import DEFAULT_COLLECTION, FOLDER_WAIT
from langchain_genmem.backends.locks import FolderLock
from langchain_genmem.backends.opener import describe_store, open_backend
from langchain_genmem.core.errors import ValidationError
from langchain_genmem.memory.stream import Clock, MemoryStream

__all__ = ["StoreLocation"]


@dataclass
class StoreLocation:
    """One store, opened once, and the persona streams opened on it.

    Attributes:
        path: an embedded Chroma folder.
        host: a Chroma server's host, instead of ``path``.
        port: the Chroma server's port.
        collection: the Chroma collection.
        dsn: a PostgreSQL database, instead of Chroma.
        client: any chromadb client, instead of ``path`` and ``host``.
        backend: a ready backend, instead of all of the above.
        clock: the clock of every stream opened (None: each stream's own default).
        embeddings: the embedding model of every stream opened (None: the bundled one).
        request_timeout: PostgreSQL: the most seconds a call waits for a connection (None:
            the backend's default).
    """

    path: str | os.PathLike[str] | None = None
    host: str | None = None
    port: int = 8000
    collection: str = DEFAULT_COLLECTION
    dsn: str | None = None
    client: Any = None
    backend_object: MemoryBackend | None = None
    clock: Clock | None = None
    embeddings: Embeddings | None = None
    request_timeout: float | None = None
    _backend: MemoryBackend | None = field(default=None, repr=False)
    _opened: list[MemoryStream] = field(default_factory=list, repr=False)
    _claim: FolderLock | None = field(default=None, repr=False)

    def backend(self, *, create: bool = True) -> MemoryBackend:
        """The store's backend, opened on first use.

        An embedded folder is claimed for this process before it is opened to write
        (:meth:`claim`); opened to read, it is refused while a server owns it.

        Args:
            create: False refuses a store that does not exist yet (instead of creating it).

        Returns:
            The backend, shared by every stream opened here.

        Raises:
            ConcurrentWriterError: another process holds the embedded folder.
        """
        if self._backend is None:
            if create:
                self.claim()
            else:
                self._refuse_if_owned()
            self._backend = open_backend(
                self.path, host=self.host, port=self.port, client=self.client, dsn=self.dsn,
                backend=self.backend_object, collection=self.collection, create=create,
                request_timeout=self.request_timeout,
            )
        return self._backend

    def claim(self, *, command: str | None = None, url: str | None = None) -> None:
        """Take an embedded folder's writer lock for this process, before reading anything.

        Kept until :meth:`close`; an owner's claim (``command`` given) until the process
        ends, since a server's request handlers may close and reopen the location while it
        serves. A store that is not an embedded folder (a server, a database) takes many
        writers: nothing to claim.

        Args:
            command: a long-running owner's name (``"genmem serve"``), shown to the
                processes it refuses.
            url: where that owner takes requests, shown to them too.

        Raises:
            ConcurrentWriterError: a server owns the folder (at once), or another process
                still writes it after the wait.
        """
        folder = self._folder()
        if folder is None:
            return
        try:
            if command is not None:  # held for the process's life: never released by close()
                FolderLock(folder, FOLDER_WAIT).acquire(command=command, url=url)
                return
            if self._claim is None:
                self._claim = FolderLock(folder, FOLDER_WAIT)
            self._claim.acquire()
        except OSError:
            return  # a file, or a folder that cannot be made: opening it says what to do

    def _refuse_if_owned(self) -> None:
        folder = self._folder()
        if folder is None or not folder.is_dir():
            return
        lock = FolderLock(folder, FOLDER_WAIT)
        owner = lock.owner()
        if owner is not None:
            raise lock.refusal(None, owner)

    def _folder(self) -> Path | None:
        """The embedded Chroma folder of this location, or None for another store."""
        if self.path is None or self.host or self.dsn or self.client is not None:
            return None
        return None if self.backend_object is not None else Path(self.path)

    def where(self) -> str:
        """The store in words."""
        return describe_store(self.path, host=self.host, port=self.port, client=self.client,
                              dsn=self.dsn)

    def personas(self) -> list[str]:
        """Every persona with memories in the store."""
        return self.backend(create=False).personas()

    def open(self, persona: str, *, create: bool = False, **stream_kwargs: Any) -> MemoryStream:
        """A persona's stream on this store.

        Args:
            persona: the persona.
            create: the caller writes: the store and the persona may be new. Otherwise
                both must exist, so a read never leaves an empty store behind.
            **stream_kwargs: more :class:`MemoryStream` arguments (``importance``, ...).

        Returns:
            The stream; :meth:`close` closes it.

        Raises:
            ValidationError: (a read) the store or the persona does not exist.
        """
        backend = self.backend(create=create)
        if not create and backend.read_head(persona) is None:
            msg = f"persona: no persona {persona!r} in {self.where()}"
            raise ValidationError(msg, field="persona")
        stream = MemoryStream(persona, backend=backend, clock=self.clock,
                              embeddings=self.embeddings, **stream_kwargs)
        return self.track(stream)

    def stream_kwargs(self) -> dict[str, Any]:
        """What an importer passes to each new stream it makes here."""
        return {"backend": self.backend(), "clock": self.clock}

    def track(self, stream: MemoryStream) -> MemoryStream:
        """Remember a stream so :meth:`close` closes it.

        Args:
            stream: the stream.

        Returns:
            The same stream.
        """
        self._opened.append(stream)
        return stream

    def forget(self, stream: MemoryStream) -> None:
        """Stop keeping a stream its owner has closed, so its memory can be freed.

        A long-running owner (the service's pool of persona streams) closes streams it no
        longer needs; without this the location would keep each one until :meth:`close`.

        Args:
            stream: a stream opened (or tracked) here.
        """
        self._opened = [s for s in self._opened if s is not stream]

    def close(self) -> None:
        """Close every stream opened here (flushing access times), then the backend."""
        opened, self._opened = self._opened, []
        for stream in opened:
            stream.close()
        if self._backend is not None and self.backend_object is None:
            self._backend.close()
        if self._claim is not None:
            self._claim.release()
