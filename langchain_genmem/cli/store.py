"""Where a ``genmem`` command's memories live: :class:`Store`, built from the global options."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from langchain_genmem.backends.chroma import persistent_client
from langchain_genmem.cli.options import renamed
from langchain_genmem.errors import GenMemError, StorageError, ValidationError
from langchain_genmem.interop.generative_agents import FixedClock

CHROMA_FILE = "chroma.sqlite3"  # what an embedded Chroma folder holds once created

if TYPE_CHECKING:
    from langchain_genmem.backends.base import MemoryBackend
    from langchain_genmem.store import MemoryStream


@dataclass
class Store:
    """Where the memories live, from the global options.

    Attributes:
        path: the embedded Chroma folder.
        host: a Chroma server's host, or None for the embedded folder.
        port: the Chroma server's port.
        collection: the Chroma collection.
        persona: the persona asked for, or None.
        now: the time asked for, or None.
        dsn: a PostgreSQL database to use instead of Chroma, or None.
    """

    path: Path
    host: str | None = None
    port: int = 8000
    collection: str = "genmem"
    persona: str | None = None
    now: datetime | None = None
    dsn: str | None = None
    _client: Any = field(default=None, repr=False)
    _postgres: Any = field(default=None, repr=False)
    _opened: list[MemoryStream] = field(default_factory=list, repr=False)

    def client(self) -> Any:
        """The chromadb client (opened once).

        Returns:
            A ``PersistentClient`` on ``path`` or an ``HttpClient`` on ``host:port``.

        Raises:
            ValidationError: ``--path`` is a file or cannot be created.
            StorageError: the store cannot be opened or the server not reached.
        """
        if self._client is None and not self.host:
            try:
                self._client = persistent_client(self.path)
            except GenMemError as e:
                raise renamed(e, "--path") from e
        if self._client is None:
            import chromadb

            try:
                self._client = chromadb.HttpClient(host=self.host, port=self.port)
            except Exception as e:  # noqa: BLE001 - chromadb raises many kinds
                msg = (
                    f"cannot open {self.where()} ({_first_line(e)}); start it "
                    "(chroma run --port N) or drop --chroma-host"
                )
                raise StorageError(msg) from e
        return self._client

    def where(self) -> str:
        """The store in words."""
        if self.dsn:
            from langchain_genmem.backends.postgres import redacted

            return f"the PostgreSQL database {redacted(self.dsn)}"
        if self.host:
            return f"the Chroma server at {self.host}:{self.port}"
        return f"the store at {self.path}"

    def backend(self) -> MemoryBackend:
        """The storage backend: the PostgreSQL database (opened once), or the collection."""
        if self.dsn:
            if self.host:
                msg = "--dsn: give either a PostgreSQL --dsn or a Chroma --chroma-host, not both"
                raise ValidationError(msg, field="dsn")
            if self._postgres is None:
                from langchain_genmem.backends.postgres import PostgresBackend

                self._postgres = PostgresBackend(self.dsn)
            return self._postgres
        from langchain_genmem.backends.chroma import ChromaBackend

        return ChromaBackend(self.client(), self.collection)

    def open(self, persona: str | None = None, *, create: bool = False) -> MemoryStream:
        """The persona's stream, its clock set (``--now``, else the saved simulation time).

        Args:
            persona: the persona; None for ``--persona``, else the store's only one.
            create: the caller writes (``add``, the service's writes): the store and the
                persona may be new. Otherwise both must exist, so a read never leaves an
                empty store behind.

        Returns:
            The stream.

        Raises:
            ValidationError: the store or the persona does not exist (for a read), or no
                persona was named and the store does not hold exactly one.
        """
        from langchain_genmem.store import MemoryStream

        if not create:
            self._check_exists()
        backend = self.backend()
        personas = backend.personas()
        persona = persona or self.persona or self._only_persona(personas)
        if not create and persona not in personas:
            msg = (
                f"--persona: no persona {persona!r} in {self.where()}; it holds "
                f"{', '.join(personas)}"
            )
            raise ValidationError(msg, field="persona")
        stream = self.track(MemoryStream(persona, backend=backend))
        if self.now is not None:
            stream.clock = FixedClock(self.now)
        return stream

    def _check_exists(self) -> None:
        """Refuse to read a store that is not there (instead of creating an empty one).

        A PostgreSQL database is the user's own: it must exist to be connected to, and a
        persona it does not hold is refused by :meth:`open`.
        """
        if self.dsn:
            return
        if self.host:
            names = {getattr(c, "name", c) for c in self.client().list_collections()}
            missing = self.collection not in names
        else:
            if self.path.exists() and not self.path.is_dir():
                self.client()  # refuses a file, as a write would
            missing = not (self.path / CHROMA_FILE).is_file()
        if missing:
            option = "--collection" if self.host else "--path"
            what = f"collection {self.collection!r} on " if self.host else ""
            msg = (
                f"{option}: {what}{self.where()} does not exist; check {option} or create it "
                "with `genmem import FOLDER` or `genmem add ...`"
            )
            raise ValidationError(msg, field="path")

    def track(self, stream: MemoryStream) -> MemoryStream:
        """Remember a stream so :meth:`close` flushes it when the command ends.

        Args:
            stream: the stream.

        Returns:
            The same stream.
        """
        self._opened.append(stream)
        return stream

    def close(self) -> None:
        """Flush deferred access times of every stream the command opened."""
        for stream in self._opened:
            stream.close()
        if self._postgres is not None:
            self._postgres.close()

    def stream_kwargs(self) -> dict[str, Any]:
        """What the importers pass on to each new stream."""
        clock = FixedClock(self.now) if self.now is not None else None
        if self.dsn:
            return {"backend": self.backend(), "clock": clock}
        return {"client": self.client(), "collection_name": self.collection, "clock": clock}

    def _only_persona(self, personas: Sequence[str]) -> str:
        if len(personas) == 1:
            return personas[0]
        if not personas:
            msg = (
                f"{self.where()} holds no memories yet; run "
                "`genmem import FOLDER` or `genmem --persona NAME add ...`"
            )
        else:
            msg = f"the store holds several personas ({', '.join(personas)}); choose with --persona"
        raise ValidationError(msg, field="persona")


def store_of(ctx: typer.Context) -> Store:
    """The :class:`Store` the global options made for this command.

    Args:
        ctx: the command's context.

    Returns:
        The store.
    """
    return ctx.ensure_object(Store)


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
