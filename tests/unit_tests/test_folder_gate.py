"""An embedded folder's writes against other processes' reads (backends/gate.py).

Another process is played by descriptors of this test holding the folder's io lock file
(a flock belongs to its descriptor, so they exclude the backend's own) and by a lock file
record naming it. Real processes racing are in tests/integration_tests/test_folder_races.py.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import chromadb
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import ConcurrentWriterError, MemoryStream, StorageError
from langchain_genmem.backends.chroma import ChromaBackend
from langchain_genmem.backends.gate import IO_FILE
from langchain_genmem.backends.locks import LOCK_FILE

PERSONA = "玛丽亚 Lopez"
EMB = DeterministicFakeEmbedding(size=8)
OTHER = {"host": "elsewhere", "pid": 4242, "since": "2026-01-01T00:00:00+00:00"}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A folder holding three memories of the persona, written by a stream now closed."""
    stream = MemoryStream(PERSONA, path=tmp_path, embeddings=EMB)
    for i in range(3):
        stream.add_event(f"玛丽亚 事件 {i}", poignancy=2)
    stream.close()
    return tmp_path


def another_process_took(folder: Path) -> None:
    """The lock file as another process leaves it when it takes the folder (and writes)."""
    record = json.loads((folder / LOCK_FILE).read_text(encoding="utf-8"))
    (folder / LOCK_FILE).write_text(
        json.dumps({**OTHER, "generation": record["generation"] + 1}), encoding="utf-8")


@contextmanager
def io_held(folder: Path, mode: int, release_after: float | None = None) -> Iterator[None]:
    """Hold the folder's io lock as another process would, released after a delay (or at exit)."""
    fd = os.open(folder / IO_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, mode)
    timer = None
    if release_after is not None:
        timer = threading.Timer(release_after, fcntl.flock, (fd, fcntl.LOCK_UN))
        timer.start()
    try:
        yield
    finally:
        if timer is not None:
            timer.join()
        os.close(fd)


def backend_of(folder: Path, lock_timeout: float | None = None) -> ChromaBackend:
    return ChromaBackend(chromadb.PersistentClient(path=str(folder)), lock_timeout=lock_timeout)


def test_an_open_waits_for_a_write_in_flight_then_works(folder):
    another_process_took(folder)
    with io_held(folder, fcntl.LOCK_EX, release_after=0.4):
        started = time.monotonic()
        stream = MemoryStream(PERSONA, backend=backend_of(folder), embeddings=EMB)
        waited = time.monotonic() - started
    assert len(stream) == 3 and waited >= 0.35


def test_a_read_held_up_past_the_timeout_names_the_writer(folder):
    another_process_took(folder)
    with io_held(folder, fcntl.LOCK_EX), pytest.raises(ConcurrentWriterError) as info:
        MemoryStream(PERSONA, backend=backend_of(folder, lock_timeout=0.3), embeddings=EMB)
    assert "elsewhere pid 4242" in info.value.holder
    assert "pid 4242" in str(info.value) and "kept writing" in str(info.value)


def test_a_write_waits_for_reads_in_flight(folder):
    stream = MemoryStream(PERSONA, path=folder, embeddings=EMB)
    with io_held(folder, fcntl.LOCK_SH, release_after=0.4):
        started = time.monotonic()
        stream.add_event("玛丽亚 写", poignancy=3)
        waited = time.monotonic() - started
    assert waited >= 0.35 and len(stream) == 4
    stream.close()


def test_the_holder_of_the_folder_reads_without_waiting(folder):
    stream = MemoryStream(PERSONA, path=folder, embeddings=EMB)
    stream.add_event("玛丽亚 写", poignancy=3)  # this process holds the folder now
    with io_held(folder, fcntl.LOCK_EX):  # a foreign hold it never meets while holding
        assert stream.backend.read_nodes(PERSONA, 1, 4)[3].node.description == "玛丽亚 写"
    stream.close()


class Broken:
    """A node collection whose reads fail as Chroma's do when its index misses a write."""

    def __init__(self, inner: object) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def get(self, **kw: object) -> object:
        raise RuntimeError("Error executing plan: Internal error: Error finding id")


def test_a_read_another_processs_write_made_impossible_names_that_process(folder):
    backend = backend_of(folder)
    backend.nodes = Broken(backend.nodes)
    with pytest.raises(StorageError) as plain:
        backend.read_nodes(PERSONA, 1, 3)  # nobody else wrote: the store's own failure
    assert not isinstance(plain.value, ConcurrentWriterError)
    another_process_took(folder)
    with pytest.raises(ConcurrentWriterError) as info:
        backend.read_nodes(PERSONA, 1, 3)
    message = str(info.value)
    assert "pid 4242" in message and "after this process opened it" in message
    assert "Error finding id" not in message and "4242" in info.value.holder
