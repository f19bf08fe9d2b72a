"""Chroma node records: format 2 (five metadata keys, the fields packed as JSON) and format 1.

Format 1 is what stores written before format 2 hold (a key per field, the description as
the Chroma document). ``data/chroma_format_1/store`` is such a store, written by the code of
that time with ``data/chroma_format_1/make_store.py``; ``expected.json`` beside it is what
that code read back. Every test that opens it works on a copy.
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import chromadb
import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import GenerativeAgentsRetriever, MemoryNode, MemoryStream
from langchain_genmem.backends.chroma import (
    COMMIT_KEY,
    FORMAT_KEY,
    NODE_KEYS,
    ChromaBackend,
    _meta_of,
    _node_from,
)
from langchain_genmem.core.state import DEFAULT_LEXICAL_WEIGHT
from langchain_genmem.core.timeutil import to_epoch

LEGACY = Path(__file__).resolve().parents[2] / "data" / "chroma_format_1"
PERSONA = "玛丽亚 Lopez"
T0 = datetime(2023, 2, 13, 9, 0)
EMB = DeterministicFakeEmbedding(size=8)

NODES = [
    MemoryNode(node_id="node_1", node_count=1, type_count=1, type="event", depth=0,
               created=T0, expiration=T0 + timedelta(days=2, microseconds=7),
               last_accessed=T0 + timedelta(hours=3), subject="玛丽亚", predicate="读",
               object="物理书", description="玛丽亚 在咖啡馆读物理书 \"引号\" \\ 换行\n结束",
               embedding_key="玛丽亚 在咖啡馆读物理书 \"引号\" \\ 换行\n结束", poignancy=4.25,
               keywords=["物理", "咖啡馆"], filling=[]),
    MemoryNode(node_id="node_2", node_count=2, type_count=1, type="chat", depth=0,
               created=T0 + timedelta(minutes=1), expiration=None,
               last_accessed=T0 + timedelta(minutes=1), subject="玛丽亚", predicate="chat with",
               object="Klaus", description="对话", embedding_key="另一个键 key",
               poignancy=5, keywords=[], filling=[["Klaus", "你好"], ["玛丽亚", "hi"]]),
    MemoryNode(node_id="node_3", node_count=3, type_count=1, type="thought", depth=2,
               created=T0 + timedelta(minutes=2), expiration=T0 + timedelta(days=30),
               last_accessed=T0 + timedelta(minutes=2), subject="", predicate="",
               object="", description="想法 🙂", embedding_key="想法 🙂", poignancy=-1.5e-3,
               keywords=["想法"], filling=["node_1", "node_2", "plain text 文本"]),
]


@pytest.fixture
def legacy_copy(tmp_path) -> Path:
    """A writable copy of the format-1 store."""
    folder = tmp_path / "store"
    shutil.copytree(LEGACY / "store", folder)
    yield folder
    chromadb.api.client.SharedSystemClient.clear_system_cache()


def expected_legacy() -> dict:
    return json.loads((LEGACY / "expected.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("node", NODES, ids=lambda n: n.node_id)
def test_a_record_round_trips_every_field(node):
    meta = _meta_of(PERSONA, node)
    assert set(meta) == set(NODE_KEYS)
    assert _node_from(meta, None).model_dump() == node.model_dump()


def test_records_round_trip_through_chroma_with_no_document(tmp_path):
    backend = ChromaBackend(chromadb.PersistentClient(path=str(tmp_path)), "fmt")
    ids = [f"{PERSONA}::{n.node_id}" for n in NODES]
    backend.nodes.upsert(ids=ids, embeddings=np.ones((3, 8)),
                         metadatas=[_meta_of(PERSONA, n) for n in NODES])
    got = backend.nodes.get(ids=ids, include=["metadatas", "documents"])
    by_id = dict(zip(got["ids"], zip(got["metadatas"], got["documents"], strict=True),
                     strict=True))
    for node, record_id in zip(NODES, ids, strict=True):
        meta, document = by_id[record_id]
        assert document is None
        assert set(meta) == {"persona", "node_count", FORMAT_KEY} | (
            {"expiration"} if node.expiration else set()) | (
            {"last_accessed"} if node.last_accessed != node.created else set())
        assert _node_from(meta, document).model_dump() == node.model_dump()
    later = T0 + timedelta(days=1, microseconds=3)
    backend.write_access(PERSONA, {"node_2": to_epoch(later)})  # sets the absent key alone
    meta = backend.nodes.get(ids=[ids[1]], include=["metadatas"])["metadatas"][0]
    assert _node_from(meta, None).model_dump() == {**NODES[1].model_dump(),
                                                   "last_accessed": later}
    chromadb.api.client.SharedSystemClient.clear_system_cache()


def test_none_removes_a_key_so_a_rewritten_record_keeps_nothing_old(tmp_path):
    backend = ChromaBackend(chromadb.PersistentClient(path=str(tmp_path)), "fmt")
    record_id = f"{PERSONA}::node_1"
    first = {**_meta_of(PERSONA, NODES[0]), COMMIT_KEY: '{"node_count": 1}'}
    backend.nodes.upsert(ids=[record_id], embeddings=np.ones((1, 8)), metadatas=[first])
    again = NODES[0].model_copy(update={"expiration": None, "description": "新的"})
    backend.nodes.upsert(ids=[record_id], embeddings=np.ones((1, 8)),
                         metadatas=[_meta_of(PERSONA, again)])
    meta = backend.nodes.get(ids=[record_id], include=["metadatas"])["metadatas"][0]
    assert "expiration" not in meta and COMMIT_KEY not in meta
    assert _node_from(meta, None).model_dump() == again.model_dump()
    chromadb.api.client.SharedSystemClient.clear_system_cache()


def test_a_format_2_write_over_a_format_1_record_reads_as_format_2():
    legacy_meta = {"persona": PERSONA, "node_id": "node_1", "node_count": 1, "type_count": 9,
                   "type": "thought", "depth": 4, "created": 0.0, "last_accessed": 0.0,
                   "subject": "旧", "predicate": "旧", "object": "旧", "embedding_key": "旧",
                   "poignancy": 9.0, "keywords": "[\"旧\"]", "filling": "[]"}
    merged = {**legacy_meta, **{k: v for k, v in _meta_of(PERSONA, NODES[0]).items()
                                if v is not None}}
    assert _node_from(merged, "旧的描述").model_dump() == NODES[0].model_dump()


def _as_written(node):
    """A node's fields as the format-1 store was written (before conversation memories)."""
    assert node.conversation is None and node.speaker is None
    return node.model_dump(mode="json", exclude={"conversation", "speaker"})


def test_a_format_1_store_opens_and_reads_as_it_was_written(legacy_copy):
    expected = expected_legacy()
    stream = MemoryStream(PERSONA, path=str(legacy_copy), embeddings=EMB, clock=lambda: T0)
    state = stream.state.model_dump(mode="json")
    # settings added after the store was written read as their defaults
    later = {"relevance_mode": "dense", "lexical_weight": DEFAULT_LEXICAL_WEIGHT}
    assert state == {**expected["state"], **later}
    assert [_as_written(n) for n in reversed(stream.nodes())] == expected["nodes"]
    for node, vector in zip(reversed(stream.nodes()), expected["vectors"], strict=True):
        assert np.allclose(stream.vector(node.node_id), vector)
    found = stream.retrieve_relevant_events("nobody", "nothing", "咖啡馆")
    assert [n.node_id for n in found] == ["node_1"]


def test_a_format_1_store_takes_format_2_writes_and_reads_both(legacy_copy):
    expected = expected_legacy()
    clock = lambda: T0 + timedelta(days=3)  # noqa: E731 - node_1 expired by then
    stream = MemoryStream(PERSONA, path=str(legacy_copy), embeddings=EMB, clock=clock)
    single = stream.add_event("新的事件 after the upgrade", poignancy=3, keywords=["事件"],
                              expiration=T0 + timedelta(days=9))
    batch = stream.add_many([
        {"type": "event", "description": f"批量 {i}", "poignancy": 1 + i} for i in range(3)])
    state = stream.state
    stream.close()
    chromadb.api.client.SharedSystemClient.clear_system_cache()

    again = MemoryStream(PERSONA, path=str(legacy_copy), embeddings=EMB, clock=clock)
    old = [_as_written(n) for n in reversed(again.nodes())][:10]
    assert old == expected["nodes"]
    assert again.get(single.node_id) == single and single.node_id == "node_11"
    assert [again.get(n.node_id) for n in batch] == batch
    assert again.state == state
    assert again.state.kw_strength["event"]["事件"] == 5
    record = again.backend.nodes.get(ids=[f"{PERSONA}::node_11"], include=["metadatas"])
    assert FORMAT_KEY in record["metadatas"][0]
    docs = GenerativeAgentsRetriever(stream=again, k=20, update_access=False).invoke("事件")
    ids = {d.metadata["node_id"] for d in docs}
    assert "node_1" not in ids  # format 1 expiration honoured
    assert "node_11" in ids and "node_12" in ids


def test_a_format_2_store_reopens_with_expiration_honoured(tmp_path):
    stream = MemoryStream(PERSONA, path=str(tmp_path), embeddings=EMB, clock=lambda: T0)
    stream.add_many([
        {"type": "event", "description": "过期 expired", "poignancy": 9,
         "expiration": T0 + timedelta(hours=1)},
        {"type": "event", "description": "仍然有效 still valid", "poignancy": 1},
    ])
    stream.close()
    chromadb.api.client.SharedSystemClient.clear_system_cache()
    later = MemoryStream(PERSONA, path=str(tmp_path), embeddings=EMB,
                         clock=lambda: T0 + timedelta(hours=2))
    assert later.get("node_1").expiration == T0 + timedelta(hours=1)
    docs = GenerativeAgentsRetriever(stream=later, k=5, update_access=False).invoke("x")
    assert [d.metadata["node_id"] for d in docs] == ["node_2"]
    chromadb.api.client.SharedSystemClient.clear_system_cache()


class _BadScorer:
    """A custom importance scorer returning something that is no poignancy."""

    def score_many(self, persona, items):
        return [float("nan")] * len(items)


def test_a_scorer_returning_no_number_is_refused_and_nothing_is_stored():
    stream = MemoryStream(PERSONA, embeddings=EMB, clock=lambda: T0, importance=_BadScorer())
    stream.add_event("有分数 scored", poignancy=2)
    with pytest.raises(ValueError, match="poignancy"):
        stream.add_event("没有分数 unscored")
    assert len(stream) == 1 and stream.state.node_count == 1
