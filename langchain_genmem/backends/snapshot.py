"""A snapshot of a persona's committed nodes beside an embedded Chroma folder, for fast opens.

Opening a stream reads every node with its vector through Chroma's Python lists (a 100k
stream: several times a bare paged ``get``). A snapshot keeps the same records (the float32
vectors as one array, each node's stored metadata and document as JSON) in one file under
``<folder>/genmem-snapshots/``, written when a stream opens fully or closes.

It is never a second source of truth: it is used only when it matches the store exactly,
and otherwise ignored and written again. A match means the same collection and persona, the
same committed revision and node count, the same state record (by hash), the same
access-time stamp (a random token the backend stores on every access-time write), and an
intact file (CRC-32 of its contents). Anything else, a stale, foreign or corrupt file, is
reported in the log and the stream opens from Chroma as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import tempfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

FOLDER = "genmem-snapshots"
VERSION = 1


@dataclass(frozen=True)
class Key:
    """What a snapshot must match to be used.

    Attributes:
        collection: the node collection's name.
        persona: the persona.
        rev: the committed revision.
        node_count: the committed node count.
        state_hash: SHA-256 of the committed state's JSON.
        access_stamp: the token of the last access-time write ("" if none yet).
    """

    collection: str
    persona: str
    rev: int
    node_count: int
    state_hash: str
    access_stamp: str

    def as_dict(self) -> dict[str, Any]:
        """The key as JSON-ready values."""
        return {"version": VERSION, **self.__dict__}


def state_hash(document: str) -> str:
    """SHA-256 of a state record's JSON document.

    Args:
        document: the JSON text.

    Returns:
        The hex digest.
    """
    return hashlib.sha256(document.encode("utf-8", "surrogatepass")).hexdigest()


def path_of(folder: str, collection: str, persona: str) -> Path:
    """Where a persona's snapshot lives inside an embedded Chroma folder.

    Args:
        folder: the Chroma folder.
        collection: the node collection.
        persona: the persona.

    Returns:
        The file path (a hash of collection and persona, so any name is a safe file name).
    """
    digest = hashlib.sha256(f"{collection}\0{persona}".encode("utf-8", "surrogatepass"))
    return Path(folder) / FOLDER / f"{digest.hexdigest()[:32]}.npz"


def write(path: Path, key: Key, vectors: np.ndarray, records: Sequence[Mapping[str, Any]]) -> None:
    """Write a snapshot atomically (a temporary file renamed over the old one).

    Args:
        path: from :func:`path_of`.
        key: what it was taken at.
        vectors: (node_count, dim) float32, row i = node_{i+1}.
        records: per node ``{"meta": stored metadata, "doc": document}``.
    """
    body = json.dumps(list(records), ensure_ascii=False).encode("utf-8", "surrogatepass")
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    crc = zlib.crc32(body, zlib.crc32(vectors.tobytes()))
    header = json.dumps({**key.as_dict(), "crc": crc, "shape": list(vectors.shape)})
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, header=np.frombuffer(header.encode(), dtype=np.uint8),
                     vectors=vectors, records=np.frombuffer(body, dtype=np.uint8))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read(path: Path, key: Key) -> tuple[np.ndarray, list[dict[str, Any]]] | None:
    """The snapshot's vectors and records if it matches ``key`` and is intact, else None.

    Args:
        path: from :func:`path_of`.
        key: the store's committed key now.

    Returns:
        ``(vectors, records)`` or None (missing, stale, foreign or corrupt; logged).
    """
    if not path.exists():
        return None
    try:
        with np.load(io.BytesIO(path.read_bytes()), allow_pickle=False) as z:
            header = json.loads(z["header"].tobytes())
            if {k: header.get(k) for k in key.as_dict()} != key.as_dict():
                logger.info("snapshot %s is stale for %r: rebuilding it", path.name, key.persona)
                return None
            vectors, body = z["vectors"], z["records"].tobytes()
        if zlib.crc32(body, zlib.crc32(vectors.tobytes())) != header["crc"]:
            raise ValueError("checksum mismatch")
        if list(vectors.shape) != header["shape"] or vectors.shape[0] != key.node_count:
            raise ValueError("shape mismatch")
        records = json.loads(body.decode("utf-8", "surrogatepass"))
        if len(records) != key.node_count:
            raise ValueError("record count mismatch")
    except Exception as e:  # noqa: BLE001 - a bad snapshot is never fatal: Chroma has it all
        logger.warning("snapshot %s of %r is unreadable (%s): rebuilding it", path.name,
                       key.persona, e)
        return None
    return vectors.astype(np.float32, copy=False), records
