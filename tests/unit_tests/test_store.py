"""MemoryStream write rules, reads, validation and all-or-nothing writes.

Tests taking the `stream` or `store` fixture run on every backend (Chroma and PostgreSQL).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

from langchain_genmem import (
    EmbeddingDimensionError,
    GenMemError,
    MemoryStream,
    StorageError,
    UnknownNodeError,
    ValidationError,
)
from langchain_genmem.backends.chroma import ChromaBackend
from langchain_genmem.core.state import DEFAULT_LEXICAL_WEIGHT, StreamState

T0 = datetime(2023, 2, 13, 9, 0, 0)


class CountingEmbeddings(Embeddings):
    """Deterministic vectors that count how many texts were embedded."""

    def __init__(self, size: int = 8) -> None:
        self.inner = DeterministicFakeEmbedding(size=size)
        self.texts: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


@pytest.fixture
def clock():
    now = [T0]
    tick = lambda: now[0]  # noqa: E731
    tick.now = now  # type: ignore[attr-defined]
    return tick


@pytest.fixture
def stream(store, clock) -> MemoryStream:
    return store.open("Maria Lopez", embeddings=CountingEmbeddings(), clock=clock)


def event(stream: MemoryStream, description: str, **kw):
    kw.setdefault("poignancy", 3)
    return stream.add_event(description, **kw)


def test_ids_counts_and_newest_first(stream):
    e1 = event(stream, "Maria Lopez is waking up", predicate="wake", object="up")
    c1 = stream.add_chat("conversing about physics", poignancy=4,
                         filling=[["Maria Lopez", "Hi"], ["Klaus Mueller", "你好"]])
    t1 = stream.add_thought("Maria Lopez likes mornings", poignancy=5, evidence=[e1.node_id])
    e2 = event(stream, "Maria Lopez is eating breakfast", predicate="eat", object="breakfast")
    assert [n.node_id for n in (e1, c1, t1, e2)] == ["node_1", "node_2", "node_3", "node_4"]
    assert [n.node_count for n in (e1, c1, t1, e2)] == [1, 2, 3, 4]
    assert [n.type_count for n in (e1, c1, t1, e2)] == [1, 1, 1, 2]
    assert [n.node_id for n in stream.nodes()] == ["node_4", "node_3", "node_2", "node_1"]
    assert [n.node_id for n in stream.nodes("event")] == ["node_4", "node_1"]
    assert len(stream) == 4
    assert stream.get("node_2").filling == [["Maria Lopez", "Hi"], ["Klaus Mueller", "你好"]]
    assert stream.state.type_count == {"event": 2, "thought": 1, "chat": 1}


def test_thought_depth_is_one_more_than_deepest_evidence(stream):
    e = event(stream, "e")
    t1 = stream.add_thought("t1", poignancy=1, evidence=[e.node_id])
    t2 = stream.add_thought("t2", poignancy=1, evidence=[e.node_id, t1.node_id])
    t3 = stream.add_thought("t3", poignancy=1, evidence=[t2.node_id, e.node_id])
    bare = stream.add_thought("no evidence", poignancy=1)
    assert [t1.depth, t2.depth, t3.depth, bare.depth] == [1, 2, 3, 1]
    assert e.depth == 0
    assert t3.filling == ["node_3", "node_1"]
    assert bare.filling is None


def test_evidence_may_point_into_the_same_batch(stream):
    nodes = stream.add_many([
        {"type": "event", "description": "a", "poignancy": 1},
        {"type": "thought", "description": "b", "poignancy": 1, "evidence": ["node_1"]},
        {"type": "thought", "description": "c", "poignancy": 1, "evidence": ["node_2"]},
    ])
    assert [n.depth for n in nodes] == [0, 1, 2]


def test_defaults_created_last_accessed_keywords_subject(stream, clock):
    e = stream.add_event("the cafe counter is busy", subject="the Ville:Hobbs Cafe:counter",
                         predicate="is", object="the Ville:Hobbs Cafe:busy", poignancy=2)
    assert e.created == T0 and e.last_accessed == T0
    assert e.embedding_key == e.description
    assert e.keywords == ["counter", "busy"]  # the part after the last ':' as in perceive.py
    t = stream.add_thought("Maria Lopez plans to study", predicate="plan", object="study",
                           poignancy=4)
    assert t.subject == "Maria Lopez" and t.keywords == ["Maria Lopez", "plan", "study"]


def test_shared_embedding_key_shares_one_vector_and_one_embedding_call(stream):
    emb = stream.embeddings
    a = event(stream, "Maria Lopez is sleeping", embedding_key="sleeping")
    b = event(stream, "Klaus Mueller is sleeping", embedding_key="sleeping")
    c = event(stream, "Isabella is sleeping", embedding_key="sleeping")
    assert emb.texts == ["sleeping"]
    assert np.array_equal(stream.vector(a.node_id), stream.vector(b.node_id))
    assert np.array_equal(stream.vector(c.node_id), stream.vector(a.node_id))
    assert list(stream.embeddings_by_key()) == ["sleeping"]


def test_keyword_index_lowercases_on_write_and_lookup(stream):
    e1 = event(stream, "Maria Lopez is studying", subject="Maria Lopez", predicate="study",
               object="Physics")
    e2 = event(stream, "Klaus is studying", subject="Klaus Mueller", predicate="study",
               object="physics")
    t1 = stream.add_thought("Maria likes physics", subject="MARIA LOPEZ", predicate="like",
                            object="physics", poignancy=2)
    assert stream.keyword_index["event"]["physics"] == [e2.node_id, e1.node_id]
    found = stream.retrieve_relevant_events("maria lopez", "nothing", "PHYSICS")
    assert [n.node_id for n in found] == [e2.node_id, e1.node_id]  # newest first, no repeats
    thoughts = stream.retrieve_relevant_thoughts("Maria Lopez", "x", "y")
    assert [n.node_id for n in thoughts] == [t1.node_id]
    assert stream.retrieve_relevant_events("nobody", "", "") == []


def test_keyword_strength_rules(stream):
    event(stream, "bed is idle", subject="bed", predicate="is", object="idle")
    event(stream, "Maria is sleeping", subject="Maria Lopez", predicate="sleep", object="bed")
    stream.add_chat("chat", subject="Maria Lopez", predicate="chat with", object="Klaus",
                    poignancy=2)
    stream.add_thought("Maria sleeps well", subject="Maria Lopez", predicate="sleep",
                       object="well", poignancy=2)
    # "is idle" does not count; chats have no strengths
    assert stream.kw_strength == {
        "event": {"maria lopez": 1, "bed": 1},
        "thought": {"maria lopez": 1, "sleep": 1, "well": 1},
    }


def test_trigger_counters_follow_event_poignancy(stream):
    assert stream.state.importance_trigger_curr == 150
    event(stream, "a", poignancy=7)
    event(stream, "b", poignancy=2)
    stream.add_thought("c", poignancy=9)  # thoughts do not lower the trigger
    state = stream.state
    assert state.importance_trigger_curr == 141 and state.importance_ele_n == 2
    stream.update_settings(importance_trigger_curr=0)
    assert stream.state.reflection_due
    stream.reset_reflection_trigger()
    assert stream.state.importance_trigger_curr == 150 and stream.state.importance_ele_n == 0


def test_chinese_memories_round_trip_through_the_store(store, clock):
    s = store.open("玛丽亚", embeddings=CountingEmbeddings(), clock=clock)
    e = s.add_event("玛丽亚在咖啡馆学习物理", subject="玛丽亚", predicate="学习", object="物理",
                    poignancy=4)
    s.add_chat("和克劳斯聊天", poignancy=3, filling=[["玛丽亚", "你好！"], ["克劳斯", "早上好"]])
    s.close()
    again = store.open("玛丽亚", embeddings=CountingEmbeddings(), clock=clock)
    assert again.get(e.node_id) == e
    assert again.get("node_2").filling == [["玛丽亚", "你好！"], ["克劳斯", "早上好"]]
    assert [n.node_id for n in again.retrieve_relevant_events("玛丽亚", "", "")] == ["node_1"]
    assert again.kw_strength["event"] == {"玛丽亚": 1, "物理": 1}


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ({"type": "event", "description": "", "poignancy": 1}, "description"),
        ({"type": "event", "description": "   ", "poignancy": 1}, "description"),
        ({"type": "memo", "description": "x", "poignancy": 1}, "type"),
        ({"type": "event", "description": "x", "poignancy": float("nan")}, "poignancy"),
        ({"type": "event", "description": "x", "poignancy": float("inf")}, "poignancy"),
        ({"type": "event", "description": "x", "poignancy": "high"}, "poignancy"),
        ({"type": "event", "description": "x", "poignancy": True}, "poignancy"),
        ({"type": "event", "description": "x"}, "poignancy"),
        ({"type": "event", "description": "x", "poignancy": 1, "colour": "red"}, "colour"),
        ({"type": "chat", "description": "x", "poignancy": 1, "filling": ["hi"]}, "filling"),
        ({"type": "event", "description": "x", "poignancy": 1, "evidence": ["node_1"]}, "evidence"),
        ({"type": "event", "description": "x", "poignancy": 1, "embedding": [1.0, float("nan")]},
         "embedding"),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(stream, item, field):
    event(stream, "kept")
    before = (len(stream), stream.state)
    with pytest.raises(ValidationError) as info:
        stream.add_many([{"type": "event", "description": "fine", "poignancy": 1}, item])
    assert field in str(info.value)
    assert isinstance(info.value, GenMemError)
    assert (len(stream), stream.state) == before


def test_unknown_evidence_id_is_a_clear_error(stream):
    event(stream, "e")
    with pytest.raises(UnknownNodeError, match=r"items\[0\]\.evidence.*node_7"):
        stream.add_thought("t", poignancy=1, evidence=["node_7"])
    with pytest.raises(UnknownNodeError, match="node_x"):
        stream.add_thought("t", poignancy=1, evidence=["node_x"])
    with pytest.raises(UnknownNodeError):
        stream.get("node_99")
    assert len(stream) == 1


def test_wrong_vector_size_is_a_clear_error_and_store_unchanged(stream):
    event(stream, "first")
    with pytest.raises(EmbeddingDimensionError, match="expected vectors of size 8, got 3"):
        stream.add_event("odd", poignancy=1, embedding=[1.0, 2.0, 3.0])
    assert len(stream) == 1


def test_wrong_dimension_against_an_existing_collection(store):
    s8 = store.open("A", embeddings=DeterministicFakeEmbedding(size=8))
    s8.add_event("a", poignancy=1)
    s16 = store.open("A", embeddings=DeterministicFakeEmbedding(size=16))
    with pytest.raises(EmbeddingDimensionError):
        s16.add_event("b", poignancy=1)
    other = store.open("B", embeddings=DeterministicFakeEmbedding(size=16))
    with pytest.raises(EmbeddingDimensionError):  # the collection/table holds 8-d vectors
        other.add_event("b", poignancy=1)
    assert len(store.open("A", embeddings=DeterministicFakeEmbedding(size=8))) == 1
    assert len(store.open("B", embeddings=DeterministicFakeEmbedding(size=8))) == 0


def test_add_many_pages_chroma_and_is_one_call(tmp_path):
    s = MemoryStream("bulk", path=tmp_path, embeddings=DeterministicFakeEmbedding(size=4))
    s.backend.batch = 7  # page far below Chroma's limit to exercise paging
    rng = np.random.default_rng(0)
    items = [{"type": "event", "description": f"m{i}", "poignancy": 1 + i % 10,
              "embedding": rng.standard_normal(4)} for i in range(50)]
    nodes = s.add_many(items)
    assert [n.node_id for n in nodes] == [f"node_{i}" for i in range(1, 51)]
    again = MemoryStream("bulk", path=tmp_path, embeddings=DeterministicFakeEmbedding(size=4))
    assert len(again) == 50
    assert np.allclose(again.vector("node_50"), items[49]["embedding"], atol=1e-6)


class FailingCollection:
    """Wraps a Chroma collection and fails the n-th upsert."""

    def __init__(self, inner, fail_at: int) -> None:
        self.inner, self.fail_at, self.calls = inner, fail_at, 0

    def upsert(self, **kw):
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("disk full")
        return self.inner.upsert(**kw)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.parametrize("fail_at", [1, 3])
def test_failed_write_leaves_nothing_half_written(tmp_path, fail_at):
    s = MemoryStream("atomic", path=tmp_path, embeddings=DeterministicFakeEmbedding(size=4))
    s.add_event("kept", poignancy=2, keywords=["kept"])
    before = s.state
    backend: ChromaBackend = s.backend  # type: ignore[assignment]
    backend.batch = 10
    backend.nodes = FailingCollection(backend.nodes, fail_at)
    items = [{"type": "event", "description": f"n{i}", "poignancy": 5, "keywords": ["lost"]}
             for i in range(25)]
    with pytest.raises(StorageError, match="disk full"):
        s.add_many(items)
    assert len(s) == 1 and s.state == before
    assert s.retrieve_relevant_events("lost", "", "") == []
    backend.nodes = backend.nodes.inner
    # orphans of the failed write were removed; a fresh reader sees only the committed node
    fresh = MemoryStream("atomic", path=tmp_path, embeddings=DeterministicFakeEmbedding(size=4))
    assert len(fresh) == 1 and fresh.state == before
    assert backend.nodes.count() == 1
    # and the next write reuses the ids cleanly
    assert s.add_event("next", poignancy=1).node_id == "node_2"


def test_failed_state_write_removes_the_nodes(tmp_path):
    s = MemoryStream("atomic2", path=tmp_path, embeddings=DeterministicFakeEmbedding(size=4))
    backend: ChromaBackend = s.backend  # type: ignore[assignment]
    backend.states = FailingCollection(backend.states, 1)
    with pytest.raises(StorageError):
        s.add_event("lost", poignancy=1)
    assert len(s) == 0 and backend.nodes.count() == 0


def test_missing_poignancy_uses_the_configured_scorer(clock):
    class Scorer:
        def __init__(self):
            self.seen = []

        def score_many(self, persona, items):
            self.seen.append((persona, list(items)))
            return [float(len(d)) for _, d in items]

        async def ascore_many(self, persona, items):
            return self.score_many(persona, items)

    scorer = Scorer()
    s = MemoryStream("P", embeddings=CountingEmbeddings(), clock=clock, importance=scorer)
    nodes = s.add_many([
        {"type": "event", "description": "abc"},
        {"type": "event", "description": "given", "poignancy": 9},
        {"type": "chat", "description": "hello"},
    ])
    assert [n.poignancy for n in nodes] == [3.0, 9.0, 5.0]
    assert scorer.seen == [("P", [("event", "abc"), ("chat", "hello")])]  # one batched call


async def test_async_add_many(stream):
    nodes = await stream.aadd_many([
        {"type": "event", "description": "异步事件", "poignancy": 2},
        {"type": "thought", "description": "异步想法", "poignancy": 3, "evidence": ["node_1"]},
    ])
    assert [n.node_id for n in nodes] == ["node_1", "node_2"] and nodes[1].depth == 1


def test_settings_are_validated_and_persisted(store):
    s = store.open("S", embeddings=DeterministicFakeEmbedding(size=4))
    s.update_settings(recency_decay=0.995, relevance_w=2)
    with pytest.raises(ValidationError, match="colour"):
        s.update_settings(colour=1)
    with pytest.raises(ValidationError, match="recency_w"):
        s.update_settings(recency_w=float("nan"))
    again = store.open("S", embeddings=DeterministicFakeEmbedding(size=4))
    assert again.state.recency_decay == 0.995 and again.state.relevance_w == 2


def test_relevance_settings_default_validate_and_persist(store):
    s = store.open("玛丽亚", embeddings=DeterministicFakeEmbedding(size=4))
    assert (s.state.relevance_mode, s.state.lexical_weight) == ("dense", DEFAULT_LEXICAL_WEIGHT)
    s.update_settings(relevance_mode="hybrid", lexical_weight=0.25)
    for bad in ({"relevance_mode": "bm25"}, {"lexical_weight": 1.5}, {"lexical_weight": "x"},
                {"relevance_mode": "lexical", "lexical_weight": -0.1}):
        with pytest.raises(ValidationError, match=next(reversed(bad))):
            s.update_settings(**bad)
    again = store.open("玛丽亚", embeddings=DeterministicFakeEmbedding(size=4))
    assert (again.state.relevance_mode, again.state.lexical_weight) == ("hybrid", 0.25)


def test_a_state_record_from_before_the_relevance_settings_loads_with_the_defaults():
    old = StreamState().model_dump(exclude={"relevance_mode", "lexical_weight"})
    state = StreamState.model_validate_json(json.dumps(old))
    assert (state.relevance_mode, state.lexical_weight) == ("dense", DEFAULT_LEXICAL_WEIGHT)


def test_mark_accessed_is_exact_at_once_and_flushed(store, clock):
    s = store.open("A", embeddings=DeterministicFakeEmbedding(size=4), clock=clock,
                   flush_interval=3600)
    e = s.add_event("e", poignancy=1)
    later = T0 + timedelta(hours=5)
    s.mark_accessed([e.node_id], later)
    assert s.get(e.node_id).last_accessed == later
    reader = store.open("A", embeddings=DeterministicFakeEmbedding(size=4))
    assert reader.get(e.node_id).last_accessed == T0  # not flushed yet
    assert s.flush() == 1
    reader = store.open("A", embeddings=DeterministicFakeEmbedding(size=4))
    assert reader.get(e.node_id).last_accessed == later


def test_persona_must_be_named():
    with pytest.raises(ValidationError, match="persona"):
        MemoryStream("  ")


def test_in_memory_streams_are_separate():
    a = MemoryStream("Same", embeddings=DeterministicFakeEmbedding(size=4))
    b = MemoryStream("Same", embeddings=DeterministicFakeEmbedding(size=4))
    a.add_event("only in a", poignancy=1)
    assert len(b) == 0 and not b.refresh()


def test_text_in_a_thought_filling_is_kept_as_data_but_evidence_must_be_ids(stream):
    e = event(stream, "e")
    t = stream.add_thought("t", poignancy=1, filling=[e.node_id, "a note"])
    assert t.filling == ["node_1", "a note"] and t.depth == 1
    with pytest.raises(UnknownNodeError, match="a note"):
        stream.add_thought("u", poignancy=1, evidence=["a note"])
    with pytest.raises(UnknownNodeError, match="node_9"):
        stream.add_thought("u", poignancy=1, filling=["node_9"])


def test_a_path_that_is_a_file_or_cannot_be_made_is_a_clear_error(tmp_path):
    notes = tmp_path / "笔记.txt"
    notes.write_text("玛丽亚的笔记", "utf-8")
    for path, says in [(notes, "is a file"), (notes / "store", "cannot create the folder"),
                       (str(notes), "is a file")]:
        with pytest.raises(ValidationError, match=says) as caught:
            MemoryStream("玛丽亚", path=path, embeddings=DeterministicFakeEmbedding(size=8))
        assert isinstance(caught.value, GenMemError) and caught.value.field == "path"
        assert str(caught.value).startswith("path: ") and str(notes) in str(caught.value)
    assert notes.read_text("utf-8") == "玛丽亚的笔记"
