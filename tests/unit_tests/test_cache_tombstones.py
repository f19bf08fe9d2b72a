"""Forgetting marks rows dead in a new cache object: what a forget costs and what readers keep.

A forget must cost what it forgets: the new columns share every array with the old ones
(nothing of the persona is copied), readers holding the old object keep one moment, the
keyword index, the citations and the turns follow by number, and a compaction (when dead
rows outnumber live ones, at `MemoryStream.compact`, in every snapshot saved) renumbers the
rows in number order. A turn a forget re-keys moves to a row of its own in the new object, so
the old object keeps its old vector too.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream
from langchain_genmem.memory import mirror as mirror_module
from langchain_genmem.memory.cache import ROW_COLUMNS, LazyNodes, NodeCache

P = "玛丽亚"
T0 = datetime(2024, 3, 1, 9)
EMB = DeterministicFakeEmbedding(size=8)


def stream_of(path: Path | None = None, **kwargs: object) -> MemoryStream:
    where = {} if path is None else {"path": str(path)}
    return MemoryStream(P, embeddings=EMB, clock=lambda: T0 + timedelta(days=1), **where,
                        **kwargs)


def events(n: int, start: int = 0, key: str | None = None) -> list[dict]:
    return [{"type": "event", "description": f"玛丽亚 记忆 {start + i}", "poignancy": 1 + i % 9,
             "keywords": ["玛丽亚", f"书{(start + i) % 3}"], "embedding_key": key,
             "created": T0 + timedelta(minutes=start + i)} for i in range(n)]


def test_a_forget_shares_every_column_and_leaves_the_old_object_as_it_was() -> None:
    stream = stream_of()
    stream.add_many(events(50))
    before = stream.columns
    old_candidates = before.candidates().rows.copy()
    stream.forget(["node_7", "node_30"])
    after = stream.columns
    assert after is not before
    for name in ROW_COLUMNS:  # nothing of the persona copied
        assert np.shares_memory(getattr(after, name), getattr(before, name)), name
    assert after.nodes is before.nodes
    assert (after.n, after.dead, after.live) == (50, 2, 48)
    assert (before.dead, before.live) == (0, 50)
    assert before.row_of_number(7) == 6 and after.row_of_number(7) is None
    assert after.rows_of_numbers(np.array([7, 8, 30, 99])).tolist() == [-1, 7, -1, -1]
    np.testing.assert_array_equal(before.candidates().rows, old_candidates)
    assert 6 not in after.candidates().rows and 29 not in after.candidates().rows
    assert [n.node_id for n in stream.nodes()][:2] == ["node_50", "node_49"]
    assert "node_7" not in [n.node_id for n in stream.nodes()] and len(stream) == 48


def test_an_embedding_key_of_a_forgotten_memory_moves_to_a_live_one_or_goes() -> None:
    stream = stream_of()
    shared = "玛丽亚 is idle"
    stream.add_many([*events(3, key=shared), *events(2, start=3)])
    cache = stream.columns
    assert cache.key_row[shared] == 2
    stream.forget(["node_3"])  # the newest holder: the key moves to node_2
    assert stream.columns.key_row[shared] == 1
    stream.forget(["node_4"])  # a key only it had goes
    keys = stream.embeddings_by_key()
    assert shared in keys and "玛丽亚 记忆 3" not in keys and "玛丽亚 记忆 4" in keys
    stream.forget(["node_1", "node_2"])
    assert shared not in stream.embeddings_by_key()
    stream.add_many(events(1, start=10, key=shared))  # a new holder of the key
    assert stream.columns.key_row[shared] == stream.columns.row_of_number(6)


def test_the_columns_compact_once_dead_rows_outnumber_live_ones(monkeypatch) -> None:
    monkeypatch.setattr(mirror_module, "COMPACT_AFTER", 4)
    stream = stream_of()
    stream.add_many(events(12))
    stream.forget(["node_1", "node_2", "node_3", "node_4", "node_5"])  # 5 dead, 7 live
    assert stream.columns.dead == 5 and stream.columns.n == 12
    stream.forget(["node_6", "node_7"])  # 7 dead > 5 live: compacted
    cache = stream.columns
    assert (cache.n, cache.dead) == (5, 0)
    assert cache.node_number[: cache.n].tolist() == [8, 9, 10, 11, 12]
    assert cache.row_of_number(9) == 1 and cache.row_of_number(3) is None
    assert [n.node_id for n in stream.nodes()] == [f"node_{i}" for i in (12, 11, 10, 9, 8)]
    docs = GenerativeAgentsRetriever(stream=stream, k=3, relevance="hybrid").invoke("记忆 9")
    assert {d.metadata["node_id"] for d in docs} <= {f"node_{i}" for i in range(8, 13)}


def test_compaction_keeps_the_nodes_of_a_snapshot_unmade(tmp_path: Path) -> None:
    writer = stream_of(tmp_path / "store")
    writer.add_many(events(40))
    writer.close()
    stream = stream_of(tmp_path / "store")
    assert isinstance(stream.columns.nodes, LazyNodes)
    held = stream.columns.nodes._held
    assert all(node is None for node in held)
    stream.forget(["node_3"], keep_derived=True)
    made = sum(node is not None for node in stream.columns.nodes._held)
    assert made <= 2  # the forgotten one (and nothing of the other 39)
    assert stream.compact(store=False) == {"rows_dropped": 1, "store": None}
    compacted = stream.columns.nodes
    assert sum(node is not None for node in compacted._held) <= 2
    assert stream.get("node_4").description == "玛丽亚 记忆 3"
    assert [n.description for n in stream.nodes()][-3:] == ["玛丽亚 记忆 3", "玛丽亚 记忆 1",
                                                             "玛丽亚 记忆 0"]


def test_a_snapshot_saved_with_dead_rows_holds_the_live_ones_only(tmp_path: Path) -> None:
    stream = stream_of(tmp_path / "store")
    stream.add_many(events(30))
    stream.forget(["node_4", "node_20"])
    assert stream.columns.dead == 2
    stream.close()
    again = stream_of(tmp_path / "store")
    cache = again.columns
    assert (cache.n, cache.dead) == (28, 0)
    assert 4 not in cache.node_number[: cache.n] and 20 not in cache.node_number[: cache.n]
    assert again.get("node_21").description == "玛丽亚 记忆 20"


def test_a_reader_keeps_the_old_vector_of_a_turn_a_forget_re_keys() -> None:
    stream = stream_of()
    turns = stream.add_many([
        {"type": "event", "description": text, "conversation": "对话", "speaker": who,
         "poignancy": 3, "created": T0 + timedelta(minutes=i)}
        for i, (who, text) in enumerate([("林晓", "静静！睡了没"), ("陈静", "没呢，在看书"),
                                         ("林晓", "看什么书"), ("陈静", "红楼梦")])])
    before = stream.columns
    row = before.row_of_number(3)
    old = before.vectors[row].copy()
    report = stream.forget([turns[1].node_id])
    assert report.rekeyed == ("node_3", "node_4")  # both quoted the forgotten turn
    after = stream.columns
    moved = after.row_of_number(3)
    assert moved >= before.n and after.moved == 2  # rows of their own, appended
    np.testing.assert_array_equal(before.vectors[row], old)  # the reader's moment
    assert not np.array_equal(after.vectors[moved], old)
    assert before.nodes[row].embedding_key != after.nodes[moved].embedding_key
    assert [n.node_id for n in stream.nodes()] == ["node_4", "node_3", "node_1"]
    assert after.row_of_number(4) == 5 and after.highest == 4 and after.live == 3
    docs = GenerativeAgentsRetriever(stream=stream, k=5, relevance="hybrid").invoke("看什么书")
    assert docs[0].metadata["node_id"] == "node_3" and len(docs) == 3


def test_a_forget_of_one_memory_copies_no_column(monkeypatch) -> None:
    stream = stream_of()
    stream.add_many(events(200))
    stream.forget(["node_1"])  # builds the citations once
    copies = []
    original = NodeCache.compacted

    def watched(self: NodeCache) -> NodeCache:
        copies.append(self.n)
        return original(self)

    monkeypatch.setattr(NodeCache, "compacted", watched)
    stream.forget(["node_100"])
    stream.forget(["node_150", "node_151"], dry_run=True)
    assert copies == []


def test_forgetting_everything_leaves_what_forgetting_each_would() -> None:
    def seeded() -> MemoryStream:
        stream = stream_of()
        stream.add_many([*events(20),
                         {"type": "event", "description": "玛丽亚 is idle", "poignancy": 1,
                          "subject": "玛丽亚", "predicate": "is", "object": "idle",
                          "keywords": ["空闲"]},
                         {"type": "thought", "description": "玛丽亚 喜欢书", "poignancy": 6,
                          "keywords": ["书0"], "evidence": ["node_1"]}],
                        state={"kw_strength": {"event": {"玛丽亚": 20, "书0": 7, "书1": 7,
                                                         "书2": 6, "空闲": 2, "导入": 5},
                                               "thought": {"书0": 1}}})
        return stream

    each, every = seeded(), seeded()
    by_id = each.forget([n.node_id for n in each.nodes()])
    whole = every.forget_all()
    assert whole.forgotten == by_id.forgotten and len(every) == 0
    assert every.kw_strength == each.kw_strength
    assert every.kw_strength == {"event": {"空闲": 2, "导入": 5}, "thought": {}}
    assert every.columns.n == 0 and every.columns.highest == 22
    assert every.add_event("玛丽亚 重新开始", poignancy=2).node_id == "node_23"


def test_a_keyword_most_memories_hold_marks_forgotten_ids_and_is_cleaned_later(
    monkeypatch,
) -> None:
    from langchain_genmem.memory import keywords

    monkeypatch.setattr(keywords, "_LONG", 8)
    monkeypatch.setattr(keywords, "_STALE_MAX", 5)
    stream = stream_of()
    stream.add_many(events(30))  # every event holds 玛丽亚
    stream.forget(["node_2", "node_9"])
    index = stream._mirror.keywords
    assert index.stale == {"node_2", "node_9"}
    assert "node_2" in index.index["event"]["玛丽亚"]  # not taken out yet
    found = stream.retrieve_relevant_events("玛丽亚", "", "")
    assert len(found) == 28 and {"node_2", "node_9"}.isdisjoint(n.node_id for n in found)
    assert "node_9" not in stream.keyword_index["event"]["玛丽亚"]
    assert stream.kw_strength["event"]["玛丽亚"] == 28
    stream.forget(["node_3", "node_4", "node_5", "node_6"])  # 6 stale: cleaned at once
    assert index.stale == set() and "node_2" not in index.index["event"]["玛丽亚"]
    assert len(stream.retrieve_relevant_events("玛丽亚", "", "")) == 24
