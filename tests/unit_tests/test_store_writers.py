"""Writers of one persona in one process: records replaced whole, catch-up before numbering.

Two ``MemoryStream`` objects on one Chroma client and collection are two writers of the same
persona (as two processes on one server are); threads share them. The cross-process cases
(SIGKILL, a folder, a `chroma run` server) are in tests/integration_tests.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

import chromadb
import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import ConcurrentWriterError, MemoryNode, MemoryStream, StorageError
from langchain_genmem.backends.chroma import NODE_KEYS, ChromaBackend, _meta_of
from langchain_genmem.backends.locks import FolderLock
from langchain_genmem.memory.location import StoreLocation
from tests.support.writers import recounted_strength

T0 = datetime(2023, 2, 13, 9, 0)
PERSONA = "玛丽亚 Lopez"


@pytest.fixture
def shared(request):
    """A factory of streams of one persona on one in-memory collection."""
    client = chromadb.EphemeralClient()
    name = f"w-{abs(hash(request.node.name)) % 10**8}"

    def open_stream(**kw) -> MemoryStream:
        return MemoryStream(PERSONA, client=client, collection_name=name,
                            embeddings=DeterministicFakeEmbedding(size=8), clock=lambda: T0, **kw)

    yield open_stream
    client.delete_collection(name)
    client.delete_collection(f"{name}-state")


def crashed_record(stream: MemoryStream, number: int) -> None:
    """What a writer killed between its node pages and its state record leaves behind."""
    ghost = MemoryNode(
        node_id=f"node_{number}", node_count=number, type_count=number, type="event", depth=0,
        created=datetime(1999, 1, 1), expiration=datetime(2000, 1, 1),
        last_accessed=datetime(1999, 1, 1), subject="ghost", predicate="haunt", object="house",
        description="ghost 幽灵", embedding_key="ghost", poignancy=9, keywords=["幽灵"],
        filling=["node_1"],
    )
    stream.backend.nodes.upsert(
        ids=[f"{PERSONA}::node_{number}"], embeddings=np.full((1, 8), 7.0),
        metadatas=[_meta_of(PERSONA, ghost)], documents=[ghost.description],
    )


def test_a_crashed_writes_records_are_removed_and_lend_nothing(shared):
    stream = shared()
    stream.add_event("first", poignancy=2)
    crashed_record(stream, 2)
    crashed_record(stream, 3)
    reopened = shared()
    assert len(reopened) == 1  # uncommitted records are invisible
    fresh = reopened.add_event("after the crash", poignancy=3)
    assert fresh.node_id == "node_2"
    stored = shared().get("node_2")
    assert stored.model_dump() == {
        "node_id": "node_2", "node_count": 2, "type_count": 2, "type": "event", "depth": 0,
        "created": T0, "expiration": None, "last_accessed": T0, "subject": PERSONA,
        "predicate": "", "object": "", "description": "after the crash",
        "embedding_key": "after the crash", "poignancy": 3.0, "keywords": [PERSONA],
        "filling": [], "conversation": None, "speaker": None,
    }
    assert np.allclose(shared().vector("node_2"),
                       DeterministicFakeEmbedding(size=8).embed_documents(["after the crash"])[0])
    assert reopened.orphans_removed == 2
    left = reopened.backend.nodes.get(where={"node_count": {"$gt": 2}}, include=[])
    assert left["ids"] == []


def test_every_write_names_every_key(shared):
    node = shared().add_event("plain", poignancy=1)
    assert set(_meta_of(PERSONA, node)) == set(NODE_KEYS)
    assert _meta_of(PERSONA, node)["expiration"] is None  # None removes a key in Chroma


def test_a_second_stream_numbers_after_what_the_first_committed(shared):
    a, b = shared(), shared()
    a.add_event("from a", poignancy=2, keywords=["shared"])
    got = b.add_event("from b", poignancy=3, keywords=["shared"])
    assert got.node_id == "node_2" and len(b) == 2
    assert b.kw_strength["event"]["shared"] == 2
    assert b.state.importance_trigger_curr == 150 - 5
    check = shared()
    assert [n.description for n in check.nodes()] == ["from b", "from a"]


def test_state_writes_start_from_the_committed_state(shared):
    a, b = shared(), shared()
    a.update_settings(importance_trigger_max=50)
    a.set_extra(curr_tile="cafe")
    b.set_extra(daily_plan="study")
    state = b.reset_reflection_trigger()
    assert state.importance_trigger_curr == 50
    assert state.extra == {"curr_tile": "cafe", "daily_plan": "study"}
    assert shared().state.extra == {"curr_tile": "cafe", "daily_plan": "study"}


def test_a_batch_citing_its_own_items_is_refused_if_another_writer_went_first(shared):
    a = shared()
    a.add_event("seed", poignancy=1)

    class Interrupting(DeterministicFakeEmbedding):
        def embed_documents(self, texts):
            a.add_event("sneaked in", poignancy=1)  # another writer commits meanwhile
            return super().embed_documents(texts)

    b = shared()
    b._embeddings = Interrupting(size=8)
    with pytest.raises(ConcurrentWriterError, match="node_2") as info:
        b.add_many([{"type": "event", "description": "e", "poignancy": 1},
                    {"type": "thought", "description": "t", "poignancy": 1,
                     "evidence": ["node_2"]}])
    assert info.value.persona == PERSONA
    assert isinstance(info.value, StorageError)
    assert [n.description for n in shared().nodes()] == ["sneaked in", "seed"]


def test_threads_writing_through_two_streams_keep_every_memory(shared):
    streams = [shared(), shared()]
    errors: list[BaseException] = []

    def write(k: int) -> None:
        try:
            for i in range(15):
                streams[k % 2].add_event(f"thread {k} 事件 {i}", poignancy=1 + i % 3,
                                         keywords=[f"kw{i % 4}"])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    check = shared()
    nodes = list(reversed(check.nodes()))
    assert [n.node_id for n in nodes] == [f"node_{i}" for i in range(1, 61)]
    assert len({n.description for n in nodes}) == 60
    assert check.kw_strength == recounted_strength(nodes)
    assert check.state.importance_ele_n == 60


def test_the_backend_tells_client_kinds_apart(tmp_path):
    assert ChromaBackend(chromadb.EphemeralClient(), "kind-a").kind == "memory"
    folder = ChromaBackend(chromadb.PersistentClient(path=str(tmp_path)), "kind-b")
    assert folder.kind == "folder"
    with folder.write_lock(PERSONA):  # takes the folder for this process
        assert (tmp_path / "genmem-writer.lock").exists()
    folder.close()


class FailingAtExit(ChromaBackend):
    """A backend whose write right fails when given back (like a COMMIT that fails)."""

    fail = True

    @contextmanager
    def write_lock(self, persona: str) -> Iterator[None]:
        with super().write_lock(persona):
            yield
            if self.fail:
                self.fail = False
                msg = "the transaction could not be committed"
                raise StorageError(msg)


def test_a_write_shows_only_once_the_write_right_was_given_back():
    backend = FailingAtExit(chromadb.EphemeralClient(), "fail-at-exit")
    stream = MemoryStream(PERSONA, backend=backend, embeddings=DeterministicFakeEmbedding(size=8),
                          clock=lambda: T0)
    with pytest.raises(StorageError, match="could not be committed"):
        stream.add_event("maybe", poignancy=1)
    assert len(stream) == 0 and stream.state.node_count == 0
    # this backend's commit was durable after all: the next write catches up, numbers after it
    after = stream.add_event("surely", poignancy=1)
    assert after.node_id == "node_2"
    assert [n.description for n in stream.nodes()] == ["surely", "maybe"]


def lease_backend(name: str, **kw) -> ChromaBackend:
    """A backend that takes server leases; the lease collection is an in-memory one."""
    backend = ChromaBackend(chromadb.EphemeralClient(), name, **kw)
    backend.kind = "server"
    return backend


def test_writes_under_a_lease_hold_it_only_while_writing():
    backend = lease_backend("lease-ok")
    stream = MemoryStream(PERSONA, backend=backend, embeddings=DeterministicFakeEmbedding(size=8))
    stream.add_event("one", poignancy=1)
    stream.update_settings(recency_w=2.0)
    leases = backend._lease_collection()
    assert leases.get()["ids"] == []  # given back after each write
    with backend.write_lock(PERSONA):
        record = leases.get(ids=[f"{PERSONA}::lease"])["metadatas"][0]
    assert record["pid"] == os.getpid() and record["expires"] > time.time()


def test_a_lease_lost_mid_write_commits_nothing():
    backend = lease_backend("lease-lost", lease_ttl=0.3)
    stream = MemoryStream(PERSONA, backend=backend, embeddings=DeterministicFakeEmbedding(size=8))
    stream.add_event("kept", poignancy=1)
    nodes, leases = backend.nodes, backend._lease_collection()

    class Stalling:
        """Node pages take long, and meanwhile another writer takes the lease over."""

        def __getattr__(self, name):
            return getattr(nodes, name)

        def upsert(self, **kw):
            nodes.upsert(**kw)
            leases.delete(ids=[f"{PERSONA}::lease"])
            leases.add(ids=[f"{PERSONA}::lease"], embeddings=np.ones((1, 1)),
                       metadatas=[{"token": "other", "pid": 1, "expires": time.time() + 60}])
            time.sleep(0.5)  # the heartbeat (every 0.1 s) sees the lease is no longer ours

    backend.nodes = Stalling()
    with pytest.raises(ConcurrentWriterError, match="lease was lost"):
        stream.add_event("lost", poignancy=1)
    backend.nodes = nodes
    assert [n.description for n in stream.nodes()] == ["kept"]
    assert nodes.get(include=[])["ids"] == [f"{PERSONA}::node_1"]  # its page was undone


def _write_in_forked_child(backend: ChromaBackend, queue) -> None:
    try:
        with backend.write_lock(PERSONA):
            queue.put("wrote")
    except ConcurrentWriterError as e:
        queue.put(f"refused: {e.holder}")


def test_a_forked_child_does_not_inherit_the_folder(tmp_path):
    backend = ChromaBackend(chromadb.PersistentClient(path=str(tmp_path)), "forked",
                            lock_timeout=0.2)
    with backend.write_lock(PERSONA):
        pass  # the parent now holds the folder
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_write_in_forked_child, args=(backend, queue))
    child.start()
    said = queue.get(timeout=60)
    child.join(timeout=60)
    assert said.startswith(f"refused: {socket.gethostname()} pid {os.getpid()} since ")
    backend.close()


def _hold_folder(folder: str, owner: dict, queue, stop) -> None:
    """A forked child: take the folder (as a server would, when ``owner`` names one)."""
    lock = FolderLock(folder, 1.0)
    lock.acquire(**owner)
    queue.put(os.getpid())
    stop.wait(60)
    lock.release()


@contextmanager
def folder_held_by_child(folder, **owner) -> Iterator[int]:
    """Another process holds the folder for the block; yields its pid."""
    ctx = multiprocessing.get_context("fork")
    queue, stop = ctx.Queue(), ctx.Event()
    child = ctx.Process(target=_hold_folder, args=(str(folder), owner, queue, stop))
    child.start()
    try:
        yield queue.get(timeout=60)
    finally:
        stop.set()
        child.join(timeout=60)


def test_a_server_owning_a_folder_refuses_writers_and_readers_at_once_by_its_url(tmp_path):
    url = "http://127.0.0.1:8765"
    with folder_held_by_child(tmp_path, command="genmem serve", url=url) as pid:
        record = json.loads((tmp_path / "genmem-writer.lock").read_text(encoding="utf-8"))
        assert record["command"] == "genmem serve" and record["url"] == url
        assert record["pid"] == pid
        with pytest.raises(ConcurrentWriterError) as info:
            FolderLock(tmp_path, 600).acquire(PERSONA)  # no waiting for a server to stop
        message = str(info.value)
        assert f"persona {PERSONA!r}" in message and f"pid {pid}" in message
        assert f"send it to {url}, or stop it first" in message and "genmem serve" in message
        with pytest.raises(ConcurrentWriterError, match="owned by a running genmem serve"):
            StoreLocation(tmp_path).personas()  # a reader is told where to ask, too
        backend = ChromaBackend(chromadb.PersistentClient(path=str(tmp_path)), "owned")
        with pytest.raises(ConcurrentWriterError, match=url):  # access times are a write
            backend.write_access(PERSONA, {"node_1": 1.0})
    # this process opened the folder while the server held it: its view may miss the
    # server's writes, so it stays refused after the server stopped (a new process is not)
    with pytest.raises(ConcurrentWriterError, match="after this process opened it"):
        FolderLock(tmp_path, 1.0).acquire(PERSONA)


def test_a_writer_whose_view_predates_another_processs_write_is_refused(tmp_path):
    backend = ChromaBackend(chromadb.PersistentClient(path=str(tmp_path)), "stale")
    with folder_held_by_child(tmp_path):
        pass  # another process took the folder (and could have written) after this opened it
    with pytest.raises(ConcurrentWriterError, match="after this process opened it") as info:
        with backend.write_lock(PERSONA):
            pass
    assert "pid" in info.value.holder
    fresh = FolderLock(tmp_path, 1.0)  # nothing is left held: a lock taken later works
    assert not fresh.held


def test_a_location_that_writes_takes_the_folder_before_reading_it(tmp_path):
    place = StoreLocation(tmp_path, embeddings=DeterministicFakeEmbedding(size=8))
    stream = place.open(PERSONA, create=True)
    record = json.loads((tmp_path / "genmem-writer.lock").read_text(encoding="utf-8"))
    assert record["pid"] == os.getpid() and stream.state.node_count == 0
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_write_in_forked_child, args=(ChromaBackend(
        chromadb.PersistentClient(path=str(tmp_path)), "genmem", lock_timeout=0.2), queue))
    child.start()
    said = queue.get(timeout=60)
    child.join(timeout=60)
    assert said.startswith("refused: ")  # held from the open, before any write
    place.close()
