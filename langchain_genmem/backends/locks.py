"""Who may write a persona: an OS lock for an embedded folder, a lease for a shared server.

Two kinds of write right, both named after their holder so a refused writer can say who
holds it (host, pid, since when):

- :class:`FolderLock`: an exclusive ``flock`` on ``genmem-writer.lock`` inside an embedded
  Chroma folder, taken at a process's first write and kept until the backend is closed or
  the process ends (the OS drops it when the process dies, even by SIGKILL). Embedded
  Chroma keeps a per-process index of the folder: a second process writing it breaks the
  first one's view (``Error finding id``) and can never read the first one's new vectors,
  so writers in two processes cannot be made safe there, only refused. A long-running
  owner (``genmem serve``, ``genmem mcp``) takes the folder before it serves and names
  itself (command, URL) in the lock file: another process is refused at once, told where
  to send its request. Each hold is numbered in the lock file (its *generation*), so a
  process that opened the folder before another one wrote it is refused too, instead of
  writing from an index that misses that write.
- :class:`Lease`: a record in a small Chroma collection naming its holder and an expiry,
  taken for one write and renewed by a heartbeat while the write runs. Chroma ignores an
  ``add`` of an id that exists and deletes by id only where the metadata still matches, so
  "add, then read back" gives one winner and "delete where token" never drops another
  holder's lease. A lease whose holder died expires after ``ttl`` seconds and is taken over.
  A holder that stalls longer than ``ttl`` (its heartbeat silent) may lose the lease; its
  backend then refuses to store the state record, so the stalled write commits nothing.
  Taking over an expired lease first leaves a *fence* record naming the lost holder's
  token (:func:`fence_id`), so readers can tell a record written under a lease that was
  later lost from one whose holder finished (see ``ChromaBackend``'s single-memory commits).
  Expiry times are the writers' wall clocks: hosts sharing a server need synchronised clocks.

Both also serialise the threads of one process with an in-process lock.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from langchain_genmem.core.errors import ConcurrentWriterError

try:  # POSIX; on other systems an embedded folder is only guarded within one process
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

LOCK_FILE = "genmem-writer.lock"
POLL_SECONDS = 0.05
_THREAD_LOCKS: dict[tuple[str, ...], threading.RLock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


def thread_lock(*key: str) -> threading.RLock:
    """The process-wide lock of a key (folder or server, collection, persona).

    Args:
        *key: what the lock guards.

    Returns:
        The same RLock for the same key in this process.
    """
    with _THREAD_LOCKS_GUARD:
        return _THREAD_LOCKS.setdefault(key, threading.RLock())


def holder_record(**owner: Any) -> dict[str, Any]:
    """This process as a holder: host, pid and the time it took the right.

    Args:
        **owner: more about a long-running owner: ``command`` (``"genmem serve"``) and
            ``url`` (where it takes requests); None values are left out.
    """
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "since": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **{k: v for k, v in owner.items() if v is not None},
    }


def lease_id(persona: str) -> str:
    """The id of a persona's lease record in the lease collection."""
    return f"{persona}::lease"


def fence_id(persona: str, token: str) -> str:
    """The id of the record saying the lease with ``token`` was taken over (lost)."""
    return f"{persona}::fenced::{token}"


def describe_holder(record: dict[str, Any] | None) -> str:
    """``host pid N since T`` of a holder record, or a note that it is unknown."""
    if not record:
        return "an unknown process"
    who = f"{record.get('host', '?')} pid {record.get('pid', '?')} since {record.get('since')}"
    if record.get("command"):
        where = f" at {record['url']}" if record.get("url") else ""
        return f"{record['command']}{where}, {who}"
    return who


def is_owner(record: dict[str, Any] | None) -> bool:
    """Whether a holder record names a long-running owner (a server), not one write."""
    return bool(record and record.get("command"))


class FolderLock:
    """The right of one process to write an embedded Chroma folder.

    Args:
        folder: the Chroma persistence folder.
        timeout: seconds to wait for another process to release the folder.
    """

    # (lock file, pid) -> (fd, number of holders in that process). Keyed by pid too, so a
    # forked child, which inherits the parent's descriptor and flock, never counts as holder.
    _HELD: dict[tuple[str, int], tuple[int, int]] = {}
    _GUARD = threading.Lock()
    _TAKES = 0  # flocks taken by this process so far: numbers each continuous hold
    _HOLDS: dict[tuple[str, int], int] = {}  # (lock file, pid) -> the number of its hold
    # (lock file, pid) -> the generation this process's view of the folder shows (BUSY: the
    # folder was held by another process when this process opened it)
    _VIEWS: dict[tuple[str, int], int] = {}
    BUSY = -1

    def __init__(self, folder: str | os.PathLike[str], timeout: float) -> None:
        self.folder = Path(folder).resolve()
        self.path = str(self.folder / LOCK_FILE)
        self.timeout = timeout
        self._owner = 0  # the pid that holds it through this object, 0 if none
        self.previous: dict[str, Any] | None = None

    @property
    def held(self) -> bool:
        """Whether this process holds the folder through this object."""
        return self._owner == os.getpid()

    def acquire(self, persona: str | None = None, **owner: Any) -> None:
        """Take the folder for this process (once; later calls return at once).

        Args:
            persona: the persona being written, for the error message (None: the folder).
            **owner: a long-running owner's ``command`` and ``url``, kept in the lock file
                so that refused processes are told where to send their requests.

        Raises:
            ConcurrentWriterError: a long-running owner holds the folder (at once), another
                process still writes it after the timeout, or another process wrote it
                after this process opened it (its Chroma index misses that write).
        """
        if self.held:
            return
        key = (self.path, os.getpid())
        with self._GUARD:
            fd, count = self._HELD.get(key, (-1, 0))
            if count == 0:
                fd = self._take(persona, owner)
                FolderLock._TAKES += 1
                self._HOLDS[key] = FolderLock._TAKES
            elif owner:
                _write_record(fd, {**(_read_record(fd) or {}), **holder_record(**owner)})
            self._HELD[key] = (fd, count + 1)
            self._owner = os.getpid()

    def note_view(self) -> None:
        """Note which writes this process's view of the folder shows (at its first open).

        A later :meth:`acquire` refuses when another process took the folder since: this
        process's embedded Chroma would not see what it wrote.
        """
        key = (self.path, os.getpid())
        with self._GUARD:
            if key in self._VIEWS or key in self._HELD:
                return
            self._VIEWS[key] = self._peek()[0]

    def held_here(self) -> bool:
        """Whether this process holds the folder (through this object or another backend)."""
        return (self.path, os.getpid()) in self._HELD

    def current_record(self) -> dict[str, Any] | None:
        """The record of the process that holds the folder, or of the last one that held it."""
        return self._peek()[1]

    def written_since_view(self) -> tuple[bool, dict[str, Any] | None]:
        """Whether another process may have written the folder since this process's view of it.

        Returns:
            (True when another process holds the folder now, held it when this process
            opened it, or took it since; the record of that process, as the lock file has it).
        """
        if self.held_here():
            return False, None
        seen = self._VIEWS.get((self.path, os.getpid()))
        generation, record = self._peek()
        moved = seen is None or self.BUSY in (seen, generation) or generation != seen
        return moved, record

    def owner(self) -> dict[str, Any] | None:
        """The long-running owner (a server) holding the folder in another process, or None."""
        if (self.path, os.getpid()) in self._HELD:
            return None
        generation, record = self._peek()
        return record if generation == self.BUSY and is_owner(record) else None

    def _peek(self) -> tuple[int, dict[str, Any] | None]:
        """(the generation of the last hold, or BUSY while another process holds it; its record)."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return 0, None
        try:
            record = _read_record(fd)
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:
                    return self.BUSY, record
            return _generation(record), record
        finally:
            os.close(fd)  # drops the shared flock, if taken

    def release(self) -> None:
        """Give the folder back when no other backend of this process holds it."""
        if not self.held:
            return
        key = (self.path, os.getpid())
        with self._GUARD:
            fd, count = self._HELD[key]
            self._owner = 0
            if count > 1:
                self._HELD[key] = (fd, count - 1)
                return
            del self._HELD[key]
            self._HOLDS.pop(key, None)
            os.close(fd)  # closing the descriptor drops the flock

    def hold(self) -> int | None:
        """A number for this process's current continuous hold of the folder, or None.

        While it stays the same, no other process can have written the folder.
        """
        return self._HOLDS.get((self.path, os.getpid()))

    def last_writer(self) -> dict[str, Any] | None:
        """The last other process that took the folder, as its lock file records it.

        Returns:
            Its record (host, pid, since), or None if none is known.
        """
        if self.held:
            return self.previous
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return None
        try:
            record = _read_record(fd)
        finally:
            os.close(fd)
        return None if record and record.get("pid") == os.getpid() else record

    def _take(self, persona: str | None, owner: dict[str, Any]) -> int:
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if fcntl is None:  # pragma: no cover - Windows
            return fd
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                record = _read_record(fd)
                if is_owner(record) or time.monotonic() >= deadline:
                    os.close(fd)  # a server keeps its folder until it stops: no wait
                    raise self.refusal(persona, record) from None
                time.sleep(POLL_SECONDS)
        self.previous = _read_record(fd)
        key = (self.path, os.getpid())
        seen = self._VIEWS.get(key)
        generation = _generation(self.previous)
        if seen is not None and seen != generation:
            os.close(fd)
            raise self.stale(persona, self.previous)
        _write_record(fd, {**holder_record(**owner), "generation": generation + 1})
        self._VIEWS[key] = generation + 1
        return fd

    def refusal(self, persona: str | None, record: dict[str, Any] | None) -> ConcurrentWriterError:
        """The error for a process refused the folder that ``record``'s process holds.

        Args:
            persona: the persona to write, or None (the folder).
            record: the holder's record from the lock file.

        Returns:
            A :class:`ConcurrentWriterError` naming the holder and what to do.
        """
        holder = describe_holder(record)
        start = f"persona {persona!r}: " if persona is not None else ""
        if record is not None and is_owner(record):
            url = record.get("url")
            send = f"send it to {url}" if url else "send it through that process"
            at = f", at {url}" if url else ""
            msg = (
                f"{start}the Chroma folder {str(self.folder)!r} is owned by a running "
                f"{record['command']} (pid {record.get('pid', '?')} on "
                f"{record.get('host', '?')}{at}); an embedded folder has one owner: {send}, "
                "or stop it first"
            )
        else:
            msg = (
                f"{start}the Chroma folder {str(self.folder)!r} is being written by another "
                f"process ({holder}); an embedded folder takes one writing process at a time. "
                "Stop that process, or run a Chroma server on the folder (`chroma run --path "
                "FOLDER`) and pass client=chromadb.HttpClient(host=..., port=...) to every "
                "process: a server takes many writers"
            )
        return ConcurrentWriterError(msg, persona=persona or "", holder=holder)

    def stale(
        self, persona: str | None, record: dict[str, Any] | None, *, reading: bool = False
    ) -> ConcurrentWriterError:
        """The error for a process whose view of the folder misses another process's write.

        Args:
            persona: the persona to write or read, or None (the folder).
            record: the other process's record from the lock file.
            reading: True when a read failed (else a write is refused).

        Returns:
            A :class:`ConcurrentWriterError` naming that process and what to do.
        """
        holder = describe_holder(record)
        start = f"persona {persona!r}: " if persona is not None else ""
        done = "cannot read it" if reading else "writes nothing"
        msg = (
            f"{start}another process ({holder}) wrote the Chroma folder {str(self.folder)!r} "
            "after this process opened it, and embedded Chroma keeps one index per process: "
            f"this process cannot see that write, so it {done}. Open the folder again "
            "in a new process, or share the memories through a Chroma server or PostgreSQL"
        )
        return ConcurrentWriterError(msg, persona=persona or "", holder=holder)


def _generation(record: dict[str, Any] | None) -> int:
    """The number of the hold a lock file's record was written by (0: none known)."""
    try:
        return int((record or {}).get("generation", 0))
    except (TypeError, ValueError):
        return 0


def _read_record(fd: int) -> dict[str, Any] | None:
    try:
        record = json.loads(os.pread(fd, 4096, 0) or b"null")
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _write_record(fd: int, record: dict[str, Any]) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(record, ensure_ascii=False).encode(), 0)


class Lease:
    """A per-persona write lease kept in a Chroma collection (for a shared server).

    Args:
        collection: the lease collection.
        persona: the persona the lease is for.
        timeout: seconds to wait for another holder before refusing.
        ttl: seconds a lease lasts without a heartbeat (a dead holder blocks this long).
    """

    def __init__(self, collection: Any, persona: str, *, timeout: float, ttl: float) -> None:
        self.collection = collection
        self.persona = persona
        self.timeout = timeout
        self.ttl = ttl
        self.id = lease_id(persona)
        self.token = uuid.uuid4().hex
        self.expires = 0.0
        self.lost = False

    def acquire(self) -> None:
        """Take the lease (waiting up to ``timeout``) and start renewing it.

        Raises:
            ConcurrentWriterError: another holder kept it longer than ``timeout``.
        """
        self._take()
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, args=(self._stop,), daemon=True)
        self._beat.start()

    def release(self) -> None:
        """Stop renewing and give the lease back (it expires anyway if this fails)."""
        self._stop.set()
        self._beat.join()
        try:
            self.collection.delete(ids=[self.id], where={"token": self.token})
        except Exception:  # noqa: BLE001 - it expires after ttl; the write itself is done
            logger.warning("persona %r: write lease not released; it expires in %g s",
                           self.persona, self.ttl, exc_info=True)

    def still_held(self) -> bool:
        """False once the lease expired or another writer took it (seen by the heartbeat)."""
        return not self.lost and time.time() < self.expires

    def _record(self) -> dict[str, Any]:
        self.expires = time.time() + self.ttl
        return {**holder_record(), "token": self.token, "expires": self.expires}

    def _take(self) -> None:
        deadline = time.monotonic() + self.timeout
        current = self._add_and_read()  # uncontended: two calls
        while current is None or current.get("token") != self.token:
            if current is not None and float(current.get("expires", 0)) < time.time():
                self._fence(current["token"])
                self.collection.delete(ids=[self.id], where={"token": current["token"]})
            elif current is not None and time.monotonic() >= deadline:
                raise self._refusal(describe_holder(current))
            elif current is not None:
                time.sleep(POLL_SECONDS)
            current = self._current()
            if current is None:
                current = self._add_and_read()

    def _fence(self, lost: str) -> None:
        """Record that the holder ``lost`` lost its lease, before taking it over."""
        self.collection.add(ids=[fence_id(self.persona, lost)],
                            embeddings=np.ones((1, 1), dtype=np.float32),
                            metadatas=[{"fenced": lost, "by": self.token, "at": time.time()}])

    def _add_and_read(self) -> dict[str, Any] | None:
        """Add our lease if none exists (Chroma keeps the first of simultaneous adds)."""
        self.collection.add(ids=[self.id], embeddings=np.ones((1, 1), dtype=np.float32),
                            metadatas=[self._record()])
        return self._current()

    def _current(self) -> dict[str, Any] | None:
        got = self.collection.get(ids=[self.id], include=["metadatas"])
        return dict(got["metadatas"][0]) if got["ids"] else None

    def _heartbeat(self, stop: threading.Event) -> None:
        while not stop.wait(self.ttl / 3):
            try:
                current = self._current()
                if current is None or current.get("token") != self.token:
                    self.lost = True
                    return
                expires = time.time() + self.ttl
                self.collection.update(ids=[self.id], metadatas=[{"expires": expires}])
                self.expires = expires
            except Exception:  # noqa: BLE001 - the next beat retries; expiry is the backstop
                continue

    def _refusal(self, holder: str) -> ConcurrentWriterError:
        msg = (
            f"persona {self.persona!r}: another writer ({holder}) held the write lease for "
            f"more than {self.timeout:g} s; nothing was written. Retry later, or pass a longer "
            "lock_timeout to ChromaBackend"
        )
        return ConcurrentWriterError(msg, persona=self.persona, holder=holder)
