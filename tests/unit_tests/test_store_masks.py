"""GenerativeAgentsStore's searches equal a straightforward reading of its key records.

The store answers searches from masks over the stream's rows, kept up to date on put and
delete. The reference here reads every persona's key records afresh for each search, tests
each item with the store's per-value rule and ranks through a plain retriever given the
live node ids: keys, order, scores and values must be the same, on data made to trip an
index up (superseded, deleted and re-put keys, nested namespaces, a label holding the
namespace separator, filters on missing fields and nested values, every operator, Chinese
text and keys, unindexed items, another store writing between searches).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langgraph.store.base import PutOp

from langchain_genmem import GenerativeAgentsRetriever, GenerativeAgentsStore, SimulationClock
from langchain_genmem.langgraph_store import REGISTRY, TIME_FILTERS
from langchain_genmem.langgraph_store.filters import matches as _matches
from langchain_genmem.numerics.candidate_filter import make_filter

T0 = datetime(2023, 2, 13, 8, 0)
ZHANG = ("用户", "张三")

FILTERS: list[dict[str, Any] | None] = [
    None,
    {},
    {"topic": "食物"},
    {"topic": "工作"},
    {"n": {"$gt": 2}},
    {"n": {"$gte": 3, "$lt": 10}},
    {"n": {"$lte": 3}},
    {"n": {"$ne": 3}},
    {"n": {"$eq": 1}},
    {"n": 1},
    {"n": True},
    {"n": "4"},
    {"n": {"$eq": None}},
    {"missing": None},
    {"missing": {"$ne": 1}},
    {"missing": {"$gt": 0}},
    {"meta": {"lang": "zh"}},
    {"meta": {"score": {"$lte": 2}}},
    {"meta": {}},
    {"tags": ["a", "b"]},
    {"topic": "食物", "n": {"$gt": 1}},
    {"topic": "食物", "types": ["event"]},
    {"n": {"$gt": 0}, "min_poignancy": 5},
    {"created_after": (T0 + timedelta(hours=4)).isoformat()},
]
PREFIXES = [(), ("用户",), ZHANG, ("用户/张三",), ("无",)]


def emb() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=32)


@pytest.fixture
def clock() -> SimulationClock:
    return SimulationClock(T0)


def values() -> list[dict[str, Any]]:
    """Values that differ in the ways a filter can tell apart (and some it cannot)."""
    return [
        {"content": "我喜欢饺子", "topic": "食物", "n": 3, "meta": {"lang": "zh", "score": 2}},
        {"content": "I work at a bakery", "topic": "工作", "n": 1, "tags": ["a", "b"]},
        {"content": "周末去爬山", "topic": "运动", "n": True, "poignancy": 8},
        {"content": "Klaus likes jazz", "n": "4", "meta": {"lang": "en", "score": 5}},
        {"content": "我的生日是三月", "topic": "食物", "n": 1.0, "meta": "not a mapping"},
        {"content": "learning Rust", "topic": "工作", "n": None, "type": "thought"},
        {"content": "喝茶", "topic": "食物", "n": 7, "tags": ["b", "a"], "meta": {}},
        {"content": "no fields but content"},
        {"title": "没有内容字段", "topic": "食物", "n": 12},
    ]


def fill(store: GenerativeAgentsStore, clock: SimulationClock) -> None:
    """Items in nested namespaces, then updates, deletes and re-puts."""
    spaces = [ZHANG, ("用户", "张三", "笔记"), ("用户", "李四"), ("用户/张三",), ("other",)]
    for i, value in enumerate(values()):
        for j, ns in enumerate(spaces):
            if (i + j) % 3 != 2:
                store.put(ns, f"键{i}", value, index=False if (i, j) == (2, 0) else None)
        clock.advance(hours=1)
    batch = [PutOp(spaces[j], f"k{i}", v) for i, v in enumerate(values()) for j in (0, 2)]
    store.batch(batch)
    clock.advance(hours=1)
    store.put(ZHANG, "键0", {"content": "现在喜欢面条", "topic": "食物", "n": 9})  # superseded
    store.put(ZHANG, "键1", {"content": "换了工作", "topic": "变化", "n": 2})
    store.delete(ZHANG, "键3")
    store.delete(("用户", "李四"), "k1")
    store.put(("用户", "李四"), "k1", {"content": "又回来了", "topic": "工作", "n": 3})  # re-put
    store.batch([
        PutOp(ZHANG, "k4", None),
        PutOp(ZHANG, "k4", {"content": "最后一个", "n": 5}),
        PutOp(("other",), "键8", {"content": "index 字段", "title": "标题"}, index=["title"]),
    ])
    clock.advance(hours=1)


def reference(
    store: GenerativeAgentsStore, prefix: tuple[str, ...], query: str | None,
    given: dict[str, Any] | None, limit: int = 10, offset: int = 0,
) -> list[tuple[tuple[str, ...], str, dict[str, Any], float | None]]:
    """The search as the store answered it before its masks: every record tested in turn."""
    tests = {k: v for k, v in (given or {}).items() if k not in TIME_FILTERS}
    flt = {k: v for k, v in (given or {}).items() if k in TIME_FILTERS}
    chosen = []
    for persona in sorted(set(store.backend.personas())):
        stream = store.stream(persona)
        stream.refresh()  # the committed records as they are now (read, never changed:
        for ns_text, items in stream.committed.extra.get(REGISTRY, {}).items():
            ns = tuple(json.loads(ns_text))  # `state` would deep-copy them for every search)
            for key, r in items.items():
                if ns[: len(prefix)] == prefix and _matches(r["value"], tests):
                    chosen.append((persona, ns, key, r))
    if query is None:
        check = make_filter(**flt)
        kept = [(ns, key, r) for p, ns, key, r in chosen
                if check.passes(store.stream(p).get(r["node_id"]))]
        kept.sort(key=lambda c: (datetime.fromisoformat(c[2]["updated_at"]), c[1]), reverse=True)
        return [(ns, key, r["value"], None) for ns, key, r in kept[offset : offset + limit]]
    scored = []
    for persona in sorted({c[0] for c in chosen}):
        by_node = {r["node_id"]: (ns, key, r) for p, ns, key, r in chosen
                   if p == persona and r.get("indexed", True)}
        if not by_node:
            continue
        peek = GenerativeAgentsRetriever(stream=store.stream(persona), update_access=False,
                                         **store.retriever_kwargs)
        report = peek.retrieve_with_report(query, k=offset + limit, node_ids=list(by_node), **flt)
        scored += [(d.metadata["score"], by_node[d.id]) for d in report.documents]
    scored.sort(key=lambda s: s[0], reverse=True)
    return [(ns, key, r["value"], score) for score, (ns, key, r) in scored[offset : offset + limit]]


def answer(store: GenerativeAgentsStore, prefix: tuple[str, ...], query: str | None,
           given: dict[str, Any] | None, limit: int = 10, offset: int = 0) -> list[tuple]:
    found = store.search(prefix, query=query, filter=given, limit=limit, offset=offset)
    return [(i.namespace, i.key, i.value, i.score) for i in found]


def check_all(store: GenerativeAgentsStore, queries: list[str | None]) -> int:
    compared = 0
    for prefix in PREFIXES:
        for given in FILTERS:
            for query in queries:
                want = reference(store, prefix, query, given)
                assert answer(store, prefix, query, given) == want, (prefix, given, query)
                compared += bool(want)
    return compared


def test_searches_equal_the_per_record_reference(backend, clock):
    store = GenerativeAgentsStore(embeddings=emb(), clock=clock, **backend.kwargs())
    try:
        fill(store, clock)
        assert check_all(store, [None, "我喜欢吃什么"]) > 80  # most searches find items
        # paging through one ranking, across personas
        for offset in (0, 3, 7):
            want = reference(store, ("用户",), "饺子", {"topic": "食物"}, 4, offset)
            assert answer(store, ("用户",), "饺子", {"topic": "食物"}, 4, offset) == want
        # reopened: the masks are built from the stored key records alone
        store.close()
        store = GenerativeAgentsStore(embeddings=emb(), clock=clock, **backend.kwargs())
        assert check_all(store, ["爬山"]) > 40
    finally:
        store.close()


@pytest.mark.parametrize("label", [0, -1])
def test_many_namespaces_in_one_persona(backend, clock, label):
    """persona_for maps many namespaces into one stream: the prefix picks among them.

    With the first label, one persona holds the same keys in several namespaces, put at
    the same time: listing's ties (same ``updated_at``, same key) keep the namespaces' order.
    """
    kwargs = {**backend.kwargs(), "embeddings": emb(), "clock": clock}
    store = GenerativeAgentsStore(persona_for=lambda ns: ns[label], **kwargs)
    try:
        fill(store, clock)
        assert check_all(store, [None, "生日"] if label == 0 else ["生日"]) > 40
    finally:
        store.close()


def test_another_store_writing_between_searches_is_seen(backend, clock):
    kwargs = {**backend.kwargs(), "embeddings": emb(), "clock": clock}
    store, other = GenerativeAgentsStore(**kwargs), GenerativeAgentsStore(**kwargs)
    try:
        fill(store, clock)
        assert check_all(store, [None]) > 50
        other.put(ZHANG, "键0", {"content": "另一个进程写的", "topic": "食物", "n": 4})
        other.delete(ZHANG, "键1")
        other.put(("用户", "李四"), "新键", {"content": "新的记忆", "topic": "食物", "n": 6})
        other.put(("用户", "王五"), "k", {"content": "a persona this store never saw", "n": 2})
        clock.advance(hours=1)
        for prefix in [ZHANG, ("用户", "李四"), ("用户",), ("用户", "王五")]:
            for given in [None, {"topic": "食物"}, {"n": {"$gte": 4}}]:
                for query in [None, "记忆"]:
                    want = reference(store, prefix, query, given)
                    assert answer(store, prefix, query, given) == want, (prefix, given, query)
        assert store.get(ZHANG, "键0").value["content"] == "另一个进程写的"
        assert store.get(ZHANG, "键1") is None
        assert store.get(("用户", "王五"), "k") is not None
        other.put(("新", "命名空间"), "k", {"content": "listed, never searched"})
        assert ("新", "命名空间") in store.list_namespaces()
        # and this store's writes on top of the other's
        store.put(ZHANG, "键1", {"content": "回来了", "topic": "食物", "n": 8})
        for given in FILTERS[:8]:
            want = reference(store, ZHANG, "回来", given)  # first: a search updates access times
            assert answer(store, ZHANG, "回来", given) == want, given
    finally:
        other.close()
        store.close()


def test_a_search_reads_nothing_but_each_personas_head_when_nothing_changed(tmp_path, clock):
    store = GenerativeAgentsStore(path=tmp_path / "s", embeddings=emb(), clock=clock)
    try:
        for i in range(30):
            topic = "食物" if i % 2 else "工作"
            store.put(ZHANG, f"键{i}", {"content": f"记忆 {i}", "topic": topic})
        store.put(("用户", "李四"), "k", {"content": "李四的记忆"})
        store.search(ZHANG, query="记忆", filter={"topic": "食物"})  # warm
        reads: list[str] = []
        backend = store.backend
        def counted(name: str) -> Any:
            method = getattr(backend, name)
            return lambda *a, **k: (reads.append(name), method(*a, **k))[1]

        for name in ("personas", "read_head", "read_state", "read_nodes"):
            setattr(backend, name, counted(name))
        got = store.search(ZHANG, query="记忆", filter={"topic": "食物"}, limit=20)
        assert len(got) == 15 and {i.value["topic"] for i in got} == {"食物"}
        assert reads == ["read_head"]  # the retrieval's own look for other writers' commits
    finally:
        store.close()
