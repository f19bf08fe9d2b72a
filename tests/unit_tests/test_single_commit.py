"""A single add_event commits with one Chroma write: the node record carries the commit.

The committed state is the state record plus the run of self-committing node records above
it (see backends/chroma.py); every way of reading it back must give the state the writer
holds, and a leftover record without a commit must never count.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import chromadb
import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import MemoryStream
from langchain_genmem.backends.chroma import CHAIN_MAX, ChromaBackend
from langchain_genmem.core.errors import StorageError

PERSONA = "玛丽亚 Lopez"
T0 = datetime(2024, 3, 1, 9)
EMB = DeterministicFakeEmbedding(size=8)


class Counting:
    """A collection wrapper counting writes."""

    def __init__(self, inner):
        self.inner, self.writes = inner, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def upsert(self, **kw):
        self.writes += 1
        return self.inner.upsert(**kw)


def stream_at(path, clock=None) -> MemoryStream:
    return MemoryStream(PERSONA, path=str(path), embeddings=EMB,
                        clock=clock or (lambda: T0))


def add(stream: MemoryStream, i: int) -> None:
    stream.add_event(f"玛丽亚 读书 {i}", subject="玛丽亚", object=f"书 {i % 3}",
                     poignancy=1 + i % 9, created=T0 + timedelta(minutes=i),
                     embedding=np.full(8, float(i + 1), dtype=np.float32))


def test_a_single_add_is_one_chroma_write(tmp_path):
    stream = stream_at(tmp_path)
    add(stream, 0)  # the first write creates the state record
    stream.backend.nodes = nodes = Counting(stream.backend.nodes)
    stream.backend.states = states = Counting(stream.backend.states)
    add(stream, 1)
    assert (nodes.writes, states.writes) == (1, 0)
    assert len(stream) == 2 and stream.state.node_count == 2


@pytest.mark.parametrize("adds", [3, CHAIN_MAX - 1, CHAIN_MAX, 2 * CHAIN_MAX + 5])
def test_single_adds_read_back_whole_after_reopen(tmp_path, adds):
    writer = stream_at(tmp_path)
    writer.update_settings(recency_w=2.0)
    for i in range(adds):
        add(writer, i)
    expected = writer.state
    writer.close()
    chromadb.api.client.SharedSystemClient.clear_system_cache()
    again = stream_at(tmp_path)
    assert again.state == expected
    assert again.state.kw_strength["event"]["书 1"] == sum(1 for i in range(adds) if i % 3 == 1)
    assert again.state.importance_trigger_curr == 150 - sum(1 + i % 9 for i in range(adds))
    assert [n.description for n in again.nodes()] == [f"玛丽亚 读书 {i}" for i in
                                                      reversed(range(adds))]
    assert again.state.recency_w == 2.0


def test_a_reader_of_the_same_store_sees_single_adds_at_refresh(tmp_path):
    client = chromadb.EphemeralClient()
    writer = MemoryStream(PERSONA, backend=ChromaBackend(client, "single-reader"), embeddings=EMB)
    add(writer, 0)
    reader = MemoryStream(PERSONA, backend=ChromaBackend(client, "single-reader"), embeddings=EMB)
    for i in range(1, 6):
        add(writer, i)
    assert reader.refresh()
    assert len(reader) == 6 and reader.state == writer.state


def test_a_leftover_record_above_the_run_never_counts_and_is_removed(tmp_path):
    writer = stream_at(tmp_path)
    for i in range(4):
        add(writer, i)  # node_1 by the state record, node_2..4 by their own records
    nodes = writer.backend.nodes

    class Interrupted:  # stores the first page of a batch, then the process is interrupted
        def __getattr__(self, name):
            return getattr(nodes, name)

        def upsert(self, **kw):
            nodes.upsert(**kw)
            raise KeyboardInterrupt

    writer.backend.nodes, writer.backend.batch = Interrupted(), 1
    with pytest.raises(KeyboardInterrupt):
        writer.add_many([{"type": "event", "description": f"crashed 幽灵 {i}", "poignancy": 9,
                          "embedding": np.ones(8, dtype=np.float32)} for i in range(2)])
    writer.backend.nodes = nodes
    assert nodes.get(ids=[f"{PERSONA}::node_5"], include=[])["ids"]  # the leftover
    other = MemoryStream(PERSONA, backend=ChromaBackend(writer.backend.client), embeddings=EMB)
    assert len(other) == 4  # no commit on node_5: a crashed write's leftover
    add(writer, 4)
    assert writer.orphans_removed == 1
    assert writer.get("node_5").description == "玛丽亚 读书 4"
    assert other.refresh() and other.get("node_5").description == "玛丽亚 读书 4"


def test_a_failed_single_write_leaves_nothing_and_the_next_one_works(tmp_path):
    stream = stream_at(tmp_path)
    add(stream, 0)
    add(stream, 1)
    nodes = stream.backend.nodes

    class Failing:
        def __getattr__(self, name):
            return getattr(nodes, name)

        def upsert(self, **kw):
            raise RuntimeError("disk full")

    stream.backend.nodes = Failing()
    with pytest.raises(StorageError, match="disk full"):
        add(stream, 2)
    stream.backend.nodes = nodes
    assert len(stream) == 2
    add(stream, 3)
    assert [n.description for n in stream.nodes()][:1] == ["玛丽亚 读书 3"]
    assert stream.state.node_count == 3


def test_an_add_that_changes_extra_entries_is_one_write_and_reads_back(tmp_path):
    # a LangGraph store's key records live in extra and grow with its items: a put that
    # adds one record must not rewrite them all
    from langchain_genmem.backends.chroma import extra_patch, patched

    stream = stream_at(tmp_path)
    records = {f"k{i}": {"node_id": f"node_{i}", "value": {"文本": i}} for i in range(500)}
    stream.add_many([{"type": "event", "description": "玛丽亚 开始", "poignancy": 3}],
                    state={"extra": {"store": {"ns": records}, "other": [1, 2]}})
    stream.backend.nodes = nodes = Counting(stream.backend.nodes)
    stream.backend.states = states = Counting(stream.backend.states)
    for i in range(5):
        extra = stream.committed.extra
        ns = dict(extra["store"]["ns"])
        ns[f"new{i}"] = {"node_id": f"node_{600 + i}", "value": {"文本": "新"}}
        ns.pop(f"k{i}")
        stream.add_many([{"type": "event", "description": f"玛丽亚 读书 {i}", "poignancy": 2}],
                        state={"extra": {**extra, "store": {"ns": ns}}})
    assert (nodes.writes, states.writes) == (5, 0)
    want = stream.committed.extra
    reopened = stream_at(tmp_path)
    assert reopened.committed.extra == want and reopened.state.node_count == 6
    assert "k0" not in want["store"]["ns"] and want["store"]["ns"]["new4"]["value"] == {
        "文本": "新"}
    assert want["other"] == [1, 2]
    # the patch round-trips any change, at any depth it looks into
    before = {"a": {"b": {"c": 1, "d": 2}}, "x": 1, "gone": {"y": 1}}
    after = {"a": {"b": {"c": 1, "e": [3]}}, "x": {"now": "an object"}, "new": None}
    patch = extra_patch(before, after)
    assert patched(before, patch) == after
    assert before == {"a": {"b": {"c": 1, "d": 2}}, "x": 1, "gone": {"y": 1}}  # untouched
