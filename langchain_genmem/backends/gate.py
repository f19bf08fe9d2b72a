"""Writes of an embedded Chroma folder against other processes' reads: one shared/exclusive flock.

Embedded Chroma keeps a folder's vectors in an index per process, filled from the folder at
the process's first read of a collection, and never again from what other processes write
afterwards (their records are in the shared SQLite file, their vectors are not in this
process's index). A read that meets another process's write half done fails inside Chroma
(``Error finding id``), and so does a stream that reads a state newer than what its index
was filled with.

So the folder has a second lock file, ``genmem-io.lock``: a write (a ``write_lock`` block,
storing access times, dropping a persona) holds it exclusively, and a process that does not
hold the folder reads under a shared hold of it, so a read waits for the write in flight
instead of meeting it. A stream opens or catches up under one shared hold
(:meth:`FolderGate.reading` around all its reads): the state it reads and the vectors its
index was filled with are of one moment. The holder of the folder reads without it (nobody
else writes).

Waiting readers and writers first queue on ``genmem-io-turn.lock`` (one at a time), so a
process that writes without pause cannot starve a reader: the reader holding the turn gets
the folder as soon as the write in flight ends. Waits are bounded: a reader waits up to the
folder's ``lock_timeout`` for a write, then gets
:class:`~langchain_genmem.core.errors.ConcurrentWriterError` naming the writer; a write waits
up to :data:`READERS_WAIT` for reads in flight (an open of a large stream from Chroma takes
seconds).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

from langchain_genmem.backends.locks import FolderLock, describe_holder, thread_lock
from langchain_genmem.core.errors import ConcurrentWriterError

try:  # POSIX; elsewhere an embedded folder is only guarded within one process
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

IO_FILE = "genmem-io.lock"
TURN_FILE = "genmem-io-turn.lock"  # where waiting readers and writers queue for IO_FILE
POLL_SECONDS = 0.005  # a write holds the file for milliseconds: poll often
READERS_WAIT = 60.0  # seconds a write waits for other processes' reads in flight
READERS = "a process reading the folder"  # who holds a shared lock: readers are not named

# (lock file, pid, mode) -> [descriptor, holders in this process]; shared and exclusive holds
# use separate descriptors (a flock belongs to the descriptor, not to the thread)
_HOLDS: dict[tuple[str, int, int], list[int]] = {}
Refusal = Callable[[], ConcurrentWriterError]


class FolderGate:
    """Exclusive holds for writes, shared holds for other processes' reads, of one folder.

    Args:
        lock: the folder's write right (its folder, timeout and holder records).
    """

    def __init__(self, lock: FolderLock) -> None:
        self.lock = lock
        self.path = str(lock.folder / IO_FILE)
        self.turn = str(lock.folder / TURN_FILE)

    def writing(self, persona: str) -> AbstractContextManager[None]:
        """Hold the folder exclusively for one write (threads of this process share it).

        Raises:
            ConcurrentWriterError: reads of other processes kept the folder over
                :data:`READERS_WAIT` seconds; nothing was written.
        """
        if fcntl is None:  # pragma: no cover - Windows
            return nullcontext()
        return self._held(fcntl.LOCK_EX, READERS_WAIT, lambda: self._readers(persona))

    def reading(self, persona: str) -> AbstractContextManager[None]:
        """Read under a shared hold, unless this process holds the folder (nobody else writes).

        Raises:
            ConcurrentWriterError: another process kept writing over the folder's
                ``lock_timeout``; it is named.
        """
        if fcntl is None or self.lock.held_here():
            return nullcontext()
        return self._held(fcntl.LOCK_SH, self.lock.timeout, lambda: self._writer(persona))

    @contextmanager
    def _held(self, mode: int, wait: float, refusal: Refusal) -> Iterator[None]:
        key = (self.path, os.getpid(), mode)
        guard = thread_lock("gate", *map(str, key))
        with guard:
            hold = _HOLDS.get(key)
            if hold is None:
                fd = self._take(mode, wait, refusal)
                if fd is not None:  # None: nobody can write a folder whose files cannot be made
                    hold = _HOLDS[key] = [fd, 0]
            if hold is not None:
                hold[1] += 1
        try:
            yield
        finally:
            if hold is not None:
                with guard:
                    hold[1] -= 1
                    if hold[1] == 0:
                        del _HOLDS[key]
                        os.close(hold[0])  # closing the descriptor drops its flock

    def _take(self, mode: int, wait: float, refusal: Refusal) -> int | None:
        """The descriptor of the io file locked in ``mode``, taken in turn.

        Waiting readers and writers queue on the turn file first, so a process writing
        without pause cannot starve a reader (nor readers a writer): whoever holds the
        turn gets the io file as soon as the hold in its way ends.

        Returns:
            The descriptor, or None when the lock files cannot be made or opened (a
            read-only folder, which no process can write either).
        """
        deadline = time.monotonic() + wait
        try:
            turn = _locked(self.turn, fcntl.LOCK_EX, deadline, refusal)
        except PermissionError:
            return None
        try:
            return _locked(self.path, mode, deadline, refusal)
        finally:
            os.close(turn)  # closing the descriptor drops its flock

    def _writer(self, persona: str) -> ConcurrentWriterError:
        holder = describe_holder(self.lock.current_record())
        msg = (
            f"persona {persona!r}: another process ({holder}) kept writing the Chroma folder "
            f"{str(self.lock.folder)!r} for more than {self.lock.timeout:g} s while this "
            "process waited to read it; nothing was read. Retry when that write is done, or "
            "share the memories through a Chroma server or PostgreSQL"
        )
        return ConcurrentWriterError(msg, persona=persona, holder=holder)

    def _readers(self, persona: str) -> ConcurrentWriterError:
        msg = (
            f"persona {persona!r}: other processes kept reading the Chroma folder "
            f"{str(self.lock.folder)!r} for more than {READERS_WAIT:g} s; nothing was "
            "written. Retry the write"
        )
        return ConcurrentWriterError(msg, persona=persona, holder=READERS)



def _locked(path: str, mode: int, deadline: float, refusal: Refusal) -> int:
    """A descriptor of ``path`` holding a flock in ``mode``, waiting until ``deadline``."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise refusal() from None
            time.sleep(POLL_SECONDS)
