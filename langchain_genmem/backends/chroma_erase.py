"""Erasing forgotten node records from the files of an embedded Chroma folder.

Chroma's ``delete`` removes a record from what Chroma reads, not every copy of it from the
folder. Checked against Chroma 1.5.9 (Rust core, ``PersistentClient``), a deleted record's
description and vector stay in the places below, and this module clears each:

- ``chroma.sqlite3``, table ``embeddings_queue`` (Chroma's write-ahead log): each add and
  update of the record is a row holding its metadata (the description, as JSON) and its
  vector (a float32 blob); the delete is one more row (operation 3). Chroma purges the rows
  only once its vector index has persisted them (every ``sync_threshold`` operations).
  :func:`erase` rewrites the forgotten records' rows, deletes excepted, to hold no metadata
  and a neutral vector (a unit vector): a replay after a crash adds, updates and deletes the
  record as before, with nothing of it.
- ``chroma.sqlite3``, free space: Chroma's own connections do not zero what they free, so the
  log rows it purged and the metadata rows it deleted or rewrote stay in free pages and free
  cells. :func:`erase` runs ``VACUUM`` (which rebuilds the file from its live rows) after the
  rewrite, on a connection with ``secure_delete`` on.
- ``chroma.sqlite3``, Chroma's full-text index of documents (records of format 1 hold the
  description as their document): a delete only adds a tombstone to it; :func:`erase`
  merges the index (FTS5 ``optimize``) before the vacuum.
- ``<vector segment>/data_level0.bin`` (hnswlib's level-0 file: per element its links, its
  vector, its 64-bit label): hnswlib only marks an element deleted, and the file is written
  from memory every ``sync_threshold`` operations. :func:`blank` updates each record to the
  neutral vector before it is deleted, so the index in memory (and each later write of the
  file) holds that; :func:`erase` overwrites the neutral vector into the slots the file
  already holds for the forgotten ids (their labels read from ``index_metadata.pickle``).
- The index files' unused room: Chroma's first write of an index (no element yet) is of
  room for 100 elements that were never set, so it holds whatever the process's memory
  held there (found: a state record's JSON). :func:`erase` zeroes what lies past the
  elements, in the files of the node records' index and of the state records' index.
- Earlier versions of the persona's state record (its log rows): a state lists keyword
  strengths, and an earlier one keywords that only forgotten memories had. :func:`erase`
  removes the metadata of the rows Chroma's metadata segment has applied (it replays only
  past that point, so they are never read again).

Fail safe: when the folder is not laid out as above (another Chroma version), a warning is
logged once per folder and the records are only deleted, as Chroma does; nothing of the
folder is changed. When SQLite fails (another process held the database past the timeout),
the error is raised: the forget's mark stays and the next write of the persona erases again.
A Chroma server's files are its own (its persist directory); nothing here applies to an
``HttpClient``.
"""

from __future__ import annotations

import io
import json
import logging
import os
import pickle
import sqlite3
import struct
import subprocess
import sys
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

logger = logging.getLogger(__name__)

CHECKED_WITH = "1.5.9"
DATABASE = "chroma.sqlite3"
DELETE_OPERATION = 3
QUEUE_COLUMNS = frozenset({"seq_id", "operation", "topic", "id", "vector", "encoding",
                           "metadata"})
FULL_TEXT = "embedding_fulltext_search"
INDEX_DATA = "data_level0.bin"
INDEX_IDS = "index_metadata.pickle"
INDEX_LEVELS = "length.bin"  # an int32 per element
HNSW_SEGMENT = "urn:chroma:segment/vector/hnsw-local-persisted"
METADATA_SEGMENT = "urn:chroma:segment/metadata/sqlite"
# hnswlib's header.bin as Chroma's index writes it (version 1): version, offsetLevel0,
# max_elements, cur_element_count, size_data_per_element, label_offset, offsetData,
# maxlevel, enterpoint_node, maxM, maxM0, M, mult, ef_construction.
HEADER = struct.Struct("<i6Qii3QdQ")
HEADER_VERSION = 1
_WARNED: set[str] = set()  # the folders warned about


class Earlier(NamedTuple):
    """The log rows of a state record that Chroma will not read again."""

    topic: str
    record_id: str
    applied: int


class _LayoutError(Exception):
    """The folder is not laid out as the Chroma version this module was checked with."""


@dataclass(frozen=True)
class Header:
    """What :func:`erase` needs of an hnswlib index's ``header.bin``."""

    count: int
    size: int
    label_offset: int
    data_offset: int


def neutral(dim: int) -> np.ndarray:
    """The vector a forgotten record is overwritten with: ``(1, 0, ..., 0)`` as float32."""
    vector = np.zeros(dim, dtype=np.float32)
    vector[0] = 1.0
    return vector


def blank(collection: Any, ids: Sequence[str], dim: int) -> None:
    """Overwrite the vectors of the records of ``ids`` that exist with :func:`neutral`.

    Call it right before deleting them: Chroma's vector index keeps a deleted element's
    vector, and writes it to its files, unless it was overwritten first.

    Args:
        collection: the Chroma collection.
        ids: the ids about to be deleted.
        dim: the collection's vector dimension.
    """
    existing = collection.get(ids=list(ids), include=[])["ids"]
    if existing:
        collection.update(ids=existing, embeddings=[neutral(dim)] * len(existing))


ERASER: tuple[str, ...] = (
    sys.executable, "-c", "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')",
    __file__)
"""The command of the child process that erases (:func:`main` reads its request on stdin).
It runs this file alone, importing nothing of the package, so the child starts quickly (and
with the working directory on ``sys.path`` as ``-m`` has, never this file's folder)."""
ERASE_TIMEOUT = 600.0  # seconds the child may take (a VACUUM of a large database)


def erase(
    folder: str | Path, collection: Any, ids: Sequence[str], dim: int,
    state: tuple[Any, str] | None = None,
) -> bool:
    """Remove every copy of the deleted records of ``ids`` from the folder's files.

    Call it after :func:`blank` and Chroma's delete of the same ids, with the folder's write
    held (no other process writes it). Repeating it is harmless. The files are changed by a
    child process (:data:`ERASER`, running :func:`erase_here`): this process's Chroma holds
    the database open through its own SQLite library, and a second SQLite library opening
    the same file in one process breaks the file locks both rely on (SQLite's documentation
    warns of it; a server process saw "disk I/O error").

    Args:
        folder: the embedded Chroma folder.
        collection: the collection the records were in.
        ids: the deleted ids.
        dim: the collection's vector dimension.
        state: the collection of state records and the id of the one the forget rewrote:
            the log rows of its earlier versions lose their metadata (an earlier state
            lists keywords that only forgotten memories had).

    Returns:
        Whether the copies were erased; False (with a warning logged once per folder) when
        the folder is not laid out as this module expects.

    Raises:
        sqlite3.Error: SQLite failed, or the child did (e.g. another process held the file
            too long); the records are deleted all the same, and a repeat erases them.
    """
    request = {"folder": str(folder), "collection": str(collection.id), "ids": list(ids),
               "dim": dim, "state": None if state is None else [str(state[0].id), state[1]]}
    try:
        done = subprocess.run(ERASER, input=json.dumps(request), capture_output=True,
                              text=True, timeout=ERASE_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        msg = f"the erasing process failed: {e}"
        raise sqlite3.OperationalError(msg) from e
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        msg = f"the erasing process failed: {said}"
        raise sqlite3.OperationalError(msg)
    problem = json.loads(done.stdout)["layout_problem"]
    if problem is not None:
        _warn_once(Path(folder), problem)
        return False
    return True


def erase_here(folder: str | Path, collection_id: str, ids: Sequence[str], dim: int,
               state: tuple[str, str] | None = None) -> str | None:
    """Erase as :func:`erase` says, in this process (which must not hold Chroma open).

    Args:
        folder: the embedded Chroma folder.
        collection_id: the id of the collection the records were in.
        ids: the deleted ids.
        dim: the collection's vector dimension.
        state: the id of the state records' collection and of the state record.

    Returns:
        None once erased; what is not as expected when the folder is laid out otherwise
        (nothing was changed then).

    Raises:
        sqlite3.Error: SQLite failed.
    """
    folder = Path(folder)
    vector = neutral(dim).tobytes()
    try:
        with _connection(folder / DATABASE) as db:
            _check_log(db)
            index = folder / _segment(db, collection_id, HNSW_SEGMENT)
            slots = _index_slots(index, ids, len(vector))  # checked before anything changes
            tails = _tails(index)
            earlier = None
            if state is not None:
                earlier = _earlier_states(db, state[0], state[1])
                tails += _tails(folder / _segment(db, state[0], HNSW_SEGMENT))
            _rewrite_log(db, collection_id, ids, vector, earlier)
            _merge_text_index(db)
            db.execute("VACUUM")
        _overwrite(index / INDEX_DATA, slots, vector)
        _zero_tails(tails)
    except _LayoutError as e:
        return str(e)
    return None


def main() -> None:
    """The erasing child: a JSON request on stdin, ``{"layout_problem": ...}`` on stdout."""
    request = json.loads(sys.stdin.read())
    state = request["state"]
    try:
        problem = erase_here(request["folder"], request["collection"], request["ids"],
                             request["dim"], None if state is None else (state[0], state[1]))
    except sqlite3.Error as e:
        print(f"SQLite: {e}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"layout_problem": problem}))


def _connection(path: Path) -> closing[sqlite3.Connection]:
    """A connection of our own to Chroma's database, zeroing what it frees."""
    if not path.is_file():
        msg = f"no {DATABASE} in the folder"
        raise _LayoutError(msg)
    db = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    db.execute("PRAGMA secure_delete = ON")
    return closing(db)


def _check_log(db: sqlite3.Connection) -> None:
    """Check that Chroma's log table has the columns this module rewrites.

    Raises:
        _LayoutError: it has not.
    """
    columns = {row[1] for row in db.execute("PRAGMA table_info(embeddings_queue)")}
    if not QUEUE_COLUMNS <= columns:
        msg = f"table embeddings_queue lacks {sorted(QUEUE_COLUMNS - columns)}"
        raise _LayoutError(msg)


def _segment(db: sqlite3.Connection, collection_id: str, kind: str) -> str:
    """The id of the collection's one segment of type ``kind``.

    Raises:
        _LayoutError: the table of segments is not as expected, or holds no such one.
    """
    try:
        rows = db.execute("SELECT id FROM segments WHERE collection = ? AND type = ?",
                          (collection_id, kind)).fetchall()
    except sqlite3.OperationalError as e:
        msg = f"table segments is not as expected ({e})"
        raise _LayoutError(msg) from e
    if len(rows) != 1:
        msg = f"{len(rows)} segments of type {kind} for the collection"
        raise _LayoutError(msg)
    return str(rows[0][0])


def _earlier_states(db: sqlite3.Connection, collection_id: str, state_id: str) -> Earlier:
    """The state record's log rows that Chroma's metadata segment has applied.

    Chroma replays its log into that segment only past the position it stored, so the
    metadata of these rows is never read again.

    Raises:
        _LayoutError: the segment or its position is not as expected.
    """
    segment = _segment(db, collection_id, METADATA_SEGMENT)
    try:
        row = db.execute("SELECT seq_id FROM max_seq_id WHERE segment_id = ?",
                         (segment,)).fetchone()
    except sqlite3.OperationalError as e:
        msg = f"table max_seq_id is not as expected ({e})"
        raise _LayoutError(msg) from e
    if row is None or not isinstance(row[0], int):
        msg = "the metadata segment of the state records has no position in max_seq_id"
        raise _LayoutError(msg)
    return Earlier(f"%/{collection_id}", state_id, row[0])


def _rewrite_log(db: sqlite3.Connection, collection_id: str, ids: Sequence[str],
                 vector: bytes, earlier: Earlier | None) -> None:
    """Rewrite the log rows of ``ids`` but their deletes: no metadata, the neutral vector.

    The state record's ``earlier`` rows lose their metadata in the same transaction.

    Raises:
        _LayoutError: a row's vector is not a float32 blob of the collection's dimension.
    """
    db.execute("CREATE TEMP TABLE IF NOT EXISTS forgotten (id TEXT PRIMARY KEY)")
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("DELETE FROM temp.forgotten")
        db.executemany("INSERT OR IGNORE INTO temp.forgotten VALUES (?)", ((i,) for i in ids))
        match = ("topic LIKE ? AND operation <> ? "
                 "AND id IN (SELECT id FROM temp.forgotten)")
        where = (f"%/{collection_id}", DELETE_OPERATION)
        odd = db.execute(f"SELECT count(*) FROM embeddings_queue WHERE {match} "  # noqa: S608
                         "AND vector IS NOT NULL "
                         "AND (encoding <> 'FLOAT32' OR length(vector) <> ?)",
                         (*where, len(vector))).fetchone()[0]
        if odd:
            msg = f"{odd} log rows hold vectors of another encoding or size"
            raise _LayoutError(msg)
        db.execute("UPDATE embeddings_queue SET metadata = NULL, "  # noqa: S608
                   f"vector = CASE WHEN vector IS NULL THEN NULL ELSE ? END WHERE {match}",
                   (vector, *where))
        if earlier is not None:
            db.execute("UPDATE embeddings_queue SET metadata = NULL WHERE topic LIKE ? "
                       "AND id = ? AND seq_id <= ? AND metadata IS NOT NULL", earlier)
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _merge_text_index(db: sqlite3.Connection) -> None:
    """Merge Chroma's full-text index, dropping what it kept of deleted documents.

    Records of format 1 (see :mod:`~langchain_genmem.backends.chroma`) hold the description
    as their document, which Chroma indexes; a delete only adds a tombstone to the index.
    """
    if db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (FULL_TEXT,)).fetchone():
        db.execute(f"INSERT INTO {FULL_TEXT}({FULL_TEXT}) VALUES ('optimize')")  # noqa: S608


def _index_slots(segment: Path, ids: Sequence[str], vector_bytes: int) -> list[int]:
    """The offsets of the vectors the index files hold for ``ids`` (none written: none).

    Raises:
        _LayoutError: the index files are not as expected.
    """
    if not (segment / INDEX_IDS).is_file():
        return []  # the index was never written to the folder: no slot holds anything
    labels = _labels(segment / INDEX_IDS, ids)
    if not labels:
        return []
    header = _header(segment / "header.bin", vector_bytes)
    raw = np.fromfile(segment / INDEX_DATA, dtype=np.uint8)
    if raw.size != header.count * header.size:
        msg = f"{INDEX_DATA} holds {raw.size} bytes, not {header.count} elements"
        raise _LayoutError(msg)
    rows = raw.reshape(header.count, header.size)
    stored = rows[:, header.label_offset : header.label_offset + 8].copy().view("<u8")[:, 0]
    slots = np.flatnonzero(np.isin(stored, np.fromiter(labels, dtype=np.uint64)))
    return [int(slot) * header.size + header.data_offset for slot in slots]


def _overwrite(path: Path, offsets: Sequence[int], vector: bytes) -> None:
    """Write ``vector`` at each offset of the file, in place (Chroma may rewrite it)."""
    if offsets:
        with path.open("r+b") as f:
            for offset in offsets:
                f.seek(offset)
                f.write(vector)


def _labels(path: Path, ids: Sequence[str]) -> set[int]:
    """The index labels of ``ids``, from the id map Chroma writes beside the index."""
    try:
        meta = _DataOnly(io.BytesIO(path.read_bytes())).load()
        mapping = meta["id_to_label"]
    except (pickle.UnpicklingError, KeyError, TypeError, EOFError) as e:
        msg = f"{INDEX_IDS} is not as expected ({e})"
        raise _LayoutError(msg) from e
    return {int(mapping[i]) for i in ids if i in mapping}


def _header(path: Path, vector_bytes: int | None) -> Header:
    """The element layout of ``data_level0.bin``, checked against the vector size if given.

    Raises:
        _LayoutError: the header is of another version or does not fit the vectors.
    """
    raw = path.read_bytes() if path.is_file() else b""
    if len(raw) != HEADER.size:
        msg = f"header.bin holds {len(raw)} bytes, not {HEADER.size}"
        raise _LayoutError(msg)
    version, _, _, count, size, label_offset, data_offset, *_ = HEADER.unpack(raw)
    fits = vector_bytes is None or label_offset - data_offset == vector_bytes
    if version != HEADER_VERSION or not fits or label_offset + 8 > size:
        msg = f"header.bin is not a version {HEADER_VERSION} index of these vectors"
        raise _LayoutError(msg)
    return Header(count, size, label_offset, data_offset)


def _tails(segment: Path) -> list[tuple[Path, int]]:
    """Each index file with unused room, and where its elements end.

    Chroma's first write of an index (before it holds any element) is of room for 100
    elements that were never set: whatever the process's memory held there, memories
    written or forgotten in this process among it.

    Raises:
        _LayoutError: the index header is not as expected.
    """
    if not (segment / "header.bin").is_file():
        return []
    header = _header(segment / "header.bin", None)
    ends = ((INDEX_DATA, header.count * header.size), (INDEX_LEVELS, header.count * 4))
    return [(segment / name, end) for name, end in ends if (segment / name).is_file()]


def _zero_tails(tails: Sequence[tuple[Path, int]]) -> None:
    """Zero each file from where its elements end (a file written anew since: its end)."""
    for path, end in tails:
        with path.open("r+b") as f:
            size = os.fstat(f.fileno()).st_size
            if size > end:
                f.seek(end)
                f.write(bytes(size - end))


class _DataOnly(pickle.Unpickler):
    """Unpickles plain data only (dicts, lists, strings, numbers): no class is loaded."""

    def find_class(self, module: str, name: str) -> Any:
        msg = f"{module}.{name} is not plain data"
        raise pickle.UnpicklingError(msg)


def _warn_once(folder: Path, reason: str) -> None:
    if str(folder) not in _WARNED:
        _WARNED.add(str(folder))
        logger.warning(
            "forgotten records were deleted from the Chroma folder %s but copies of them "
            "may stay in its files: the folder is not laid out as Chroma %s laid it out "
            "(%s)", folder, CHECKED_WITH, reason)


if __name__ == "__main__":
    main()
