"""The Python design's test cases, restated against this package's API.

The Python design sketches ``test_memory_creation``, ``test_reflection_creation`` and
``test_memory_retrieval`` ("test the retrieval algorithm's correctness"). Its ``Memory`` is a
node added to a :class:`~langchain_genmem.MemoryStream` (``"observation"`` is an event),
its ``Reflection`` a thought written by
:func:`~langchain_genmem.reflection.generate_reflection` (pointers are node numbers), its
importance the poignancy shown with ``importance_scale="unit"``.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from langchain_genmem import GenerativeAgentsRetriever, ImportanceScorer, MemoryStream
from langchain_genmem.core.nodes import node_number
from langchain_genmem.core.timeutil import SimulationClock as Clock
from langchain_genmem.dataframe import get_memory_df, retrieve_memories
from langchain_genmem.llm.prompts import DEFAULT_BATCH_TRIPLE_PROMPT
from langchain_genmem.reflection import generate_reflection
from tests.support.reflection_script import (
    NOW,
    PERSONA,
    RATINGS,
    T0,
    TRIPLES,
    ScriptedChatModel,
    new_stream,
    scripted,
    scripted_stream,
)


@pytest.mark.parametrize("description", ["test description", "测试描述：玛丽亚在准备考试"])
def test_memory_creation(description):
    model = ScriptedChatModel(rules=[(RATINGS, "Rating: 7")])
    stream = new_stream(Clock(T0))
    stream.importance = ImportanceScorer(model)
    memory = stream.add_event(description)
    assert memory.description == description
    assert memory.type == "event"  # the Python design's "observation"
    [importance] = get_memory_df(stream, importance_scale="unit")["poignancy"]
    assert 0 <= importance <= 1 and importance == 0.7  # rated by the model, shown / 10
    assert stream.get(memory.node_id).poignancy == 7  # stored as the original stores it
    assert len(model.calls) == 1


def test_reflection_creation_with_pointers():
    # the Python design: Reflection("test insight", ..., [1, 2, 3]) has memory_type "reflection" and
    # pointers [1, 2, 3]; here a thought whose evidence is node_1..node_3
    stream = scripted_stream()
    model = scripted()
    [thought] = generate_reflection(stream, [[("test insight", [1, 2, 3])]], model)
    assert thought.type == "thought" and thought.description == "test insight"
    assert thought.evidence == ["node_1", "node_2", "node_3"]
    assert [node_number(i) for i in thought.evidence] == [1, 2, 3]
    assert stream.get(thought.node_id) == thought
    assert thought.depth == 1 and thought.poignancy == 6
    assert thought.spo == (PERSONA, "think about", "topic 1")
    assert thought.created == NOW and thought.expiration == NOW + timedelta(days=30)
    assert model.sent(TRIPLES) == [("", DEFAULT_BATCH_TRIPLE_PROMPT.format(
        n=1, statements="1. test insight\n"))]
    assert len(model.sent(RATINGS)) == 1 and len(model.calls) == 2


class TableEmbeddings(Embeddings):
    """Fixed vectors by text, so that relevance can be computed by hand."""

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.table[text] for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.table[text]


# (type, description, vector, poignancy, hours after T0)
RETRIEVAL_MEMORIES = [
    ("event", "Maria Lopez is studying physics", [1.0, 0.0, 0.0], 8, 0),
    ("event", "Maria Lopez is reading about quantum mechanics", [0.9, 0.1, 0.0], 3, 1),
    ("event", "玛丽亚在咖啡馆吃午饭", [0.0, 1.0, 0.0], 2, 2),
    ("event", "Klaus Mueller is writing a research paper", [0.3, 0.3, 0.9], 6, 3),
    ("event", "Isabella Rodriguez is planning a party", [0.0, 0.2, 1.0], 4, 4),
    ("thought", "Maria Lopez loves physics", [0.95, 0.0, 0.1], 7, 5),
    ("event", "Maria Lopez is doing physics homework", [0.7, 0.6, 0.1], 5, 6),
]
QUERY = "physics"


def by_hand(k: int) -> list[tuple[str, float, float]]:
    """The Python design's algorithm, step by step: (node id, score, relevance) of the top k."""
    now = T0 + timedelta(hours=10)
    query = np.array([1.0, 0.0, 0.0])
    rows = []
    for i, (_, _, vector, poignancy, hours) in enumerate(RETRIEVAL_MEMORIES, 1):
        v = np.array(vector)
        elapsed = (now - (T0 + timedelta(hours=hours))).total_seconds() / 3600
        relevance = float(v @ query / (np.linalg.norm(v) * np.linalg.norm(query)))
        rows.append((f"node_{i}", 0.99 ** elapsed, relevance, float(poignancy)))

    def normalised(values: list[float]) -> list[float]:
        low, high = min(values), max(values)
        return [(x - low) / (high - low) for x in values]

    ids = [r[0] for r in rows]
    recency, relevance, importance = (normalised([r[j] for r in rows]) for j in (1, 2, 3))
    scores = [0.5 * a + 3 * b + 2 * c for a, b, c in zip(recency, relevance, importance,
                                                          strict=True)]
    kept = [(i, s, r) for i, s, r in zip(ids, scores, relevance, strict=True) if r > 0.5]
    return sorted(kept, key=lambda row: -row[1])[:k]


def test_memory_retrieval():
    table = {text: vector for _, text, vector, *_ in RETRIEVAL_MEMORIES}
    table[QUERY] = [1.0, 0.0, 0.0]
    clock = Clock(T0 + timedelta(hours=10))
    stream = MemoryStream(PERSONA, embeddings=TableEmbeddings(table), clock=clock)
    stream.add_many([
        {"type": kind, "description": text, "poignancy": poignancy,
         "created": T0 + timedelta(hours=hours)}
        for kind, text, _, poignancy, hours in RETRIEVAL_MEMORIES
    ])
    retriever = GenerativeAgentsRetriever(stream=stream, k=3)
    df = retrieve_memories(retriever, QUERY, filter="relevance > 0.5", importance_scale="unit")
    expected = by_hand(3)
    assert list(df["node_id"]) == [row[0] for row in expected]
    assert list(df["score"]) == pytest.approx([row[1] for row in expected])
    assert list(df["relevance"]) == pytest.approx([row[2] for row in expected])
    assert (df["relevance"] > 0.5).all() and list(df["rank"]) == [0, 1, 2]
    stored = {n.node_id: n.poignancy for n in stream.nodes()}
    assert list(df["poignancy"]) == [stored[i] / 10 for i in df["node_id"]]
    # the retrieved memories (only those) were accessed now
    accessed = {n.node_id for n in stream.nodes() if n.last_accessed == clock.now}
    assert accessed == set(df["node_id"])
    assert len(by_hand(30)) < len(RETRIEVAL_MEMORIES)  # the filter left memories out
