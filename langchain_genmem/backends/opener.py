"""Open a store: the one place that decides which backend a place to keep memories becomes.

``open_backend`` takes one of: ``path`` (an embedded Chroma folder), ``host``/``port`` (a
Chroma server), ``client`` (any chromadb client), ``dsn`` (PostgreSQL with pgvector) or
``backend`` (a ready :class:`~langchain_genmem.backends.base.MemoryBackend`, returned as it
is); none of them gives a fresh in-memory Chroma collection. :class:`MemoryStream`, the
LangGraph store, the memory-layer :class:`~langchain_genmem.memory.location.StoreLocation`
(and through it the ``genmem`` command, the service and the deployed graphs) all open stores
here, so a new kind of store is added in this module and in ``backends/`` only.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from langchain_genmem.backends.base import MemoryBackend
from langchain_genmem.backends.chroma import DEFAULT_COLLECTION, ChromaBackend, persistent_client
from langchain_genmem.core.errors import StorageError, ValidationError

__all__ = ["CHROMA_FILE", "describe_store", "open_backend"]

CHROMA_FILE = "chroma.sqlite3"  # what an embedded Chroma folder holds once created


def open_backend(
    path: str | os.PathLike[str] | None = None,
    *,
    host: str | None = None,
    port: int = 8000,
    client: Any | None = None,
    dsn: str | None = None,
    backend: MemoryBackend | None = None,
    collection: str = DEFAULT_COLLECTION,
    create: bool = True,
    request_timeout: float | None = None,
) -> MemoryBackend:
    """The backend of a store.

    Args:
        path: an embedded Chroma folder (``PersistentClient``).
        host: a Chroma server's host (``HttpClient``); replaces ``path``.
        port: the Chroma server's port.
        client: any chromadb client; replaces ``path`` and ``host``.
        dsn: a PostgreSQL connection string (needs the ``postgres`` extra); not with a
            Chroma ``path``, ``host`` or ``client``.
        backend: a ready backend, returned as it is (the other arguments are ignored).
        collection: the Chroma collection (personas may share it).
        create: False refuses a Chroma folder or collection that does not exist yet
            instead of creating it (a reader must not leave an empty store behind).
        request_timeout: PostgreSQL: the most seconds a call waits for a connection (see
            :class:`~langchain_genmem.backends.postgres.PostgresBackend`); None: its default.

    Returns:
        The backend; the caller closes it.

    Raises:
        ValidationError: a PostgreSQL ``dsn`` with a Chroma place (``field`` ``"dsn"``), a
            ``path`` that is a file or cannot be created (``"path"``), or (``create=False``)
            a store that does not exist (``"store"``, or ``"collection"`` on a server).
        StorageError: the store cannot be opened or the server not reached.
    """
    if backend is not None:
        return backend
    if dsn is not None:
        if path is not None or host is not None or client is not None:
            msg = "dsn: give either a PostgreSQL dsn or a Chroma path, server or client, not both"
            raise ValidationError(msg, field="dsn")
        from langchain_genmem.backends.postgres import PostgresBackend  # lazy: optional extra

        return PostgresBackend(dsn, request_timeout=request_timeout)
    where = describe_store(path, host=host, port=port, client=client)
    name = collection
    served = host is not None or client is not None  # a server's or a caller's collections
    if client is None:
        if host is None and path is None:
            import chromadb  # lazy: start-up time (a second), only where a Chroma client is built

            client = chromadb.EphemeralClient()
            name = f"{collection}-{uuid.uuid4().hex[:12]}"  # a fresh store of its own
        else:
            folder = Path(path) if host is None and path is not None else None  # a server: none
            if not create and folder is not None and folder.is_dir() and not (
                folder / CHROMA_FILE
            ).is_file():
                msg = f"{where} does not exist"
                raise ValidationError(msg, field="store")
            if not create and folder is not None and not folder.exists():
                msg = f"{where} does not exist"
                raise ValidationError(msg, field="store")
            client = _chroma_client(path, host, port, where)
    if not create and served:
        names = {getattr(c, "name", c) for c in client.list_collections()}
        if collection not in names:
            msg = f"collection {collection!r} on {where} does not exist"
            raise ValidationError(msg, field="collection")
    return ChromaBackend(client, name)


def describe_store(
    path: str | os.PathLike[str] | None = None,
    *,
    host: str | None = None,
    port: int = 8000,
    client: Any | None = None,
    dsn: str | None = None,
) -> str:
    """The store in words, for messages (a DSN's password is left out).

    Args:
        path: an embedded Chroma folder.
        host: a Chroma server's host.
        port: its port.
        client: a chromadb client.
        dsn: a PostgreSQL connection string.

    Returns:
        E.g. ``"the store at .genmem"`` or ``"the Chroma server at localhost:8000"``.
    """
    if dsn:
        from langchain_genmem.backends.postgres import redacted  # lazy: optional extra

        return f"the PostgreSQL database {redacted(dsn)}"
    if host:
        return f"the Chroma server at {host}:{port}"
    if client is not None:
        return "the Chroma client's store"
    if path is not None:
        return f"the store at {path}"
    return "an in-memory store"


def _chroma_client(path: Any, host: str | None, port: int, where: str) -> Any:
    # Chroma's default settings on purpose: Chroma refuses a second client of one folder (or
    # of the in-process ephemeral system) with other settings, so ours must match the user's.
    if not host:
        return persistent_client(path)  # refuses a file; creates a missing folder
    import chromadb  # lazy: start-up time (a second), only where a Chroma client is built

    try:
        return chromadb.HttpClient(host=host, port=port)
    except Exception as e:  # noqa: BLE001 - chromadb raises many kinds
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        msg = f"cannot open {where} ({first}); start it (chroma run --port N)"
        raise StorageError(msg) from e
