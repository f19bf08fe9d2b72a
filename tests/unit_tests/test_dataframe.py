"""pandas views: get_memory_df and retrieve_memories (the Python design's views)."""

from __future__ import annotations

import sys
from datetime import datetime, timedelta

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem.core.errors import ConfigurationError, ValidationError
from langchain_genmem.core.nodes import MemoryNode
from langchain_genmem.dataframe import RESULT_COLUMNS, get_memory_df, retrieve_memories
from langchain_genmem.interop import FixedClock
from langchain_genmem.memory.stream import MemoryStream
from langchain_genmem.retrieval.retrievers import GenerativeAgentsRetriever

START = datetime(2023, 2, 13, 8, 0, 0)
NOW = datetime(2023, 2, 13, 20, 0, 0)
FAKE = DeterministicFakeEmbedding(size=32)


@pytest.fixture
def stream() -> MemoryStream:
    s = MemoryStream("Maria Lopez", embeddings=FAKE, clock=FixedClock(NOW))
    items = [
        {"type": "event", "description": f"Maria Lopez does thing {i}", "poignancy": 1 + i % 9,
         "created": START + timedelta(minutes=30 * i), "predicate": "do", "object": f"thing {i}"}
        for i in range(12)
    ]
    items.append({"type": "thought", "description": "Maria Lopez likes physics", "poignancy": 8,
                  "created": START + timedelta(hours=7), "filling": ["node_1", "node_2"]})
    items.append({"type": "thought", "description": "Maria Lopez has a crush on Klaus",
                  "poignancy": 9, "created": START + timedelta(hours=8), "filling": ["node_13"]})
    items.append({"type": "chat", "description": "a chat", "poignancy": 3, "created": START,
                  "filling": [["Maria Lopez", "hi"], ["Klaus Mueller", "你好"]]})
    s.add_many(items)
    return s


def test_memory_df_has_one_row_per_node_with_every_field(stream: MemoryStream) -> None:
    df = get_memory_df(stream)
    assert len(df) == len(stream) == 15
    assert list(df.columns) == list(MemoryNode.model_fields)
    assert list(df["node_id"]) == [f"node_{i}" for i in range(1, 16)]  # oldest first
    assert df.loc[13, "depth"] == 2 and df.loc[14, "type"] == "chat"
    assert df.loc[14, "filling"] == [["Maria Lopez", "hi"], ["Klaus Mueller", "你好"]]
    assert df.loc[0, "created"] == START and df.loc[0, "last_accessed"] == START
    assert df.groupby("type").size().to_dict() == {"chat": 1, "event": 12, "thought": 2}
    assert "embedding" not in df


def test_memory_df_can_carry_vectors(stream: MemoryStream) -> None:
    df = get_memory_df(stream, vectors=True)
    np.testing.assert_array_equal(df.loc[4, "embedding"], stream.vector("node_5"))


def test_memory_df_of_an_empty_stream_has_the_columns() -> None:
    df = get_memory_df(MemoryStream("x", embeddings=FAKE))
    assert len(df) == 0 and "description" in df.columns


def test_retrieve_memories_ranks_like_the_retriever(stream: MemoryStream) -> None:
    retriever = GenerativeAgentsRetriever(stream=stream, k=4, update_access=False)
    docs = retriever.invoke("physics")
    df = retrieve_memories(retriever, "physics")
    assert list(df.columns) == list(RESULT_COLUMNS)
    assert list(df["node_id"]) == [d.metadata["node_id"] for d in docs]
    assert list(df["description"]) == [d.page_content for d in docs]
    for col in ("score", "recency", "relevance", "importance", "poignancy"):
        assert list(df[col]) == [d.metadata[col] for d in docs]
    assert list(df["score"]) == sorted(df["score"], reverse=True)
    assert len(retrieve_memories(retriever, "physics", k=2)) == 2


def test_filter_applies_before_the_top_k(stream: MemoryStream) -> None:
    peek = GenerativeAgentsRetriever(stream=stream, k=30, update_access=False)
    ranked = [d.metadata for d in peek.invoke("physics")]
    events = [m["node_id"] for m in ranked if m["type"] == "event" and m["poignancy"] >= 5]
    retriever = GenerativeAgentsRetriever(stream=stream, k=3)
    df = retrieve_memories(retriever, "physics", filter='type == "event" and poignancy >= 5')
    assert list(df["node_id"]) == events[:3]
    assert list(df["rank"]) == [0, 1, 2]
    touched = {n.node_id for n in stream.nodes() if n.last_accessed == NOW}
    assert touched == set(events[:3])  # only what was returned, at the stream's clock
    assert (df["last_accessed"] == NOW).all()


def test_without_filter_access_times_follow_the_retriever(stream: MemoryStream) -> None:
    retrieve_memories(GenerativeAgentsRetriever(stream=stream, k=2, update_access=False), "x")
    assert not any(n.last_accessed == NOW for n in stream.nodes())
    df = retrieve_memories(GenerativeAgentsRetriever(stream=stream, k=2), "x")
    assert {n.node_id for n in stream.nodes() if n.last_accessed == NOW} == set(df["node_id"])


def test_filter_errors_come_before_retrieval(stream: MemoryStream) -> None:
    retriever = GenerativeAgentsRetriever(stream=stream, k=3)
    with pytest.raises(ValidationError, match="unknown column 'nope'"):
        retrieve_memories(retriever, "x", filter="nope > 1")
    with pytest.raises(ValidationError, match="unexpected '.'"):
        retrieve_memories(retriever, "x", filter="score.__class__ > 1")
    assert not any(n.last_accessed == NOW for n in stream.nodes())


def test_filter_on_an_empty_stream_gives_an_empty_table() -> None:
    retriever = GenerativeAgentsRetriever(stream=MemoryStream("x", embeddings=FAKE))
    df = retrieve_memories(retriever, "x", filter="relevance > 0.5")
    assert len(df) == 0 and list(df.columns) == list(RESULT_COLUMNS)


def test_missing_pandas_says_how_to_install(
    stream: MemoryStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ConfigurationError, match=r"pip install 'langchain-genmem\[pandas\]'"):
        get_memory_df(stream)
    with pytest.raises(ConfigurationError, match="pandas"):
        retrieve_memories(GenerativeAgentsRetriever(stream=stream), "x")


# --- importance on the design's scale -------------------------------------------------------------


def test_unit_scale_divides_the_poignancy_column_and_stores_nothing(stream: MemoryStream) -> None:
    stored = [n.poignancy for n in stream.nodes()[::-1]]
    df = get_memory_df(stream, importance_scale="unit")
    assert list(df["poignancy"]) == [p / 10 for p in stored]
    assert df["poignancy"].between(0.1, 1.0).all()
    assert list(get_memory_df(stream)["poignancy"]) == stored
    assert [n.poignancy for n in stream.nodes()[::-1]] == stored


def test_unit_scale_applies_before_the_filter(stream: MemoryStream) -> None:
    retriever = GenerativeAgentsRetriever(stream=stream, k=30, update_access=False)
    plain = retrieve_memories(retriever, "physics", filter="poignancy >= 8")
    unit = retrieve_memories(retriever, "physics", filter="poignancy >= 0.8",
                             importance_scale="unit")
    assert list(unit["node_id"]) == list(plain["node_id"]) and len(unit) == 4
    assert list(unit["poignancy"]) == [p / 10 for p in plain["poignancy"]]
    assert list(unit["importance"]) == list(plain["importance"])  # the score's component
    unfiltered = retrieve_memories(retriever, "physics", k=3, importance_scale="unit")
    assert list(unfiltered["poignancy"]) == [
        d.metadata["poignancy"] / 10 for d in retriever.invoke("physics", k=3)
    ]


def test_an_unknown_scale_is_refused(stream: MemoryStream) -> None:
    retriever = GenerativeAgentsRetriever(stream=stream)
    with pytest.raises(ValidationError, match="importance_scale: expected 'poignancy' or 'unit'"):
        get_memory_df(stream, importance_scale="percent")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="importance_scale"):
        retrieve_memories(retriever, "x", importance_scale=10)  # type: ignore[arg-type]
    assert not any(n.last_accessed == NOW for n in stream.nodes())


@pytest.mark.parametrize("relevance", ["dense", "lexical", "hybrid"])
@pytest.mark.parametrize("expression", [None, 'type == "event"'])
def test_every_part_of_the_relevance_is_a_column(
    stream: MemoryStream, relevance: str, expression: str | None
) -> None:
    stream.add_event("玛丽亚在霍布斯咖啡馆学习物理", poignancy=4, created=NOW)
    retriever = GenerativeAgentsRetriever(stream=stream, k=4, update_access=False,
                                          relevance=relevance)
    docs = {d.metadata["node_id"]: d.metadata for d in retriever.invoke("物理 physics", k=20)}
    df = retrieve_memories(retriever, "物理 physics", filter=expression)
    assert len(df) == 4
    for row in df.to_dict("records"):
        for part in ("dense", "lexical", "cosine", "bm25", "lexical_share"):
            assert row[part] == docs[row["node_id"]][part], part
