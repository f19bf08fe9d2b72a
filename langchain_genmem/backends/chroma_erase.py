"""Erasing forgotten node records from the files of an embedded Chroma folder.

Chroma's ``delete`` removes a record from what Chroma reads, not every copy of it from the
folder: Chroma's own SQLite connections free what they delete or rewrite without zeroing it,
and its vector index only marks a deleted element. Checked against Chroma 1.5.9 (Rust core,
``PersistentClient``), a forget erases, in work that grows with what is forgotten and not
with the folder:

- **Before Chroma's delete** (:func:`prepare`, after the forget's commit point): the
  forgotten records' own rows are overwritten on a connection with ``secure_delete`` on
  (SQLite then zeroes the old bytes, in the table and in its indexes): every metadata value
  but ``persona`` and ``node_count`` is deleted (the packed fields, a single-memory commit,
  a format-1 record's fields and document, and its full-text row); their rows in Chroma's
  write-ahead log (table ``embeddings_queue``) are rewritten, deletes excepted, to hold no
  metadata and a neutral vector (a unit vector: a replay after a crash adds, updates and
  deletes the record as before, with nothing of it); the log rows of re-keyed records and of
  the earlier versions of the persona's state record (a state lists keyword strengths, an
  earlier one keywords that only forgotten memories had) that Chroma's metadata segment has
  applied lose their metadata (it replays only past that point, so they are never read
  again). Each row is checked to be the record's before any changes: a log row by its
  topic (the collection's) and its ``id`` column (the record's id), with one of Chroma's
  operations (add, update, upsert, delete; a delete carries no vector); a full-text row by
  holding the record's document. Before changing anything it notes (in
  ``genmem-erase/pending.json`` beside the store: page numbers only) the pages that hold
  the records' metadata rows and their entries in Chroma's index of texts, and the pages
  right before and after them: a page split leaves copies of the cells it moved in the free
  space of the page they left. Then :func:`blank` updates each record to the neutral vector
  (Chroma's vector index keeps a deleted element's vector in memory and writes it to its
  files whenever the element's links change) and Chroma deletes them: the cells Chroma
  frees then hold nothing of them.
- **After Chroma's delete** (:func:`finish`): what Chroma's connections freed earlier
  without zeroing is zeroed in place, page by page, while the erasing connection holds
  SQLite's EXCLUSIVE lock (:mod:`~langchain_genmem.backends.sqlite_pages`): every freelist
  page (leaves whole, trunks past their list: log rows purged once Chroma's index persisted
  them, older versions of overflowing rows), and the unused bytes of every page of the log
  table, of Chroma's full-text index (merged first when small: it holds the state records'
  documents), of the pages :func:`prepare` noted, and of the pages that hold (or sit next
  to) the state record's rows, the index entries of the states' documents (key
  ``chroma:document``) and the re-keyed records' packed fields, and the unused tails of the
  overflow chains of the log's, the full-text index's and the state's rows. The same
  transaction rewrites ``PRAGMA user_version`` to its value, so the file change counter
  moves and Chroma's connections drop the pages they cached. Then the forgotten records'
  slots in the vector index file (``data_level0.bin``) get the neutral vector: each slot is
  found by its label (from ``index_metadata.pickle``) in a map of the labels the file holds
  per slot, kept by the erasing process and in ``genmem-erase/`` beside the store (only the
  slots added since are read), and its label is read back before it is written: it must be
  the one the pickle gives the record, and the pickle's map back must name the record. The
  index files' unused room past their elements (Chroma's first write of an index is of
  room for 100 elements never set, holding whatever the process's memory held) is zeroed.

Before an index file is written (and before :func:`prepare` changes anything), the index's
files are checked to mean what the erasure takes them to mean, not only to have its shape:
``header.bin``'s element count must be the pickle's count of elements added, the slots
before it must hold the labels given (1 to that count), each once, and every record the
pickle lists must be in one of them; so what lies past the count holds no element.

What a forget leaves (:func:`compact` clears it, see ``docs/storage.md``): bytes that
Chroma's own writes left in live pages farther away (a page split more than one page away
from where a record is now; a freed page reused in the same transaction, or a freelist trunk
page reused, keeps its old bytes past what its new content covers; fragments of at most 3
bytes between cells; the unused tails of other rows' overflow chains), and, in a store of
format-1 records (a full-text index too large to merge on every forget), the terms its index
kept of the state's earlier documents. :func:`compact` rebuilds the database
(``VACUUM`` with ``secure_delete`` on, after merging the full-text index): its cost grows
with the folder.

The erasing runs in a process of its own (:class:`Eraser`, running this file alone): this
process's Chroma holds the database open through its own SQLite library, and a second SQLite
library opening the same file in one process breaks the file locks both rely on (SQLite's
documentation warns of it; a server process saw "disk I/O error"). It is started at the
first forget of a backend, serves its requests one JSON line at a time, opens a connection
of its own for each (closed after, so it holds no lock between them), and ends when the
backend closes, when this process ends, or when it is killed (the next request starts
another).

Fail safe: with a Chroma version the erasure was not tested with (:data:`TESTED_CHROMA`,
checked before the erasing process opens anything), or a folder not laid out as above or
whose files disagree on what they hold, a warning is logged once per folder and the records
are only deleted, as Chroma does; nothing else of the folder is changed (once a check
failed, nothing more is written to that folder until the process ends), and the forget's
report says so
(:attr:`~langchain_genmem.memory.forgetting.ForgetReport.erased` False, with the reason).
When SQLite fails (another process held the database past the timeout), or the erasing
process does, the error is raised: the forget's mark stays and the next write of the
persona finishes it. A Chroma server's files are its own (its persist
directory); nothing here applies to an ``HttpClient``.
"""

from __future__ import annotations

import io
import json
import logging
import mmap
import os
import pickle
import queue
import sqlite3
import struct
import subprocess
import sys
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NamedTuple

import numpy as np

if __package__:
    from langchain_genmem.backends import sqlite_pages
else:  # run as a file by the erasing process: its sibling module, by path (no package)
    import importlib.util

    _spec = importlib.util.spec_from_file_location(
        "genmem_sqlite_pages", Path(__file__).with_name("sqlite_pages.py"))
    assert _spec is not None and _spec.loader is not None
    sqlite_pages = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = sqlite_pages
    _spec.loader.exec_module(sqlite_pages)

logger = logging.getLogger(__name__)

CHECKED_WITH = "1.5.9"
DATABASE = "chroma.sqlite3"
DELETE_OPERATION = 3
OPERATIONS = (0, 1, 2, DELETE_OPERATION)  # Chroma's log: add, update, upsert, delete
QUEUE_COLUMNS = frozenset({"seq_id", "operation", "topic", "id", "vector", "encoding",
                           "metadata"})
QUEUE = "embeddings_queue"
# the log rows of the forgotten records that hold them (deletes do not): topic, operation
FORGOTTEN_ROWS = "topic LIKE ? AND operation <> ? AND id IN (SELECT id FROM temp.forgotten)"
# the forgotten records' row ids in table embeddings, of a metadata segment
FORGOTTEN_RECORDS = ("SELECT id FROM embeddings WHERE segment_id = ? "
                     "AND embedding_id IN (SELECT id FROM temp.forgotten)")
METADATA = "embedding_metadata"
DOCUMENT_INDEX = "embedding_metadata_string_value"
DOCUMENT_KEY = "chroma:document"
PACKED_KEY = "node"  # a format-2 record's packed fields (as the backend writes them)
KEPT_KEYS = ("persona", "node_count")  # what a forgotten record keeps until Chroma deletes it
FULL_TEXT = "embedding_fulltext_search"
FULL_TEXT_TABLES = tuple(f"{FULL_TEXT}_{part}"
                         for part in ("data", "idx", "content", "docsize", "config"))
FULL_TEXT_PAGES = 512  # a full-text index of more pages is neither merged nor swept per forget
INDEX_RUN_PAGES = 256  # an index run of one key over more pages is not swept per forget
KEY_PREFIX = 64  # bytes of a text that place its entry in the document index
PENDING = "pending.json"  # in SLOT_MAPS: pages prepare found near the records, for finish
JOURNALS = frozenset({"delete", "truncate", "persist"})  # no WAL: pages live in the file
INDEX_DATA = "data_level0.bin"
INDEX_IDS = "index_metadata.pickle"
INDEX_LEVELS = "length.bin"  # an int32 per element
HNSW_SEGMENT = "urn:chroma:segment/vector/hnsw-local-persisted"
METADATA_SEGMENT = "urn:chroma:segment/metadata/sqlite"
SLOT_MAPS = "genmem-erase"  # beside the store: per index, the label each slot of its file holds
# hnswlib's header.bin as Chroma's index writes it (version 1): version, offsetLevel0,
# max_elements, cur_element_count, size_data_per_element, label_offset, offsetData,
# maxlevel, enterpoint_node, maxM, maxM0, M, mult, ef_construction.
HEADER = struct.Struct("<i6Qii3QdQ")
HEADER_VERSION = 1
_WARNED: set[str] = set()  # the folders warned about
_REFUSED: dict[str, str] = {}  # the folders found not laid out as expected, and why
_VIEWS: dict[int, list[mmap.mmap]] = {}  # per open descriptor: the memory maps made of it

ERASER: tuple[str, ...] = (
    sys.executable, "-c", "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')",
    __file__)
"""The command of the erasing process (:func:`main` serves requests on stdin). It runs this
file alone, importing nothing of the package, so it starts quickly (and with the working
directory on ``sys.path`` as ``-m`` has, never this file's folder)."""
REQUEST_TIMEOUT = 120.0  # seconds one step of a forget may take in the erasing process
ERASE_TIMEOUT = 3600.0  # seconds a compaction may take (a VACUUM of a large database)
SQLITE_WAIT = 30.0  # seconds the erasing connection waits for another one's lock


class Earlier(NamedTuple):
    """The log rows of a state record that Chroma will not read again."""

    topic: str
    record_id: str
    applied: int


class _LayoutError(Exception):
    """The folder is not laid out as the Chroma version this module was checked with."""


@dataclass(frozen=True)
class Header:
    """What the erasure needs of an hnswlib index's ``header.bin``."""

    count: int
    size: int
    label_offset: int
    data_offset: int


@dataclass(frozen=True)
class IndexIds:
    """What an index's ``index_metadata.pickle`` says of its elements."""

    labels: dict[str, int]  # each record the index holds: its element's label
    added: int  # the elements ever added (deleted ones too): the slots they take


NO_IDS = IndexIds({}, 0)  # an index written before it held any element has no pickle


@dataclass(frozen=True)
class Elements:
    """An index's elements, its files found to agree (:func:`_checked_index`)."""

    header: Header
    slots: np.ndarray  # the label each element's slot holds, slot by slot
    ids: IndexIds


@dataclass(frozen=True)
class Slots:
    """Slots of an index file found to hold the labels of records to overwrite."""

    header: Header
    slots: list[int]
    labels: list[int]


def neutral(dim: int) -> np.ndarray:
    """The vector a forgotten record is overwritten with: ``(1, 0, ..., 0)`` as float32."""
    vector = np.zeros(dim, dtype=np.float32)
    vector[0] = 1.0
    return vector


def blank(collection: Any, ids: Sequence[str], dim: int, *, existing: bool = False) -> None:
    """Overwrite the vectors of the records of ``ids`` that exist with :func:`neutral`.

    Call it right before deleting them: Chroma's vector index keeps a deleted element's
    vector in memory, and writes it to its files whenever the element's links change (a
    new element linking to it), unless it was overwritten first.

    Args:
        collection: the Chroma collection.
        ids: the ids about to be deleted.
        dim: the collection's vector dimension.
        existing: every id is known to exist (as :func:`prepare` says): not looked up.
    """
    existing_ids = list(ids) if existing else collection.get(ids=list(ids), include=[])["ids"]
    if existing_ids:
        collection.update(ids=existing_ids, embeddings=[neutral(dim)] * len(existing_ids))


# the calling side


class Eraser:
    """The erasing process of one embedded folder, started at its first request.

    Requests are served one at a time (threads of this process wait for each other); each
    waits at most its timeout for the reply. A process that died (killed, or its request
    timed out) is replaced by a new one at the next request.

    Args:
        folder: the embedded Chroma folder.
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = str(folder)
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None
        self._replies: queue.Queue[str | None] = queue.Queue()
        self._said: deque[str] = deque(maxlen=20)  # the process's last lines on stderr
        self._owner = os.getpid()
        self._finalizer = weakref.finalize(self, _stop, [None])
        self.refused: str | None = None  # why the last request changed nothing, if it did

    def call(self, request: Mapping[str, Any], timeout: float = REQUEST_TIMEOUT) -> dict[str, Any]:
        """Send one request and wait for its reply.

        Args:
            request: the request (``op`` and its fields, see :func:`serve`).
            timeout: seconds to wait for the reply; past it the process is killed.

        Returns:
            The reply.

        Raises:
            sqlite3.OperationalError: the erasing process failed, died or timed out.
        """
        with self._lock:
            proc = self._running()
            try:
                assert proc.stdin is not None
                proc.stdin.write(json.dumps(dict(request), ensure_ascii=False) + "\n")
                proc.stdin.flush()
            except OSError:  # it died between requests: once more, with a new one
                self._end()
                proc = self._running()
                assert proc.stdin is not None
                proc.stdin.write(json.dumps(dict(request), ensure_ascii=False) + "\n")
                proc.stdin.flush()
            return self._reply(timeout)

    def close(self) -> None:
        """End the erasing process (a later request starts another)."""
        with self._lock:
            self._end()

    @property
    def pid(self) -> int | None:
        """The erasing process's pid while one runs."""
        proc = self._proc
        return None if proc is None or proc.poll() is not None else proc.pid

    def _running(self) -> subprocess.Popen[str]:
        proc = self._proc
        if proc is not None and proc.poll() is None and self._owner == os.getpid():
            return proc
        self._end()
        self._owner = os.getpid()
        try:
            proc = subprocess.Popen(  # noqa: S603 - our own interpreter and file
                ERASER, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True, encoding="utf-8", bufsize=1)
        except OSError as e:
            msg = f"the erasing process could not start: {e}"
            raise sqlite3.OperationalError(msg) from e
        self._proc, self._replies = proc, queue.Queue()
        self._said.clear()
        _reader(proc.stdout, self._replies.put)
        _reader(proc.stderr, lambda line: None if line is None else self._said.append(line))
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _stop, [proc])
        return proc

    def _reply(self, timeout: float) -> dict[str, Any]:
        try:
            line = self._replies.get(timeout=timeout)
        except queue.Empty:
            self._end()
            msg = f"the erasing process did not answer within {timeout:g} s"
            raise sqlite3.OperationalError(msg) from None
        if line is None:  # it ended without answering (killed, or it crashed)
            self._end()
            said = [s.strip() for s in self._said if s.strip()]
            msg = f"the erasing process ended: {said[-1] if said else 'no reply'}"
            raise sqlite3.OperationalError(msg)
        reply: dict[str, Any] = json.loads(line)
        if reply.get("error"):
            msg = f"the erasing process failed: {reply['error']}"
            raise sqlite3.OperationalError(msg)
        return reply

    def _end(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and self._owner == os.getpid():
            _stop([proc])


def _reader(stream: IO[str] | None, put: Callable[[str | None], Any]) -> None:
    """Hand each line of a child's stream to ``put`` in a thread, then None at its end."""
    def run() -> None:
        assert stream is not None
        for line in stream:
            put(line)
        put(None)

    threading.Thread(target=run, name="genmem-eraser-reader", daemon=True).start()


def _stop(procs: list[subprocess.Popen[str] | None]) -> None:
    """End an erasing process: its input closed (it ends at once between requests)."""
    proc = procs[0]
    if proc is None or proc.poll() is not None:
        return
    try:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()


TESTED_CHROMA = ("1.5",)
"""The Chroma release series whose on-disk layout the erasure was tested with (the
``chromadb`` requirement's range in ``pyproject.toml`` says the same). With any other, a
forget deletes as Chroma does and touches none of its files."""


def untested(version: str | None = None) -> str | None:
    """Why the installed Chroma's files are left alone, or None when the erasure knows them.

    Args:
        version: a ``chromadb`` version (default: the installed one).

    Returns:
        The reason, in one line, or None.
    """
    if version is None:
        import chromadb

        version = str(chromadb.__version__)
    if ".".join(version.split(".")[:2]) in TESTED_CHROMA:
        return None
    tested = ", ".join(f"{series}.x" for series in TESTED_CHROMA)
    return (f"Chroma {version} is not a version the erasure was tested with ({tested}): "
            "the records were deleted as Chroma deletes them, not erased from its files")


def prepare(
    eraser: Eraser, collection: Any, ids: Sequence[str], dim: int,
    state: tuple[Any, str] | None = None, rekeyed: Sequence[str] = (),
) -> list[str] | None:
    """Overwrite what the rows of the records of ``ids`` hold, before Chroma deletes them.

    Call it after the forget's commit point (readers skip the records by then: their
    metadata is gone but ``persona`` and ``node_count``), before :func:`blank` and Chroma's
    delete, with the folder's write held. Repeating it is harmless.

    Args:
        eraser: the folder's erasing process.
        collection: the collection the records are in.
        ids: the forgotten ids.
        dim: the collection's vector dimension.
        state: the collection of state records and the id of the one the forget rewrote:
            the log rows of its earlier versions lose their metadata.
        rekeyed: ids of kept records the forget gave new packed fields: their earlier log
            rows lose their metadata (it quoted the forgotten text).

    Returns:
        The ids of ``ids`` that Chroma still holds, or None when the folder is not laid out
        as expected (a warning is logged once per folder; nothing was changed, and nothing
        is to be erased).

    Raises:
        sqlite3.Error: SQLite or the erasing process failed; a repeat erases.
    """
    report = _ask(eraser, "prepare", collection, ids, dim, state, rekeyed)
    return None if report is None else [str(i) for i in report.get("present", ())]


def finish(
    eraser: Eraser, collection: Any, ids: Sequence[str], dim: int,
    state: tuple[Any, str] | None = None, rekeyed: Sequence[str] = (),
) -> dict[str, Any] | None:
    """Zero what Chroma's connections freed, and the records' slots in the index files.

    Call it after :func:`prepare`, :func:`blank` and Chroma's delete of the same ids, with
    the folder's write held. Repeating it is harmless.

    Args:
        eraser: the folder's erasing process.
        collection: the collection the records were in.
        ids: the deleted ids.
        dim: the collection's vector dimension.
        state: the collection of state records and the id of the one the forget rewrote.
        rekeyed: ids of kept records the forget gave new packed fields.

    Returns:
        What was zeroed (bytes, pages, slots), or None when the folder is not laid out as
        expected (a warning is logged once per folder).

    Raises:
        sqlite3.Error: SQLite or the erasing process failed; a repeat erases.
    """
    return _ask(eraser, "finish", collection, ids, dim, state, rekeyed)


def compact(eraser: Eraser) -> dict[str, Any] | None:
    """Rebuild the folder's database from its live rows and zero its index files' room.

    ``VACUUM`` on a connection with ``secure_delete`` on, after merging Chroma's full-text
    index: no byte of what was deleted, rewritten or moved stays in ``chroma.sqlite3``. Its
    cost grows with the folder; call it with the folder's write held.

    Args:
        eraser: the folder's erasing process.

    Returns:
        ``{"bytes_before", "bytes_after", "free_pages_before", ...}``, or None when the
        installed Chroma is not a tested version or the folder is not laid out as expected
        (nothing was changed).

    Raises:
        sqlite3.Error: SQLite or the erasing process failed.
    """
    if _refused(eraser):
        return None
    reply = eraser.call({"op": "compact", "folder": eraser.folder}, timeout=ERASE_TIMEOUT)
    return _answer(eraser, reply)


def _ask(
    eraser: Eraser, op: str, collection: Any, ids: Sequence[str], dim: int,
    state: tuple[Any, str] | None, rekeyed: Sequence[str],
) -> dict[str, Any] | None:
    if _refused(eraser):
        return None
    request = {"op": op, "folder": eraser.folder, "collection": str(collection.id),
               "ids": list(ids), "dim": dim, "rekeyed": list(rekeyed),
               "state": None if state is None else [str(state[0].id), state[1]]}
    return _answer(eraser, eraser.call(request))


def _refused(eraser: Eraser) -> bool:
    """Whether the folder's files are left alone (said once): nothing is asked of them.

    So with a Chroma version the erasure was not tested with, checked before the erasing
    process opens any file, and with a folder found not laid out as expected: once a check
    failed, nothing more is written to the folder until this process ends (a later process
    checks it again before it writes). ``eraser.refused`` says why.
    """
    refused = untested() or _REFUSED.get(str(Path(eraser.folder)))
    if refused is not None:
        eraser.refused = refused
        _warn_once(Path(eraser.folder), refused)
    return refused is not None


def _answer(eraser: Eraser, reply: Mapping[str, Any]) -> dict[str, Any] | None:
    problem = reply.get("layout_problem")
    if problem is not None:
        eraser.refused = f"the folder is not laid out as the erasure expects: {problem}"
        _REFUSED[str(Path(eraser.folder))] = eraser.refused
        _warn_once(Path(eraser.folder), str(problem))
        return None
    eraser.refused = None
    return dict(reply.get("report") or {})


# the erasing process


def main() -> None:
    """The erasing process: :func:`serve` on its standard input and output."""
    serve(sys.stdin, sys.stdout, Caches())


def serve(requests: IO[str], replies: IO[str], caches: Caches) -> None:
    """Answer JSON requests, one a line, until the input ends.

    A request is ``{"op": "prepare" | "finish", "folder", "collection", "ids", "dim",
    "state", "rekeyed"}`` or ``{"op": "compact", "folder"}``; its reply is ``{"report":
    ...}``, ``{"layout_problem": "..."}`` (nothing was changed) or ``{"error": "..."}``.

    Args:
        requests: where the requests come from.
        replies: where the replies go.
        caches: what the process keeps between requests.
    """
    for line in requests:
        if line.strip():
            replies.write(json.dumps(answer(json.loads(line), caches), ensure_ascii=False) + "\n")
            replies.flush()


def answer(request: Mapping[str, Any], caches: Caches) -> dict[str, Any]:
    """The reply to one request (see :func:`serve`)."""
    op = request.get("op")
    try:
        if op == "compact":
            return {"report": compact_here(request["folder"], caches=caches)}
        state = request.get("state")
        args = (request["folder"], request["collection"], request["ids"], request["dim"],
                None if state is None else (state[0], state[1]), request.get("rekeyed", ()))
        if op == "prepare":
            return {"report": prepare_here(*args, caches=caches)}
        if op == "finish":
            return {"report": finish_here(*args, caches=caches)}
    except _LayoutError as e:
        return {"layout_problem": str(e)}
    except Exception as e:  # noqa: BLE001 - said to the caller, which raises it
        return {"error": f"{type(e).__name__}: {e}"}
    return {"error": f"unknown request {op!r}"}


class Caches:
    """What the erasing process keeps between requests: parsed id maps, slot maps."""

    def __init__(self) -> None:
        self.ids: dict[str, tuple[tuple[int, int, int], IndexIds]] = {}
        self.slots: dict[str, np.ndarray] = {}
        self.agreed: dict[str, tuple[IndexIds, np.ndarray]] = {}

    def ids_of(self, path: Path) -> IndexIds:
        """What an index's pickle says, parsed again only when Chroma rewrote the file.

        Raises:
            _LayoutError: the file is not as expected.
        """
        info = path.stat()
        stamp = (info.st_size, info.st_mtime_ns, info.st_ino)
        held = self.ids.get(str(path))
        if held is not None and held[0] == stamp:
            return held[1]
        ids = _index_ids(path)
        self.ids[str(path)] = (stamp, ids)
        return ids

    def disagreement(self, index: Path, ids: IndexIds, slots: np.ndarray) -> str | None:
        """:func:`_disagreement`, looked for again only when the pickle or the slots changed."""
        held = self.agreed.get(str(index))
        if held is not None and held[0] is ids and held[1] is slots:
            return None
        problem = _disagreement(ids, slots)
        if problem is None:
            self.agreed[str(index)] = (ids, slots)
        return problem


def prepare_here(
    folder: str | Path, collection_id: str, ids: Sequence[str], dim: int,
    state: tuple[str, str] | None = None, rekeyed: Sequence[str] = (),
    *, caches: Caches | None = None,
) -> dict[str, Any]:
    """:func:`prepare`, in this process (which must not hold Chroma open).

    Everything is checked before anything changes. The pages that hold the records' rows,
    and those next to them (which may hold copies of them), are noted in
    ``genmem-erase/pending.json`` for :func:`finish_here`, which sweeps them even after a
    crash in between.

    Returns:
        How many rows were rewritten (``rows``), and the ids Chroma still holds
        (``present``).

    Raises:
        _LayoutError: the folder is not laid out as expected (nothing was changed).
        sqlite3.Error: SQLite failed.
    """
    folder, caches = Path(folder), caches or Caches()
    vector = neutral(dim).tobytes()
    with _connection(folder / DATABASE) as (db, fd):
        _check_layout(db, fd)
        index = folder / _segment(db, collection_id, HNSW_SEGMENT)
        _forgotten_slots(folder, index, ids, len(vector), caches)
        metadata = _segment(db, collection_id, METADATA_SEGMENT)
        earlier = None
        if state is not None:
            earlier = _earlier_states(db, state[0], state[1])
            _checked_index(folder, folder / _segment(db, state[0], HNSW_SEGMENT), caches, None)
        applied = _applied(db, metadata)
        with _transaction(db, "IMMEDIATE"):
            _fill(db, "forgotten", ids)
            _fill(db, "rekeyed", rekeyed)
            _note_pending(folder, _near(db, fd, metadata))  # before anything moves
            present = [str(r[0]) for r in db.execute(
                "SELECT embedding_id FROM embeddings WHERE segment_id = ? "
                "AND embedding_id IN (SELECT id FROM temp.forgotten)", (metadata,))]
            full_text = _check_rows(db, collection_id, metadata, vector, earlier)
            rows = _rewrite_log(db, collection_id, vector, earlier, applied)
            rows += _clear_metadata(db, metadata, full_text)
    return {"rows": rows, "present": present}


def finish_here(
    folder: str | Path, collection_id: str, ids: Sequence[str], dim: int,
    state: tuple[str, str] | None = None, rekeyed: Sequence[str] = (),
    *, caches: Caches | None = None,
) -> dict[str, Any]:
    """:func:`finish`, in this process (which must not hold Chroma open).

    Returns:
        What was done: ``bytes`` zeroed in the database, ``free_pages`` read, ``pages`` of
        live b-trees swept, ``slots`` of the index file overwritten, ``tails`` (bytes of
        the index files' unused room zeroed), ``full_text`` (``"merged"`` and swept,
        ``"skipped"``: too large for a forget, or ``"none"``).

    Raises:
        _LayoutError: the folder is not laid out as expected.
        sqlite3.Error: SQLite failed.
    """
    folder, caches = Path(folder), caches or Caches()
    vector = neutral(dim).tobytes()
    report: dict[str, Any] = {}
    with _connection(folder / DATABASE) as (db, fd):
        _check_layout(db, fd)
        index = folder / _segment(db, collection_id, HNSW_SEGMENT)
        segments = [(index, _norms_unused(db, collection_id))]
        if state is not None:
            segments.append((folder / _segment(db, state[0], HNSW_SEGMENT),
                             _norms_unused(db, state[0])))
        found = _forgotten_slots(folder, index, ids, len(vector), caches)  # before any write
        for segment, _ in segments:
            _checked_index(folder, segment, caches, None)
        report["full_text"] = _merge_small_text_index(db, fd)
        report.update(_sweep(db, fd, collection_id, state, rekeyed, _pending(folder),
                             report["full_text"] != "skipped"))
    (folder / SLOT_MAPS / PENDING).unlink(missing_ok=True)
    report["slots"] = _overwrite_slots(index, found, vector)
    report["tails"] = sum(_zero_tail(folder, segment, caches, unused)
                          for segment, unused in segments)
    return report


def _norms_unused(db: sqlite3.Connection, collection_id: str) -> bool:
    """Whether the collection's vector index keeps no norms (its space is not cosine).

    Chroma's hnsw index writes a float per element to ``length.bin``: the vector's norm in
    a cosine space, and otherwise memory it allocated and never set (whatever the process
    held there, forgotten memories among it), which it never reads. Read from the
    collection's schema; False (keep the file) when it does not say.
    """
    row = db.execute("SELECT schema_str FROM collections WHERE id = ?",
                     (collection_id,)).fetchone()
    try:
        config = json.loads(row[0])["defaults"]["float_list"]["vector_index"]["config"]
    except (TypeError, KeyError, ValueError):
        return False
    return config.get("space") in ("l2", "ip")


def compact_here(folder: str | Path, *, caches: Caches | None = None) -> dict[str, Any]:
    """:func:`compact`, in this process (which must not hold Chroma open).

    Every index's files are checked to agree before anything changes.

    Raises:
        _LayoutError: the folder is not laid out as expected (nothing was changed).
        sqlite3.Error: SQLite failed.
    """
    folder, caches = Path(folder), caches or Caches()
    path = folder / DATABASE
    with _connection(path) as (db, fd):
        _check_layout(db, fd)
        unused = {segment: _norms_unused(db, collection) for segment, collection in db.execute(
            "SELECT id, collection FROM segments WHERE type = ?", (HNSW_SEGMENT,))}
        indexes = [(h.parent, unused.get(h.parent.name, False))
                   for h in sorted(folder.glob("*/header.bin"))]
        for index, _ in indexes:
            _checked_index(folder, index, caches, None)
        before = (path.stat().st_size, _pragma(db, "freelist_count"))
        merged = _merge_text_index(db)
        db.execute("VACUUM")
        after = (path.stat().st_size, _pragma(db, "freelist_count"))
    tails = sum(_zero_tail(folder, index, caches, norms) for index, norms in indexes)
    (folder / SLOT_MAPS / PENDING).unlink(missing_ok=True)  # every page was rebuilt
    return {"bytes_before": before[0], "bytes_after": after[0],
            "free_pages_before": before[1], "free_pages_after": after[1],
            "full_text_merged": merged, "index_bytes_zeroed": tails}


# checks


@contextmanager
def _connection(path: Path) -> Iterator[tuple[sqlite3.Connection, int]]:
    """A connection of ours to Chroma's database, zeroing what it frees, and a descriptor.

    The descriptor reads and writes its pages raw; both are closed after.

    The descriptor is opened before the connection and closed after it, with the memory
    maps of the file made meanwhile (each holds a descriptor of its own): closing a
    descriptor of a file drops every POSIX lock this process holds on it, the connection's
    too, so none is closed while the connection may hold one.
    """
    if not path.is_file():
        msg = f"no {DATABASE} in the folder"
        raise _LayoutError(msg)
    fd = os.open(path, os.O_RDWR | getattr(os, "O_BINARY", 0))
    _VIEWS[fd] = []
    try:
        db = sqlite3.connect(path, timeout=SQLITE_WAIT, isolation_level=None)
        with closing(db):
            db.execute("PRAGMA secure_delete = ON")
            yield db, fd
    finally:
        for view in _VIEWS.pop(fd):
            view.close()
        os.close(fd)


@contextmanager
def _transaction(db: sqlite3.Connection, kind: str) -> Iterator[None]:
    db.execute(f"BEGIN {kind}")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _pragma(db: sqlite3.Connection, name: str) -> Any:
    return db.execute(f"PRAGMA {name}").fetchone()[0]


def _check_layout(db: sqlite3.Connection, fd: int) -> None:
    """Check the database is as this module was written for: before anything changes.

    Raises:
        _LayoutError: it is not.
    """
    columns = {row[1] for row in db.execute(f"PRAGMA table_info({QUEUE})")}
    if not QUEUE_COLUMNS <= columns:
        msg = f"table {QUEUE} lacks {sorted(QUEUE_COLUMNS - columns)}"
        raise _LayoutError(msg)
    if "schema_str" not in {row[1] for row in db.execute("PRAGMA table_info(collections)")}:
        msg = "table collections has no schema_str (where a collection's space is said)"
        raise _LayoutError(msg)
    journal = str(_pragma(db, "journal_mode")).lower()
    if journal not in JOURNALS:
        msg = f"the database's journal mode is {journal}"
        raise _LayoutError(msg)
    keys = {row[1] for row in db.execute(f"PRAGMA table_info({METADATA})")}
    if not {"id", "key", "string_value"} <= keys:
        msg = f"table {METADATA} is not as expected"
        raise _LayoutError(msg)
    with _transaction(db, "DEFERRED"):  # a read: nobody writes while the pages are read
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        with _raw(fd) as pages:
            if pages.reserved:  # an extension's bytes (checksums, a cipher): not ours to touch
                msg = f"{DATABASE} reserves {pages.reserved} bytes of each page"
                raise _LayoutError(msg)
            pages.freelist()


@contextmanager
def _raw(fd: int) -> Iterator[Any]:
    """The database's pages, read and written straight from the file.

    A :class:`~langchain_genmem.backends.sqlite_pages.Pages`: use it inside a transaction
    that holds a lock.

    Raises:
        _LayoutError: the file is not as SQLite's file format says.
    """
    size = os.fstat(fd).st_size
    view = mmap.mmap(fd, size, access=mmap.ACCESS_READ) if size else None
    if view is not None:
        _VIEWS.setdefault(fd, []).append(view)  # closed with the connection's descriptor
    try:
        yield sqlite_pages.Pages(fd, view)
    except sqlite_pages.FormatError as e:
        msg = f"{DATABASE}: {e}"
        raise _LayoutError(msg) from e


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


def _applied(db: sqlite3.Connection, segment: str) -> int:
    """The last log position the metadata segment ``segment`` applied.

    Raises:
        _LayoutError: the segment's position is not as expected.
    """
    try:
        row = db.execute("SELECT seq_id FROM max_seq_id WHERE segment_id = ?",
                         (segment,)).fetchone()
    except sqlite3.OperationalError as e:
        msg = f"table max_seq_id is not as expected ({e})"
        raise _LayoutError(msg) from e
    if row is None:
        return 0  # nothing applied yet
    if not isinstance(row[0], int):
        msg = "a metadata segment's position in max_seq_id is not a number"
        raise _LayoutError(msg)
    return int(row[0])


def _earlier_states(db: sqlite3.Connection, collection_id: str, state_id: str) -> Earlier:
    """The state record's log rows that Chroma's metadata segment has applied.

    Chroma replays its log into that segment only past the position it stored, so the
    metadata of these rows is never read again.

    Raises:
        _LayoutError: the segment or its position is not as expected.
    """
    segment = _segment(db, collection_id, METADATA_SEGMENT)
    return Earlier(f"%/{collection_id}", state_id, _applied(db, segment))


# before Chroma's delete


def _fill(db: sqlite3.Connection, name: str, ids: Sequence[str]) -> None:
    """A temporary table ``name`` of ``ids``."""
    db.execute(f"CREATE TEMP TABLE IF NOT EXISTS {name} (id TEXT PRIMARY KEY)")
    db.execute(f"DELETE FROM temp.{name}")  # noqa: S608
    db.executemany(f"INSERT OR IGNORE INTO temp.{name} VALUES (?)",  # noqa: S608
                   ((i,) for i in ids))


def _check_rows(db: sqlite3.Connection, collection_id: str, segment: str, vector: bytes,
                earlier: Earlier | None) -> list[int]:
    """Check the rows :func:`_rewrite_log` and :func:`_clear_metadata` change, first.

    Returns:
        The forgotten records' rows of Chroma's full-text index.

    Raises:
        _LayoutError: a row is not as expected (nothing was changed).
    """
    topic = f"%/{collection_id}"
    _check_log(db, topic, "SELECT id FROM temp.forgotten UNION SELECT id FROM temp.rekeyed")
    if earlier is not None:
        _check_log(db, earlier.topic, "SELECT ?", (earlier.record_id,))
    odd = db.execute(f"SELECT count(*) FROM {QUEUE} WHERE {FORGOTTEN_ROWS} "  # noqa: S608
                     "AND vector IS NOT NULL "
                     "AND (encoding <> 'FLOAT32' OR length(vector) <> ?)",
                     (topic, DELETE_OPERATION, len(vector))).fetchone()[0]
    if odd:
        msg = f"{odd} log rows hold vectors of another encoding or size"
        raise _LayoutError(msg)
    return _full_text_rows(db, FORGOTTEN_RECORDS, segment)


def _rewrite_log(db: sqlite3.Connection, collection_id: str, vector: bytes,
                 earlier: Earlier | None, applied: int) -> int:
    """Rewrite the log rows of the forgotten ids, deletes excepted, to hold nothing of them.

    They get no metadata and the neutral vector; the applied rows of re-keyed ids and
    ``earlier`` lose their metadata. :func:`_check_rows` checked them.
    """
    where = (f"%/{collection_id}", DELETE_OPERATION)
    rows = db.execute(f"UPDATE {QUEUE} SET metadata = NULL, "  # noqa: S608
                      "vector = CASE WHEN vector IS NULL THEN NULL ELSE ? END "
                      f"WHERE {FORGOTTEN_ROWS}", (vector, *where)).rowcount
    rows += db.execute(f"UPDATE {QUEUE} SET metadata = NULL WHERE topic LIKE ? "  # noqa: S608
                       "AND id IN (SELECT id FROM temp.rekeyed) AND seq_id <= ? "
                       "AND metadata IS NOT NULL", (where[0], applied)).rowcount
    if earlier is not None:
        rows += db.execute(f"UPDATE {QUEUE} SET metadata = NULL WHERE topic LIKE ? "  # noqa: S608
                           "AND id = ? AND seq_id <= ? AND metadata IS NOT NULL",
                           earlier).rowcount
    return int(rows)


def _check_log(db: sqlite3.Connection, topic: str, ids: str,
               args: Sequence[object] = ()) -> None:
    """Check that the log rows of the records ``ids`` selects mean what they are taken for.

    Each is matched by its topic (the collection's) and its ``id`` column (the record's
    own id); its operation must be one of Chroma's (add, update, upsert, delete), and one
    taken for a delete must carry no vector.

    Raises:
        _LayoutError: a row is not as expected (nothing was changed).
    """
    rows = db.execute(
        f"SELECT operation, count(*), sum(vector IS NOT NULL) FROM {QUEUE} "  # noqa: S608
        f"WHERE topic LIKE ? AND id IN ({ids}) GROUP BY operation", (topic, *args)).fetchall()
    for operation, count, vectors in rows:
        if operation not in OPERATIONS:
            msg = f"{count} log rows of the records hold operation {operation!r}, not Chroma's"
            raise _LayoutError(msg)
        if operation == DELETE_OPERATION and vectors:
            msg = f"{vectors} log rows of the records taken for deletes hold a vector"
            raise _LayoutError(msg)


def _clear_metadata(db: sqlite3.Connection, segment: str, full_text: Sequence[int]) -> int:
    """Delete the forgotten records' metadata but ``persona`` and ``node_count``.

    Their full-text rows (a format-1 record's description: ``full_text``, as
    :func:`_check_rows` found them) go too.
    """
    rows = db.execute(f"DELETE FROM {METADATA} WHERE id IN ({FORGOTTEN_RECORDS}) "  # noqa: S608
                      f"AND key NOT IN ({', '.join('?' * len(KEPT_KEYS))})",
                      (segment, *KEPT_KEYS)).rowcount
    db.executemany(f"DELETE FROM {FULL_TEXT} WHERE rowid = ?",  # noqa: S608
                   ((i,) for i in full_text))
    return int(rows) + len(full_text)


def _full_text_rows(db: sqlite3.Connection, ids: str, segment: str) -> list[int]:
    """The records' rows of Chroma's full-text index, each checked to hold its document.

    Chroma keeps a record's document there under the record's row id in ``embeddings``;
    a row there holding another text is not taken for the record's.

    Args:
        db: the connection.
        ids: a query of the records' row ids in ``embeddings`` (of ``segment``).
        segment: the records' metadata segment.

    Raises:
        _LayoutError: the index is not as expected, or a row holds another text.
    """
    content = f"{FULL_TEXT}_content"
    if not _exists(db, content):
        return []
    if "c0" not in {row[1] for row in db.execute(f"PRAGMA table_info({content})")}:
        msg = f"table {content} has no column c0 (the text)"
        raise _LayoutError(msg)
    rows = db.execute(
        f"SELECT c.id, c.c0 IS (SELECT m.string_value FROM {METADATA} m "  # noqa: S608
        f"WHERE m.id = c.id AND m.key = ?) FROM {content} c WHERE c.id IN ({ids})",
        (DOCUMENT_KEY, segment)).fetchall()
    other = sum(1 for _, same in rows if not same)
    if other:
        msg = f"{other} rows of Chroma's full-text index hold another text than the record's"
        raise _LayoutError(msg)
    return [int(row[0]) for row in rows]


def _locate(db: sqlite3.Connection, segment: str) -> tuple[set[int], set[tuple[bytes, bytes]]]:
    """The rowids of the forgotten records' metadata rows, and their document index keys.

    A key is (key, start of the text), for the rows :func:`_clear_metadata` deletes.
    """
    got = db.execute(
        f"SELECT rowid, key, substr(CAST(string_value AS BLOB), 1, ?) FROM {METADATA} "  # noqa: S608
        "WHERE id IN (SELECT id FROM embeddings WHERE segment_id = ? "
        "AND embedding_id IN (SELECT id FROM temp.forgotten))", (KEY_PREFIX, segment))
    rowids, keys = set(), set()
    for rowid, key, start in got:
        rowids.add(int(rowid))
        if start is not None and key not in KEPT_KEYS:
            keys.add((str(key).encode(), bytes(start)))
    return rowids, keys


def _near(db: sqlite3.Connection, fd: int, segment: str) -> set[int]:
    """The pages that hold the forgotten records' rows and index entries, or sit next to them.

    A page split leaves copies of the cells it moves in the page's free space. Read under
    this connection's lock, before it changes anything.
    """
    rowids, keys = _locate(db, segment)
    roots = _roots(db, [METADATA, DOCUMENT_INDEX])
    with _raw(fd) as pages:
        near = set(pages.around_rowids(roots[METADATA], sorted(rowids))) if rowids else set()
        if keys and DOCUMENT_INDEX in roots:
            near |= set(pages.around_keys(roots[DOCUMENT_INDEX], sorted(keys)) or {})
    return near


def _note_pending(folder: Path, pages: set[int]) -> None:
    """Add page numbers to sweep to ``genmem-erase/pending.json``.

    Only numbers, nothing of the records: a finish after a crash still sweeps them.
    """
    if not pages:
        return
    path = folder / SLOT_MAPS / PENDING
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(sorted(pages | _pending(folder))))


def _pending(folder: Path) -> set[int]:
    path = folder / SLOT_MAPS / PENDING
    try:
        return {int(n) for n in json.loads(path.read_text())}
    except (OSError, ValueError, TypeError):
        return set()


def _exists(db: sqlite3.Connection, name: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is not None


# after Chroma's delete: the database


def _merge_text_index(db: sqlite3.Connection) -> bool:
    """Merge Chroma's full-text index, dropping what it kept of deleted documents."""
    if not _exists(db, FULL_TEXT):
        return False
    db.execute(f"INSERT INTO {FULL_TEXT}({FULL_TEXT}) VALUES ('optimize')")  # noqa: S608
    return True


def _merge_small_text_index(db: sqlite3.Connection, fd: int) -> str:
    """Merge the full-text index when small: ``"merged"``, ``"none"`` or ``"skipped"``.

    With records of format 2 it holds only the state records' documents (a few pages);
    with format-1 records it holds every description and is left to :func:`compact`.
    """
    if not _exists(db, FULL_TEXT):
        return "none"
    roots = _roots(db, FULL_TEXT_TABLES)
    with _transaction(db, "DEFERRED"), _raw(fd) as pages:  # a read: the pages hold still
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        count = 0
        for root in roots.values():
            for _ in pages.tree(root):
                count += 1
                if count > FULL_TEXT_PAGES:
                    return "skipped"
    _merge_text_index(db)
    return "merged"


def _roots(db: sqlite3.Connection, names: Sequence[str]) -> dict[str, int]:
    marks = ", ".join("?" * len(names))
    return {name: int(root) for name, root in db.execute(
        f"SELECT name, rootpage FROM sqlite_master WHERE name IN ({marks})",  # noqa: S608
        tuple(names)) if root}


def _sweep(db: sqlite3.Connection, fd: int, collection_id: str,
           state: tuple[str, str] | None, rekeyed: Sequence[str],
           near: set[int], full_text: bool) -> dict[str, int]:
    """Zero the free pages and the unused bytes of the pages listed in the module docstring.

    The raw writes happen while this connection holds the EXCLUSIVE lock, in a transaction
    that also rewrites ``user_version`` (page 1, never written raw): its commit moves the
    file change counter, so other connections drop what they cached.
    """
    rows, keys = _rows_to_sweep(db, collection_id, state, rekeyed)
    names = [QUEUE, METADATA, DOCUMENT_INDEX, *(FULL_TEXT_TABLES if full_text else ())]
    roots = _roots(db, names)
    with _transaction(db, "EXCLUSIVE"):
        db.execute(f"PRAGMA user_version = {int(_pragma(db, 'user_version'))}")
        with _raw(fd) as pages:
            free = _zero_freelist(pages)
            swept = _pages_to_sweep(pages, roots, rows, keys, full_text, state is not None)
            for page in swept.values():
                _zero_page(pages, page, tails=True)
            for number in near - set(swept) - {1}:  # unless freed since (swept as free)
                page = _btree_page(pages, number)
                if page is not None:
                    _zero_page(pages, page, tails=False)
    return {"bytes": pages.written, "free_pages": free, "pages": len(set(swept) | near)}


def _pages_to_sweep(pages: Any, roots: Mapping[str, int], rows: set[int],
                    keys: set[tuple[bytes, bytes]], full_text: bool,
                    documents: bool) -> dict[int, Any]:
    """The live b-tree pages whose unused bytes may hold what was forgotten (no page 1)."""
    swept: dict[int, Any] = {}
    for name in (QUEUE, *(FULL_TEXT_TABLES if full_text else ())):
        if name in roots:
            swept.update((p.number, p) for p in pages.tree(roots[name]))
    if rows:
        swept.update(pages.around_rowids(roots[METADATA], sorted(rows)))
    if DOCUMENT_INDEX in roots:
        if documents:  # every state document (a few pages when records are of format 2)
            run = pages.around_keys(roots[DOCUMENT_INDEX], [(DOCUMENT_KEY.encode(), b"")],
                                    INDEX_RUN_PAGES)
            swept.update(run or {})
        if keys:
            swept.update(pages.around_keys(roots[DOCUMENT_INDEX], sorted(keys)) or {})
    swept.pop(1, None)  # page 1 is the sweeping transaction's own
    return swept


def _rows_to_sweep(db: sqlite3.Connection, collection_id: str,
                   state: tuple[str, str] | None,
                   rekeyed: Sequence[str]) -> tuple[set[int], set[tuple[bytes, bytes]]]:
    """The rowids and document index keys of rows whose earlier versions Chroma freed.

    The state record's rows, and the re-keyed records' packed fields.
    """
    rows: set[int] = set()
    keys: set[tuple[bytes, bytes]] = set()
    if state is not None:
        segment = _segment(db, state[0], METADATA_SEGMENT)
        rows.update(r[0] for r in db.execute(
            f"SELECT m.rowid FROM {METADATA} m JOIN embeddings e ON m.id = e.id "  # noqa: S608
            "WHERE e.segment_id = ? AND e.embedding_id = ?", (segment, state[1])))
    if rekeyed:
        segment = _segment(db, collection_id, METADATA_SEGMENT)
        for record in rekeyed:
            for rowid, start in db.execute(
                    f"SELECT m.rowid, substr(CAST(m.string_value AS BLOB), 1, ?) "  # noqa: S608
                    f"FROM {METADATA} m JOIN embeddings e ON m.id = e.id "
                    "WHERE e.segment_id = ? AND e.embedding_id = ? AND m.key = ?",
                    (KEY_PREFIX, segment, record, PACKED_KEY)):
                rows.add(int(rowid))
                if start is not None:
                    keys.add((PACKED_KEY.encode(), bytes(start)))
    return rows, keys


def _btree_page(pages: Any, number: int) -> Any:
    """Page ``number`` if it is (still) a b-tree page in the file, else None."""
    if number > pages.count:
        return None
    try:
        return pages.page(number)
    except sqlite_pages.FormatError:
        return None


def _zero_freelist(pages: Any) -> int:
    """Zero every freelist leaf page and the unused part of every trunk page; pages read."""
    trunks, leaves = pages.freelist()
    for number, count in trunks:
        pages.zero(number, [(8 + 4 * count, pages.usable)])
    empty = bytes(pages.usable)
    for number, data in pages.read_many(leaves):
        if data[: pages.usable] != empty:
            pages.zero(number, [(0, pages.usable)], data)
    return len(trunks) + len(leaves)


def _zero_page(pages: Any, page: Any, *, tails: bool) -> None:
    """Zero a b-tree page's unused bytes, and with ``tails`` its cells' overflow tails."""
    pages.zero(page.number, sqlite_pages.free_spans(page, pages.usable), page.data)
    if page.kind == sqlite_pages.TABLE_INTERIOR or not tails:
        return
    for at in page.cell_offsets():
        tail = pages.overflow_tail(page, at)
        if tail is not None:
            pages.zero(tail[0], [(tail[1], tail[2])])


# the index files: checked before any is written


def _checked_index(folder: Path, index: Path, caches: Caches, vector_bytes: int | None,
                   *, fresh: bool = False) -> Elements | None:
    """The index's elements, once its files are found to agree on what they hold.

    ``header.bin``'s element count must be the number of elements ``index_metadata.pickle``
    says were added (hnswlib gives each a slot of its own; Chroma labels them 1, 2, ... as
    it adds them and never gives a label twice); ``data_level0.bin`` must hold that many
    slots, each with a label given and no two with one, and every record the pickle lists
    must have its label in one of them. Then every element lies before the count (what is
    past it is room) and each record's label names one slot.

    Args:
        folder: the embedded Chroma folder.
        index: the index's folder.
        caches: what the erasing process keeps.
        vector_bytes: the size of the collection's vectors, checked against the header.
        fresh: read every slot's label again, not the kept map.

    Returns:
        The elements, or None when the index was never written to the folder.

    Raises:
        _LayoutError: the files disagree, or are not as expected.
    """
    if not (index / "header.bin").is_file():
        return None
    header = _header(index / "header.bin", vector_bytes)
    ids = caches.ids_of(index / INDEX_IDS) if (index / INDEX_IDS).is_file() else NO_IDS
    if header.count != ids.added:
        msg = (f"header.bin counts {header.count} elements where {INDEX_IDS} says "
               f"{ids.added} were added")
        raise _LayoutError(msg)
    if header.count == 0:
        return Elements(header, np.zeros(0, dtype=np.uint64), ids)
    with (index / INDEX_DATA).open("rb") as f:
        if os.fstat(f.fileno()).st_size < header.count * header.size:
            msg = f"{INDEX_DATA} holds fewer than the {header.count} elements of header.bin"
            raise _LayoutError(msg)
        slots = _slot_map(folder, index, f, header, header.count, caches, fresh=fresh)
        problem = caches.disagreement(index, ids, slots)
        if problem is not None and not fresh:  # the kept map may be stale: read it anew
            slots = _slot_map(folder, index, f, header, header.count, caches, fresh=True)
            problem = caches.disagreement(index, ids, slots)
    if problem is not None:
        raise _LayoutError(problem)
    return Elements(header, slots, ids)


def _disagreement(ids: IndexIds, slots: np.ndarray) -> str | None:
    """What keeps the slots' labels from being the elements the pickle lists, if anything."""
    if slots.size and not 1 <= int(slots.min()) <= int(slots.max()) <= ids.added:
        return f"an element slot of {INDEX_DATA} holds none of the {ids.added} labels given"
    if np.unique(slots).size != slots.size:
        return f"two element slots of {INDEX_DATA} hold one label"
    live = np.fromiter(ids.labels.values(), dtype=np.uint64, count=len(ids.labels))
    missing = int(np.count_nonzero(~np.isin(live, slots)))
    if missing:
        return (f"{missing} records of {INDEX_IDS} are in none of the {slots.size} element "
                f"slots of {INDEX_DATA}")
    return None


def _forgotten_slots(folder: Path, index: Path, ids: Sequence[str], vector_bytes: int,
                     caches: Caches) -> Slots | None:
    """The slots of the index file that hold the records of ``ids``, each read back.

    A slot is taken only when the label read from it is the one ``index_metadata.pickle``
    gives the record (and maps back to the record).

    Returns:
        The slots, or None when the index was never written to the folder.

    Raises:
        _LayoutError: the files disagree, or a slot holds another label than its map says.
    """
    for fresh in (False, True):
        elements = _checked_index(folder, index, caches, vector_bytes, fresh=fresh)
        if elements is None:
            return None
        labels = sorted({elements.ids.labels[i] for i in ids if i in elements.ids.labels})
        found = Slots(elements.header,
                      [int(np.flatnonzero(elements.slots == label)[0]) for label in labels],
                      labels)
        with (index / INDEX_DATA).open("rb") as f:
            if _hold(f, found):
                return found
    msg = f"a slot of {INDEX_DATA} holds another label than was read from it"
    raise _LayoutError(msg)


def _hold(f: IO[bytes], found: Slots) -> bool:
    """Whether each of the slots holds its label."""
    for slot, label in zip(found.slots, found.labels, strict=True):
        f.seek(slot * found.header.size + found.header.label_offset)
        if f.read(8) != struct.pack("<Q", label):
            return False
    return True


def _overwrite_slots(index: Path, found: Slots | None, vector: bytes) -> int:
    """Write the neutral vector into the slots :func:`_forgotten_slots` found.

    Each slot's label is read again first: unless every slot still holds its label,
    nothing is written.

    Returns:
        How many slots were written.

    Raises:
        _LayoutError: a slot no longer holds its label.
    """
    if found is None or not found.slots:
        return 0
    with (index / INDEX_DATA).open("r+b") as f:
        if not _hold(f, found):
            msg = f"a slot of {INDEX_DATA} changed before it was overwritten"
            raise _LayoutError(msg)
        for slot in found.slots:
            f.seek(slot * found.header.size + found.header.data_offset)
            f.write(vector)
    return len(found.slots)


def _slot_map(folder: Path, index: Path, f: IO[bytes], header: Header, count: int,
              caches: Caches, *, fresh: bool = False) -> np.ndarray:
    """The label each of the file's first ``count`` slots holds.

    Kept in this process and in ``genmem-erase/<segment>.npy`` beside the store: slots keep
    their element (hnswlib only marks a deleted one), so only slots added since are read.
    A stale map is found when its labels disagree with the pickle's, or when a slot's label
    is read back before it is written.
    """
    key = str(index)
    slots = None if fresh else caches.slots.get(key)
    saved = folder / SLOT_MAPS / f"{index.name}.npy"
    if slots is None and not fresh and saved.is_file():
        try:
            slots = np.load(saved, allow_pickle=False).astype(np.uint64)
        except (OSError, ValueError):
            slots = None
    if slots is None or slots.shape[0] > count:
        slots = np.zeros(0, dtype=np.uint64)
    known = slots.shape[0]
    if known < count:
        slots = np.concatenate([slots, _read_labels(f, header, known, count)])
        saved.parent.mkdir(exist_ok=True)
        np.save(saved, slots, allow_pickle=False)
    caches.slots[key] = slots
    return slots


def _read_labels(f: IO[bytes], header: Header, first: int, end: int) -> np.ndarray:
    """The labels of slots ``first`` .. ``end - 1`` of the file, read in chunks."""
    out = []
    step = max(1, (64 << 20) // header.size)
    for lo in range(first, end, step):
        hi = min(end, lo + step)
        f.seek(lo * header.size)
        raw = np.frombuffer(f.read((hi - lo) * header.size), dtype=np.uint8)
        if raw.size != (hi - lo) * header.size:
            msg = f"{INDEX_DATA} is cut short"
            raise _LayoutError(msg)
        rows = raw.reshape(hi - lo, header.size)
        out.append(rows[:, header.label_offset : header.label_offset + 8].copy()
                   .view("<u8")[:, 0].astype(np.uint64))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.uint64)


def _index_ids(path: Path) -> IndexIds:
    """What Chroma's ``index_metadata.pickle`` says of the index's elements.

    Its map of ids to labels and its map back must be one another's inverse, and each label
    one of the elements added (Chroma numbers them from 1 as it adds them).

    Raises:
        _LayoutError: the file is not as expected.
    """
    try:
        meta = _DataOnly(io.BytesIO(path.read_bytes())).load()
        labels = {str(k): int(v) for k, v in meta["id_to_label"].items()}
        back = {int(k): str(v) for k, v in meta["label_to_id"].items()}
        added = int(meta["total_elements_added"])
    except (pickle.UnpicklingError, KeyError, TypeError, ValueError, AttributeError,
            EOFError) as e:
        msg = f"{INDEX_IDS} is not as expected ({e})"
        raise _LayoutError(msg) from e
    if {label: i for i, label in labels.items()} != back:
        msg = f"{INDEX_IDS}: its map of ids to labels and its map back disagree"
        raise _LayoutError(msg)
    if labels and not 1 <= min(labels.values()) <= max(labels.values()) <= added:
        msg = f"{INDEX_IDS}: a record's label is past the {added} elements added"
        raise _LayoutError(msg)
    return IndexIds(labels, added)


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


def _zero_tail(folder: Path, segment: Path, caches: Caches, norms_unused: bool = False) -> int:
    """Zero each index file past where its elements end; how many bytes were not zero.

    Chroma's first write of an index (before it holds any element) is of room for 100
    elements that were never set: whatever the process's memory held there, memories
    written or forgotten in this process among it. Where the index keeps no norms
    (``norms_unused``, see :func:`_norms_unused`), ``length.bin`` holds nothing but such
    memory: all of it is zeroed. Only past the elements :func:`_checked_index` found: an
    index whose files disagree on its elements is left as it is.

    Raises:
        _LayoutError: the index files are not as expected, or disagree.
    """
    elements = _checked_index(folder, segment, caches, None)
    if elements is None:
        return 0
    header, zeroed = elements.header, 0
    for name, end in ((INDEX_DATA, header.count * header.size),
                      (INDEX_LEVELS, 0 if norms_unused else header.count * 4)):
        if not (segment / name).is_file():
            continue
        with (segment / name).open("r+b") as f:
            size = os.fstat(f.fileno()).st_size
            if size <= end:
                continue
            f.seek(end)
            tail = f.read(size - end)
            if tail.count(0) != len(tail):
                f.seek(end)
                f.write(bytes(len(tail)))
                zeroed += len(tail)
    return zeroed


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
