"""The node cache's kept access order: patched between retrievals, always the full sort's."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream
from langchain_genmem.core.timeutil import to_epoch
from langchain_genmem.numerics.scoring import Candidates, tie_order

T0 = datetime(2024, 5, 1, 8)


def full_sort(stream: MemoryStream) -> list[int]:
    cache = stream.columns
    static = cache.candidates()
    rows = static.rows
    c = Candidates(cache.last_accessed[rows], static.type_code, static.node_count,
                   static.poignancy, np.zeros(rows.size))
    return rows[tie_order(c)].tolist()


def fill(stream: MemoryStream, rng: np.random.Generator, n: int, start: int) -> None:
    stream.add_many([
        {"type": str(rng.choice(["event", "thought", "chat"], p=[0.7, 0.2, 0.1])),
         "description": f"记忆 {start + i}", "poignancy": int(rng.integers(1, 11)),
         # few distinct times: long runs of equal access times
         "created": T0 + timedelta(minutes=int(rng.integers(0, 4))),
         "embedding": rng.standard_normal(8).astype(np.float32)}
        for i in range(n)
    ])


@pytest.mark.parametrize("seed", range(4))
def test_kept_order_equals_a_full_sort_after_accesses_adds_and_merges(seed):
    rng = np.random.default_rng(seed)
    clock = {"now": T0 + timedelta(hours=1)}
    stream = MemoryStream("p", clock=lambda: clock["now"])
    fill(stream, rng, 300, 0)
    cache = stream.columns
    assert cache.access_order(cache.candidates()).tolist() == full_sort(stream)
    for step in range(30):
        action = step % 3
        if action == 0:  # a retrieval's touch, some at the same time as earlier ones
            rows = rng.choice(cache.n, 20, replace=False)
            stream.record_access(rows, (T0 + timedelta(hours=int(rng.integers(1, 3)))).timestamp())
        elif action == 1:
            fill(stream, rng, int(rng.integers(1, 5)), 1000 + step * 10)
        else:  # access times loaded from another process (some older: ignored)
            rows = rng.choice(cache.n, 5, replace=False)
            cache.merge_access({int(r) + 1: T0.timestamp() + float(rng.integers(0, 9000))
                                for r in rows})
        assert cache.access_order(cache.candidates()).tolist() == full_sort(stream), step
    assert cache._order is not None  # it was patched, not dropped


def test_reverie_retrieval_with_the_kept_order_equals_a_fresh_sort():
    rng = np.random.default_rng(9)
    clock = {"now": T0 + timedelta(hours=1)}
    stream = MemoryStream("p", clock=lambda: clock["now"])
    fill(stream, rng, 400, 0)
    queries = rng.standard_normal((12, 8))
    stream._embeddings = type("E", (), {"embed_query": lambda self, q: queries[int(q)].tolist()})()
    reader = GenerativeAgentsRetriever(stream=stream, k=10, recency_mode="reverie",
                                       update_access=False)
    toucher = reader.model_copy(update={"update_access": True})
    cache = stream.columns
    for i in range(12):
        clock["now"] += timedelta(minutes=int(rng.integers(0, 2)))  # often the same time
        kept = reader.retrieve_with_report(str(i))
        held = (cache._order, cache._order_n, list(cache._moved))
        cache._order = None  # the same query with a full sort
        fresh = reader.retrieve_with_report(str(i))
        cache._order, cache._order_n, cache._moved = held
        assert [(d.metadata["node_id"], d.metadata["score"]) for d in kept.documents] == [
            (d.metadata["node_id"], d.metadata["score"]) for d in fresh.documents]
        toucher.invoke(str(i))  # moves 10 access times for the next round
        if i % 4 == 3:
            fill(stream, rng, 3, 1000 + i * 10)
    assert cache._order is not None


def test_an_access_at_an_earlier_clock_keeps_the_later_time_another_process_merged():
    clock = {"now": T0 + timedelta(hours=5)}
    stream = MemoryStream("玛丽亚", embeddings=DeterministicFakeEmbedding(size=8),
                          clock=lambda: clock["now"])
    fill(stream, np.random.default_rng(7), 30, 0)
    later = T0 + timedelta(hours=20)
    stream.columns.merge_access({3: to_epoch(later), 7: to_epoch(later)})  # another process
    held = stream.columns.last_accessed[:30].copy()
    docs = GenerativeAgentsRetriever(stream=stream, k=30, recency_mode="reverie").invoke("记忆")
    assert {"node_3", "node_7"} <= {d.metadata["node_id"] for d in docs}  # touched at 5 h
    cache = stream.columns
    assert cache.last_accessed[2] == cache.last_accessed[6] == held[2] == to_epoch(later)
    assert stream.get("node_3").last_accessed == stream.get("node_7").last_accessed == later
    assert "node_3" not in stream._access.pending  # nothing older is sent to the store either
    assert np.all(cache.last_accessed[:30] >= held)
