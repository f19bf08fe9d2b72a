"""A snapshot of a persona's committed nodes beside an embedded Chroma folder, for fast opens.

Opening a stream from Chroma reads every node with its vector through Chroma's Python lists
and builds a node object for each (a 100k stream: several times a bare paged ``get``). A
snapshot keeps what the stream's in-process cache holds instead: its numpy columns (the
float32 vectors, their norms and int8 codes, times, poignancies, type codes, ...) as raw
arrays, the nodes' texts as one JSON document, and the keyword index, in one file under
``<folder>/genmem-snapshots/``, written when a stream opens fully or closes. Opening reads
the columns straight into the cache's arrays, and node objects are made only when asked for
(:class:`~langchain_genmem.memory.cache.LazyNodes`).

It is never a second source of truth: it is used only when it matches the store exactly,
and otherwise ignored and written again. A match means the same collection and persona, the
same committed revision and node count, the same state record (by hash), the same
access-time stamp (a random token the backend stores on every access-time write), and an
intact file (CRC-32 of its header and of its body, and the exact size they give). Anything
else, a stale, foreign, truncated or corrupt file, is reported in the log and the stream
opens from Chroma as before.

File layout: a fixed prefix (magic, format version, header CRC, header offset and length),
the arrays one after another (each at a 64-byte boundary), then the JSON header (the key,
each array's name, dtype, shape and offset, the body's CRC). The header is last so a
snapshot is written in one pass; it is read first, so a stale snapshot costs one small read.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import struct
import tempfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

logger = logging.getLogger(__name__)

FOLDER = "genmem-snapshots"
# The row array naming each row's node number; needed once nodes were forgotten (rows skip
# their numbers), absent before (row i is node_{i+1}).
NUMBERS = "node_number"
VERSION = 2
MAGIC = b"GENMEMSS"
SUFFIX = ".snap"
_LEGACY_SUFFIX = ".npz"  # version 1 (JSON records); removed when a version 2 is written
_PREFIX = struct.Struct("<8sIIQQ")  # magic, version, header CRC-32, header offset, length
_ALIGN = 64
_CHUNK = 1 << 24  # bytes read or checksummed at once


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


@dataclass
class Content:
    """What a snapshot holds.

    Attributes:
        rows: arrays with one entry (or row) per existing node, ``node_{i+1}`` at ``i``
            until nodes are forgotten (then :data:`NUMBERS` names each row's node). Read
            back with room for ``spare`` more rows (see :func:`read`), the first ``rows``
            filled.
        arrays: other arrays, read back as written.
        meta: JSON-ready values.
    """

    rows: dict[str, np.ndarray] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


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
    return Path(folder) / FOLDER / f"{digest.hexdigest()[:32]}{SUFFIX}"


def write(path: Path, key: Key, content: Content, rows: int | None = None) -> None:
    """Write a snapshot atomically (a temporary file renamed over the old one).

    Args:
        path: from :func:`path_of`.
        key: what it was taken at.
        content: the arrays and values; every row array must have ``rows`` rows.
        rows: how many nodes exist (None: ``key.node_count``, nothing forgotten).

    Raises:
        ValueError: a row array of another length.
        OSError: the file could not be written (nothing is replaced then).
    """
    n = key.node_count if rows is None else rows
    for name, column in content.rows.items():
        if column.shape[0] != n:
            msg = f"snapshot column {name}: {column.shape[0]} rows for {n} nodes"
            raise ValueError(msg)
    meta = np.frombuffer(
        json.dumps(content.meta, ensure_ascii=False).encode("utf-8", "surrogatepass"), np.uint8
    )
    parts = [(n, a, True) for n, a in content.rows.items()]
    parts += [(n, a, False) for n, a in {**content.arrays, "meta": meta}.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(bytes(_PREFIX.size))  # filled in once the header's place is known
            entries, crc = _write_body(f, parts)
            header = json.dumps({**key.as_dict(), "arrays": entries, "crc": crc}).encode()
            offset = f.tell()
            f.write(header)
            f.seek(0)
            f.write(_PREFIX.pack(MAGIC, VERSION, zlib.crc32(header), offset, len(header)))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        path.with_suffix(_LEGACY_SUFFIX).unlink(missing_ok=True)


def _write_body(f: IO[bytes], parts: list[tuple[str, np.ndarray, bool]]) -> tuple[list, int]:
    """Write each array at a 64-byte boundary; return their entries and the body's CRC."""
    entries, crc = [], 0
    for name, array, rows in parts:
        array = np.ascontiguousarray(array)
        offset = f.tell()
        entries.append({"name": name, "dtype": array.dtype.str, "shape": list(array.shape),
                        "offset": offset, "rows": rows})
        data = _bytes_of(array)
        f.write(data)
        crc = zlib.crc32(data, crc)
        pad = bytes(-f.tell() % _ALIGN)
        f.write(pad)
        crc = zlib.crc32(pad, crc)
    return entries, crc


def read(path: Path, key: Key, spare: int = 0, rows: int | None = None) -> Content | None:
    """The snapshot's content if it matches ``key`` and is intact, else None.

    Args:
        path: from :func:`path_of`.
        key: the store's committed key now.
        spare: room for this many more rows in each row array (grown into by later adds
            without copying; untouched room costs no resident memory).
        rows: how many nodes exist (None: ``key.node_count``, nothing forgotten).

    Returns:
        The content, or None (missing, stale, foreign or corrupt; logged).
    """
    try:
        f = path.open("rb")
    except FileNotFoundError:
        return None
    except OSError as e:
        logger.warning("snapshot %s of %r is unreadable (%s): rebuilding it", path.name,
                       key.persona, e)
        return None
    with f:
        try:
            header = _header(f)
            if {k: header.get(k) for k in key.as_dict()} != key.as_dict():
                logger.info("snapshot %s is stale for %r: rebuilding it", path.name, key.persona)
                return None
            return _body(f, header, key.node_count if rows is None else rows, spare)
        except Exception as e:  # noqa: BLE001 - a bad snapshot is never fatal: Chroma has it all
            logger.warning("snapshot %s of %r is unreadable (%s): rebuilding it", path.name,
                           key.persona, e)
            return None


def remove(path: Path) -> None:
    """Delete a snapshot file (and a version 1 one beside it), if there is one.

    Args:
        path: from :func:`path_of`.

    Raises:
        OSError: a file is there and could not be deleted.
    """
    path.unlink(missing_ok=True)
    path.with_suffix(_LEGACY_SUFFIX).unlink(missing_ok=True)


def matches(path: Path, key: Key) -> bool:
    """Whether the snapshot at ``path`` was taken at ``key`` (its header only is read).

    Args:
        path: from :func:`path_of`.
        key: a key.

    Returns:
        True when the file's header is intact and names this key.
    """
    try:
        with path.open("rb") as f:
            header = _header(f)
    except Exception:  # noqa: BLE001 - any unreadable file does not match
        return False
    return {k: header.get(k) for k in key.as_dict()} == key.as_dict()


def _header(f: IO[bytes]) -> dict[str, Any]:
    prefix = f.read(_PREFIX.size)
    if len(prefix) != _PREFIX.size:
        raise ValueError("shorter than its prefix")
    magic, version, header_crc, offset, length = _PREFIX.unpack(prefix)
    if magic != MAGIC:
        raise ValueError("not a genmem snapshot")
    if version != VERSION:
        return {"version": version}  # another format: stale, never read further
    if os.fstat(f.fileno()).st_size != offset + length:
        raise ValueError("size mismatch (truncated or extended)")
    f.seek(offset)
    raw = f.read(length)
    if zlib.crc32(raw) != header_crc:
        raise ValueError("header checksum mismatch")
    header = json.loads(raw)
    header["body_end"] = offset
    return header


def _body(f: io.BufferedIOBase, header: Mapping[str, Any], n: int, spare: int) -> Content:
    content = Content()
    crc, at = 0, _PREFIX.size
    for entry in header["arrays"]:
        shape = tuple(int(x) for x in entry["shape"])
        if int(entry["offset"]) != at:
            raise ValueError(f"array {entry['name']} misplaced")
        if entry["rows"] and shape[0] != n:
            raise ValueError(f"array {entry['name']} has {shape[0]} rows for {n} nodes")
        room = (shape[0] + spare, *shape[1:]) if entry["rows"] else shape
        array = np.empty(room, dtype=np.dtype(entry["dtype"]))
        filled = array[: shape[0]]
        f.seek(at)
        crc = _read_into(f, _bytes_of(filled), crc)
        at += filled.nbytes
        pad = f.read(-at % _ALIGN)
        crc = zlib.crc32(pad, crc)
        at += len(pad)
        if entry["name"] == "meta":
            content.meta = json.loads(array.tobytes().decode("utf-8", "surrogatepass"))
        elif entry["rows"]:
            content.rows[entry["name"]] = array
        else:
            content.arrays[entry["name"]] = array
    if at != header["body_end"]:
        raise ValueError("body size mismatch")
    if crc != header["crc"]:
        raise ValueError("checksum mismatch")
    return content


def _read_into(f: io.BufferedIOBase, target: memoryview, crc: int) -> int:
    """Fill ``target`` from ``f`` in chunks, returning the CRC-32 continued over it."""
    done = 0
    while done < len(target):
        part = target[done : done + _CHUNK]
        got = f.readinto(part)
        if not got:
            raise ValueError("truncated")
        crc = zlib.crc32(part[:got], crc)
        done += got
    return crc


def _bytes_of(array: np.ndarray) -> memoryview:
    """A flat byte view of a C-contiguous array (empty arrays give an empty view)."""
    if array.size == 0:
        return memoryview(b"")
    return array.reshape(-1).view(np.uint8).data  # ndarray.data: memoryview(array), typed


def index_to_json(index: Mapping[str, Mapping[str, list[str]]]) -> dict[str, dict[str, list]]:
    """A keyword index (``{type: {keyword: [node ids, oldest first]}}``) with node numbers.

    Args:
        index: the index.

    Returns:
        The same index, each ``node_N`` as N.
    """
    return {t: {kw: [int(i[5:]) for i in ids] for kw, ids in by_kw.items()}
            for t, by_kw in index.items()}


def index_from_json(data: Mapping[str, Mapping[str, list[int]]]) -> dict[str, dict[str, list]]:
    """The keyword index :func:`index_to_json` gave.

    Args:
        data: ``{type: {keyword: [node numbers]}}``.

    Returns:
        ``{type: {keyword: [node ids]}}``.
    """
    return {t: {kw: [f"node_{i}" for i in nums] for kw, nums in by_kw.items()}
            for t, by_kw in data.items()}
