"""Expiry (`expires_in`, `forget(expired=True)`) and corrections (`supersedes`) on MemoryStream.

Every stream test runs on an embedded Chroma folder and on a real PostgreSQL (the `store`
fixture): an expired or superseded memory is looked for with dense, lexical and hybrid
retrieval in process and with the database's ranking, in another stream of the store and
after a reopen; corrections survive a snapshot, an export to the original's format and a
forget of the correcting memory.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import GenerativeAgentsRetriever, GenerativeAgentsStore, MemoryStream
from langchain_genmem.backends.base import ranking_of
from langchain_genmem.core.errors import UnknownNodeError, ValidationError
from langchain_genmem.core.timeutil import SimulationClock
from langchain_genmem.interop.generative_agents import (
    NODE_FIELDS,
    dump_associative_memory,
    load_associative_memory,
)
from langchain_genmem.memory.expiry import lifetime, parse_duration
from tests.support.fixtures import Store
from tests.support.forgotten import seen_ids

P = "玛丽亚"
DIM = 16
START = datetime(2024, 3, 1, 8, 0)
MODES = ("dense", "lexical", "hybrid")


def fake() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=DIM)


def opened(store: Store, clock: SimulationClock) -> MemoryStream:
    return store.open(P, embeddings=fake(), clock=clock)


def everywhere(stream: MemoryStream, query: str, **retriever: object) -> list[set[str]]:
    """The ids each way of retrieving finds: dense, lexical, hybrid, and the database's."""
    found = [set(seen_ids(stream, query, relevance=m, **retriever)) for m in MODES]
    if ranking_of(stream.backend) is not None:
        found.append(set(seen_ids(stream, query, score_in="database", **retriever)))
    return found


# ---------------------------------------------------------------------------- lifetimes


@pytest.mark.parametrize(("given", "seconds"), [
    (90, 90), (1.5, 1.5), (timedelta(days=2), 172800), ("30d", 2592000), ("12h", 43200),
    ("90m", 5400), ("45s", 45), ("1d12h", 129600), ("1.5h", 5400), ("3600", 3600),
    (" 2H ", 7200),
])
def test_a_lifetime_is_seconds_a_timedelta_or_a_duration_text(given, seconds) -> None:
    assert lifetime(given) == timedelta(seconds=seconds)


@pytest.mark.parametrize("given", [0, -5, "0s", "soon", "30x", "d", "", True, None, [30],
                                   float("inf"), float("nan"), timedelta(0), "1e400"])
def test_a_lifetime_must_be_positive_and_readable(given) -> None:
    with pytest.raises(ValueError, match="positive number of seconds or a duration"):
        lifetime(given)


def test_a_duration_option_is_named_with_the_value_given() -> None:
    with pytest.raises(ValidationError, match=r"^--expires-in: .*30d.* \(got '三十天'\)$"):
        parse_duration("三十天", "--expires-in")


# ---------------------------------------------------------------------------- expiry


def test_expires_in_counts_from_created_or_the_clock(store: Store) -> None:
    clock = SimulationClock(START)
    stream = opened(store, clock)
    a = stream.add_event("玛丽亚今天在霍布斯咖啡馆值班", poignancy=3, expires_in=3600)
    b = stream.add_event("Maria's exam is on Friday", poignancy=5,
                         expires_in=timedelta(days=2), created=START - timedelta(days=1))
    c, d = stream.add_many([
        {"type": "event", "description": "克劳斯下周去上海", "poignancy": 4, "expires_in": "7d"},
        {"type": "thought", "description": "玛丽亚很忙", "poignancy": 2, "evidence": [a.node_id],
         "expiration": START + timedelta(hours=5)},
    ])
    assert a.expiration == START + timedelta(hours=1)
    assert b.expiration == START + timedelta(days=1)
    assert c.expiration == START + timedelta(days=7)
    assert d.expiration == START + timedelta(hours=5)
    again = opened(store, clock)
    assert [n.expiration for n in again.nodes()] == [
        d.expiration, c.expiration, b.expiration, a.expiration]


@pytest.mark.parametrize(("item", "message"), [
    ({"expires_in": 60, "expiration": START}, r"items\[0\]\.expires_in: give expiration or "
     r"expires_in, not both"),
    ({"expires_in": -1}, r"items\[0\]\.expires_in: expected a positive number of seconds"),
    ({"expires_in": "一周"}, r"items\[0\]\.expires_in: expected a positive .*'一周'"),
])
def test_a_bad_lifetime_is_refused_naming_the_field(store: Store, item, message) -> None:
    stream = opened(store, SimulationClock(START))
    stream.add_event("玛丽亚在图书馆", poignancy=2)
    with pytest.raises(ValidationError, match=message):
        stream.add_many([{"type": "event", "description": "玛丽亚学物理", "poignancy": 3},
                         {"type": "event", "description": "x", "poignancy": 3, **item}][1:])
    assert len(stream) == 1


def test_an_expired_memory_is_never_retrieved_until_asked_for(store: Store) -> None:
    clock = SimulationClock(START)
    stream = opened(store, clock)
    short = stream.add_event("玛丽亚今天的咖啡馆班次", poignancy=3, expires_in="2h").node_id
    kept = stream.add_event("玛丽亚在咖啡馆工作", poignancy=3).node_id
    assert all({short, kept} <= ids for ids in everywhere(stream, "咖啡馆班次"))
    clock.advance(hours=2)  # expiration at the clock: expired
    assert all(short not in ids and kept in ids for ids in everywhere(stream, "咖啡馆班次"))
    assert all(short in ids for ids in everywhere(stream, "咖啡馆班次", include_expired=True))
    reverie = GenerativeAgentsRetriever(memory_stream=stream, recency_mode="reverie", k=50)
    assert short in {d.metadata["node_id"] for d in reverie.invoke("咖啡馆班次")}


def test_keyword_retrieval_leaves_expired_memories_out(store: Store) -> None:
    clock = SimulationClock(START)
    stream = opened(store, clock)
    stream.add_many([
        {"type": "event", "description": "玛丽亚今天在咖啡馆值班", "poignancy": 3,
         "keywords": ["咖啡馆"], "expires_in": "1h"},
        {"type": "event", "description": "玛丽亚在咖啡馆工作", "poignancy": 3,
         "keywords": ["咖啡馆"]},
        {"type": "thought", "description": "玛丽亚喜欢咖啡馆", "poignancy": 4,
         "keywords": ["咖啡馆"], "evidence": ["node_2"], "expires_in": "30d"},
    ])
    events = stream.retrieve_relevant_events("", "", "咖啡馆")
    assert [n.node_id for n in events] == ["node_2", "node_1"]
    clock.advance(hours=1)
    assert [n.node_id for n in stream.retrieve_relevant_events("", "", "咖啡馆")] == ["node_2"]
    assert len(stream.retrieve_relevant_events("", "", "咖啡馆", include_expired=True)) == 2
    clock.advance(days=30)
    assert stream.retrieve_relevant_thoughts("", "", "咖啡馆") == []
    assert stream.keyword_retrieve(events[:1])["玛丽亚在咖啡馆工作"]["thoughts"] == []
    kept = stream.retrieve_relevant_thoughts("", "", "咖啡馆", include_expired=True)
    assert [n.node_id for n in kept] == ["node_3"]


def test_forget_expired_deletes_what_expired_at_the_clock(store: Store) -> None:
    clock = SimulationClock(START)
    stream = opened(store, clock)
    stream.add_many([
        {"type": "event", "description": "玛丽亚的临时密码是四七一一", "poignancy": 5,
         "expires_in": 600},
        {"type": "event", "description": "Maria parks on level 3 today", "poignancy": 2,
         "expires_in": "1d"},
        {"type": "thought", "description": "玛丽亚要记住密码", "poignancy": 4,
         "evidence": ["node_1"], "expires_in": "30d"},
        {"type": "event", "description": "玛丽亚住在奥克山学院宿舍", "poignancy": 6},
    ])
    nothing = stream.forget(expired=True)
    assert (nothing.forgotten, nothing.rev, len(stream)) == ((), None, 4)
    clock.advance(hours=2)
    dry = stream.forget(expired=True, dry_run=True)
    assert (dry.forgotten, dry.derived, dry.dry_run, len(stream)) == (
        ("node_1", "node_3"), ("node_3",), True, 4)
    clock.advance(days=1)
    thoughts_only = stream.forget(expired=True, types=["thought"])  # selectors AND
    assert thoughts_only.forgotten == ()  # the thought itself expires in 30 days
    report = stream.forget(expired=True)
    assert (report.forgotten, report.derived) == (("node_1", "node_2", "node_3"), ("node_3",))
    assert len(stream) == 1
    other = opened(store, clock)
    assert [n.description for n in other.nodes()] == ["玛丽亚住在奥克山学院宿舍"]
    assert all("node_1" not in ids for ids in everywhere(other, "密码", include_expired=True))
    with pytest.raises(ValidationError, match="expired: expected true or false"):
        stream.forget(expired="yes")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- corrections


def test_a_superseded_memory_is_left_out_of_retrieval_everywhere(store: Store) -> None:
    clock = SimulationClock(START)
    stream = opened(store, clock)
    other = opened(store, clock)  # caught up before the correction
    old = stream.add_event("玛丽亚住在北京", poignancy=5, keywords=["住"]).node_id
    assert all(old in ids for ids in everywhere(other, "玛丽亚住在哪里"))
    new = stream.add_event("玛丽亚搬到上海住了", poignancy=5, keywords=["住"],
                           supersedes=[old]).node_id
    for reader in (stream, other, opened(store, clock)):
        assert all(old not in ids and new in ids
                   for ids in everywhere(reader, "玛丽亚住在哪里")), reader
        assert all({old, new} <= ids
                   for ids in everywhere(reader, "玛丽亚住在哪里", include_superseded=True))
        assert reader.get(old).description == "玛丽亚住在北京"  # kept as history
        assert reader.committed.superseded == [(1, 2)]
    reverie = GenerativeAgentsRetriever(memory_stream=stream, recency_mode="reverie", k=50)
    assert {old, new} <= {d.metadata["node_id"] for d in reverie.invoke("住")}
    report = GenerativeAgentsRetriever(memory_stream=stream, k=50).retrieve_with_report("住")
    assert report.skipped_filtered == 1


@pytest.mark.parametrize(("supersedes", "error", "message"), [
    (["node_9"], UnknownNodeError, r"items\[0\]\.supersedes: no memory 'node_9'"),
    (["node_1"], UnknownNodeError, r"items\[0\]\.supersedes: no memory 'node_1'"),  # forgotten
    (["node_4"], ValidationError, r"items\[0\]\.supersedes: 'node_4' is this memory itself"),
    ("node_2", ValidationError, r"items\[0\]\.supersedes: expected a list of node ids"),
    (["第二条"], ValidationError, r"items\[0\]\.supersedes: '第二条' is not a node id"),
])
def test_supersedes_must_name_live_earlier_memories(store: Store, supersedes, error,
                                                    message) -> None:
    stream = opened(store, SimulationClock(START))
    for text in ("玛丽亚在图书馆", "玛丽亚喝咖啡", "玛丽亚学物理"):
        stream.add_event(text, poignancy=2)
    stream.forget(["node_1"])
    with pytest.raises(error, match=message):
        stream.add_event("玛丽亚改学化学", poignancy=3, supersedes=supersedes)
    assert len(stream) == 2 and stream.committed.superseded == []


def test_forgetting_the_correction_brings_the_old_memory_back(store: Store) -> None:
    clock = SimulationClock(START)
    stream = opened(store, clock)
    first = stream.add_event("玛丽亚的电话是一二三", poignancy=4).node_id
    second = stream.add_event("玛丽亚的电话是四五六", poignancy=4, supersedes=[first]).node_id
    third = stream.add_event("玛丽亚的电话是七八九", poignancy=4, supersedes=[second]).node_id
    assert all(ids & {first, second, third} == {third} for ids in everywhere(stream, "电话"))
    stream.forget([third])
    assert all(ids & {first, second} == {second} for ids in everywhere(stream, "电话"))
    stream.forget([second])  # nothing supersedes the first any more
    assert all(first in ids for ids in everywhere(opened(store, clock), "电话"))
    assert stream.committed.superseded_numbers() == frozenset()


def test_corrections_survive_a_snapshot_and_an_export_the_original_can_load(
    store: Store, tmp_path: Path
) -> None:
    clock = SimulationClock(START)
    stream = opened(store, clock)
    old = stream.add_event("玛丽亚喜欢茶", poignancy=3).node_id
    stream.add_event("玛丽亚现在只喝咖啡", poignancy=3, supersedes=[old])
    stream.close()  # an embedded folder saves its snapshot here
    reopened = opened(store, clock)
    assert reopened.committed.superseded == [(1, 2)]
    assert all(old not in ids for ids in everywhere(reopened, "喝什么"))
    folder = tmp_path / "export" / "associative_memory"
    dump_associative_memory(reopened, folder)
    records = json.loads((folder / "nodes.json").read_text(encoding="utf-8"))
    assert all(tuple(r) == NODE_FIELDS for r in records.values())  # the original's fields only
    assert {r["description"] for r in records.values()} == {"玛丽亚喜欢茶", "玛丽亚现在只喝咖啡"}
    loaded = load_associative_memory(folder, persona=P, embeddings=fake(), progress=False,
                                     path=str(tmp_path / "loaded"))
    assert len(loaded) == 2


def test_a_store_update_supersedes_the_previous_version(tmp_path: Path) -> None:
    store = GenerativeAgentsStore(path=str(tmp_path / "store"), embeddings=fake())
    store.put(("memories", "u1"), "food", {"content": "我喜欢饺子"})
    store.put(("memories", "u1"), "food", {"content": "我现在喜欢面条"})
    store.put(("memories", "u1"), "food", {"content": "我最喜欢米饭"})
    stream = store.stream("memories/u1")
    assert set(seen_ids(stream, "喜欢吃什么")) == {"node_3"}
    assert set(seen_ids(stream, "喜欢吃什么", include_superseded=True)) == {
        "node_1", "node_2", "node_3"}
    store.delete(("memories", "u1"), "food")
    assert len(stream) == 0
    store.close()
