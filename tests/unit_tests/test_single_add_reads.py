"""What a single add reads: the state record only when someone else may have written it.

A writer that made the last write, on a folder its process has held throughout (or an
in-memory client), knows the state record and the run of single-memory commits above it, so
a single add reads nothing and writes once. A write that did not complete (failed, or
interrupted even by KeyboardInterrupt) makes the next one read the records back, which finds
its leftovers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime, timedelta

import chromadb
import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import MemoryStream
from langchain_genmem.backends.chroma import ChromaBackend

PERSONA = "玛丽亚 Lopez"
T0 = datetime(2024, 3, 1, 9)
EMB = DeterministicFakeEmbedding(size=8)


class Counting:
    """A collection wrapper counting reads and writes."""

    def __init__(self, inner):
        self.inner, self.gets, self.writes = inner, 0, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def get(self, **kw):
        self.gets += 1
        return self.inner.get(**kw)

    def upsert(self, **kw):
        self.writes += 1
        return self.inner.upsert(**kw)


def add(stream: MemoryStream, i: int) -> None:
    stream.add_event(f"玛丽亚 读书 {i}", poignancy=1 + i % 9, created=T0 + timedelta(minutes=i),
                     embedding=np.full(8, float(i + 1), dtype=np.float32))


def counted(stream: MemoryStream) -> tuple[Counting, Counting]:
    backend = stream.backend
    backend.nodes, backend.states = Counting(backend.nodes), Counting(backend.states)
    return backend.nodes, backend.states


def test_a_single_add_on_a_held_folder_reads_nothing_and_writes_once(tmp_path):
    stream = MemoryStream(PERSONA, path=str(tmp_path), embeddings=EMB, clock=lambda: T0)
    add(stream, 0)
    add(stream, 1)
    nodes, states = counted(stream)
    add(stream, 2)
    add(stream, 3)
    assert (nodes.gets, nodes.writes, states.gets, states.writes) == (0, 2, 0, 0)
    assert stream.refresh() is False and nodes.gets == states.gets == 0
    assert len(stream) == 4


class Interrupted(Counting):
    """Stores a page of records, then the process is interrupted (Ctrl-C) before it returns."""

    def upsert(self, **kw):
        self.inner.upsert(**kw)
        raise KeyboardInterrupt


@contextlib.contextmanager
def interrupted(stream: MemoryStream) -> Iterator[None]:
    """The block's write stores a page of records, then is interrupted (Ctrl-C)."""
    nodes = stream.backend.nodes
    stream.backend.nodes = Interrupted(nodes)
    try:
        with pytest.raises(KeyboardInterrupt):
            yield
    finally:
        stream.backend.nodes = nodes


def test_an_interrupted_batch_leaves_records_the_next_add_reads_and_removes(tmp_path):
    stream = MemoryStream(PERSONA, path=str(tmp_path), embeddings=EMB, clock=lambda: T0)
    add(stream, 0)
    add(stream, 1)
    with interrupted(stream):  # node_3 and node_4 stored, never committed
        stream.add_many([{"type": "event", "description": f"中断 {i}", "poignancy": 3,
                          "embedding": np.ones(8, dtype=np.float32)} for i in range(2)])
    assert len(stream) == 2
    add(stream, 2)
    assert stream.orphans_removed == 2
    assert [n.description for n in stream.nodes()] == [f"玛丽亚 读书 {i}" for i in (2, 1, 0)]
    chromadb.api.client.SharedSystemClient.clear_system_cache()
    stream.close()
    again = MemoryStream(PERSONA, path=str(tmp_path), embeddings=EMB)
    assert again.state == stream.state and len(again.backend.nodes.get(include=[])["ids"]) == 3


def test_an_interrupted_single_add_is_whole_and_seen_at_the_next_add(tmp_path):
    stream = MemoryStream(PERSONA, path=str(tmp_path), embeddings=EMB, clock=lambda: T0)
    add(stream, 0)
    add(stream, 1)
    with interrupted(stream):  # node_3 stored with its commit: it counts
        add(stream, 2)
    add(stream, 3)
    assert stream.orphans_removed == 0
    assert [n.description for n in stream.nodes()] == [f"玛丽亚 读书 {i}" for i in (3, 2, 1, 0)]
    assert stream.state.node_count == 4 and stream.state.type_count["event"] == 4


def test_a_released_folder_is_read_again(tmp_path):
    stream = MemoryStream(PERSONA, path=str(tmp_path), embeddings=EMB, clock=lambda: T0)
    add(stream, 0)
    add(stream, 1)
    stream.close()  # another process may write the folder from now on
    nodes, states = counted(stream)
    add(stream, 2)
    assert states.gets == 1
    assert [n.description for n in stream.nodes()][0] == "玛丽亚 读书 2"


def test_another_writer_in_the_process_makes_the_record_read_again():
    client = chromadb.EphemeralClient()
    a = MemoryStream(PERSONA, backend=ChromaBackend(client, "reads-two"), embeddings=EMB,
                     clock=lambda: T0)
    b = MemoryStream(PERSONA, backend=ChromaBackend(client, "reads-two"), embeddings=EMB,
                     clock=lambda: T0)
    add(a, 0)
    b.add_many([{"type": "event", "description": f"批量 {i}", "poignancy": 2}
                for i in range(2)])  # b rewrites the state record
    nodes, states = counted(a)
    add(a, 1)
    assert states.gets >= 1
    assert [n.node_id for n in a.nodes()] == ["node_4", "node_3", "node_2", "node_1"]
    assert a.state.node_count == 4 and MemoryStream(
        PERSONA, backend=ChromaBackend(client, "reads-two"), embeddings=EMB).state == a.state


def test_single_adds_of_two_writers_in_turn_number_after_each_other():
    client = chromadb.EphemeralClient()
    a, b = (MemoryStream(PERSONA, backend=ChromaBackend(client, "reads-turns"), embeddings=EMB,
                         clock=lambda: T0) for _ in range(2))
    for i in range(6):  # each add by one writer is a run record the other must see
        add(a if i % 2 == 0 else b, i)
    a.refresh()
    assert [n.node_id for n in a.nodes()][0] == "node_6" and a.state == b.state
    fresh = MemoryStream(PERSONA, backend=ChromaBackend(client, "reads-turns"), embeddings=EMB)
    assert [n.description for n in fresh.nodes()] == [f"玛丽亚 读书 {i}" for i in range(5, -1, -1)]


def test_a_single_add_hands_the_backend_only_the_strengths_it_changes(tmp_path):
    stream = MemoryStream(PERSONA, path=str(tmp_path), embeddings=EMB, clock=lambda: T0)
    stream.add_many([{"type": "event", "description": f"旧事 {i}", "subject": "玛丽亚",
                      "object": f"物件 {i}", "poignancy": 2} for i in range(50)])
    given: list = []
    commit = stream.backend.commit

    def spy(persona, nodes, state, **kw):
        given.append(kw.get("strength_changes"))
        return commit(persona, nodes, state, **kw)

    stream.backend.commit = spy
    stream.add_event("玛丽亚 又读书", subject="玛丽亚", object="物件 7", poignancy=3,
                     embedding=np.ones(8, dtype=np.float32))
    assert given == [{"event": {"玛丽亚": 51, "物件 7": 2}}]  # not the other 49 keywords
    stream.close()
    chromadb.api.client.SharedSystemClient.clear_system_cache()
    again = MemoryStream(PERSONA, path=str(tmp_path), embeddings=EMB)
    assert again.kw_strength == stream.kw_strength
    assert again.kw_strength["event"]["物件 7"] == 2 and len(again.kw_strength["event"]) == 51


def test_strengths_an_import_gives_stay_the_callers(tmp_path):
    stream = MemoryStream(PERSONA, path=str(tmp_path), embeddings=EMB, clock=lambda: T0)
    given = {"event": {"读书": 5}, "thought": {}}
    stream.add_many([{"type": "event", "description": "导入", "poignancy": 2}],
                    state={"kw_strength": given})
    given["event"]["读书"] = 99  # the caller's dict, changed afterwards
    assert stream.state.kw_strength["event"]["读书"] == 5
    add(stream, 1)
    assert stream.state.kw_strength["event"]["读书"] == 5 == stream.kw_strength["event"]["读书"]


def written_folder(tmp_path) -> str:
    writer = MemoryStream(PERSONA, path=str(tmp_path), embeddings=EMB, clock=lambda: T0)
    add(writer, 0)
    add(writer, 1)
    writer.close()  # released: any process may take the folder now
    return str(tmp_path)


@pytest.fixture
def held(tmp_path):
    """The folder, held by this process as `genmem serve` holds its own."""
    from langchain_genmem.backends.locks import FolderLock

    folder = written_folder(tmp_path)
    lock = FolderLock(folder, 5.0)
    lock.acquire(command="genmem serve")
    yield folder
    lock.release()


def test_a_process_holding_its_folder_reads_the_head_once_between_writes(held):
    reader = MemoryStream(PERSONA, path=held, embeddings=EMB, clock=lambda: T0)
    _, states = counted(reader)
    for _ in range(5):  # the first look reads back; the state it finds is the one it knows
        assert reader.refresh() is False
    assert states.gets == 1
    other = MemoryStream(PERSONA, path=held, embeddings=EMB, clock=lambda: T0)
    add(other, 2)  # another writer of this process: the reader's view is not current
    assert reader.refresh() is True and states.gets >= 2
    reader.refresh()  # finds the head it caught up with: current again
    seen = states.gets
    for _ in range(3):
        assert reader.refresh() is False
    assert states.gets == seen
    assert [n.description for n in reader.nodes()][0] == "玛丽亚 读书 2"


def test_a_folder_not_held_is_read_back_at_every_look(tmp_path):
    reader = MemoryStream(PERSONA, path=written_folder(tmp_path), embeddings=EMB)
    _, states = counted(reader)
    for _ in range(3):  # another process may take the folder and write between looks
        reader.refresh()
    assert states.gets == 3


def test_after_an_interrupted_write_every_look_reads_back_until_a_write_completes(held):
    stream = MemoryStream(PERSONA, path=held, embeddings=EMB, clock=lambda: T0)
    stream.refresh()
    with interrupted(stream):  # node_3 stored with its commit
        add(stream, 2)
    _, states = counted(stream)
    looks = []
    for _ in range(3):  # nothing is taken as current while the write is unfinished
        before = states.gets
        stream.refresh()
        looks.append(states.gets - before)
    assert min(looks) >= 1
    add(stream, 3)
    assert [n.description for n in stream.nodes()][:2] == ["玛丽亚 读书 3", "玛丽亚 读书 2"]
    seen = states.gets
    stream.refresh()
    assert states.gets == seen
