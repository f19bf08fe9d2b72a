"""GenerativeAgentsStore keeps BaseStore's documented contract, as LangGraph's own stores do.

Each part of the contract, sync and async, on an embedded Chroma folder and on PostgreSQL:
namespaces and labels (any label BaseStore accepts, read back exactly; every operation of a
batch checked; list namespaces), ``query=""``, items ranked search does not see, IndexConfig
and index paths (one memory per text, an item scored by its best), TTL (default, per put,
refresh, expiry before and after a sweep, the sweeper), and scores (comparable across
searches; ``ranking="similarity"`` scores as LangGraph's ``InMemoryStore``).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from datetime import datetime

import numpy as np
import pytest
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from langchain_genmem import (
    GenerativeAgentsRetriever,
    GenerativeAgentsStore,
    SimulationClock,
    ValidationError,
)
from tests.support.embeddings import LetterEmbeddings

T0 = datetime(2024, 3, 1, 9, 0)
NS = ("用户", "u1")


@pytest.fixture
def clock() -> SimulationClock:
    return SimulationClock(T0)


@pytest.fixture
def make(backend, clock) -> Iterator:
    """Stores over one backend location (several may be made: they share it)."""
    made: list[GenerativeAgentsStore] = []

    def build(**kwargs) -> GenerativeAgentsStore:
        kwargs.setdefault("clock", clock)
        if "index" not in kwargs:
            kwargs.setdefault("embeddings", LetterEmbeddings())
        store = GenerativeAgentsStore(**kwargs, **location)
        made.append(store)
        return store

    location = backend.kwargs()
    yield build
    for store in made:
        store.close()


def cosine(a: list[float], b: list[float]) -> float:
    a_, b_ = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a_ @ b_ / (np.linalg.norm(a_) * np.linalg.norm(b_)))


# ------------------------------------------------------------------ namespaces and labels

LABELS = [
    ("users", "alice\n"),  # a control character
    ("tab\there", "x"),
    (" ",),  # whitespace only
    ("  padded ", "名字"),
    ("x" * 300, "y"),  # longer than a persona name may be
    ("x" * 300, "z"),
    ("ü/ß", "中文"),
    ("ü", "ß", "中文"),  # joined, the same text as the one above
    ("50%", "_under_", "[br]", "*"),
]


def test_every_label_basestore_accepts_is_stored_and_read_back(make):
    store = make()
    for i, ns in enumerate(LABELS):
        store.put(ns, f"k{i}", {"content": f"第{i}条 label memory"})
    again = make()  # another store over the same location reads them back too
    for s in (store, again):
        assert s.list_namespaces() == sorted(LABELS)
        for i, ns in enumerate(LABELS):
            assert s.get(ns, f"k{i}").namespace == ns
            assert [(it.namespace, it.key) for it in s.search(ns)] == [(ns, f"k{i}")]
            ranked = s.search(ns, query="label memory")
            assert [(it.namespace, it.key) for it in ranked] == [(ns, f"k{i}")]
    assert {it.key for it in store.search(("x" * 300,))} == {"k4", "k5"}
    assert [it.key for it in store.search(("ü", "ß"))] == ["k7"]
    store.delete(LABELS[0], "k0")
    assert again.get(LABELS[0], "k0") is None


@pytest.mark.parametrize("bad", [("foo.bar",), ("foo", ""), ("foo", 1), ("a\x00",), ()])
def test_a_batch_checks_every_operations_namespace(make, bad):
    store = make()
    store.put(NS, "kept", {"content": "kept"})
    ops = [PutOp(NS, "new", {"content": "new"}), GetOp(bad, "k")] if bad else [
        PutOp(NS, "new", {"content": "new"}), PutOp(bad, "k", {"content": "x"})]
    with pytest.raises(InvalidNamespaceError) as e:
        store.batch(ops)
    assert isinstance(e.value, ValidationError) and e.value.field == "namespace"
    assert "\n" not in str(e.value)
    with pytest.raises(InvalidNamespaceError):
        asyncio.run(store.abatch(ops))
    assert store.get(NS, "new") is None and store.get(NS, "kept") is not None


def test_a_list_namespace_is_a_tuple(make):
    store = make()
    store.put(["memories", "u1"], "k", {"content": "列表 namespace"})  # type: ignore[arg-type]
    assert store.get(("memories", "u1"), "k").namespace == ("memories", "u1")
    assert [i.key for i in store.search(["memories"])] == ["k"]  # type: ignore[arg-type]
    got = store.batch([GetOp(["memories", "u1"], "k"),  # type: ignore[arg-type]
                       SearchOp(["memories"], query="namespace")])  # type: ignore[arg-type]
    assert got[0].key == "k" and [i.key for i in got[1]] == ["k"]


# ------------------------------------------------------------------ queries and indexing


def test_an_empty_or_blank_query_is_no_query(make, clock):
    store = make()
    for key in ("a", "b"):
        store.put(NS, key, {"content": f"{key} 记忆"})
        clock.advance(minutes=1)
    for query in ("", "   "):
        found = store.search(NS, query=query)
        assert [(i.key, i.score) for i in found] == [("b", None), ("a", None)]


def test_unindexed_items_follow_the_ranked_ones(make, clock):
    store = make()
    store.put(NS, "ranked1", {"content": "apple pie"})
    store.put(NS, "hidden1", {"content": "apple pie"}, index=False)
    clock.advance(minutes=1)
    store.put(NS, "ranked2", {"content": "banana bread"})
    store.put(NS, "hidden2", {"content": "apple tart"}, index=False)
    found = store.search(NS, query="apple pie", limit=10)
    assert [i.key for i in found[:2]] == ["ranked1", "ranked2"]
    assert [(i.key, i.score) for i in found[2:]] == [("hidden2", None), ("hidden1", None)]
    paged = store.search(NS, query="apple pie", limit=2, offset=1)
    assert [i.key for i in paged] == ["ranked2", "hidden2"]
    assert [i.key for i in store.search(NS, query="apple pie", limit=1)] == ["ranked1"]


BOOK = {
    "metadata": {"title": "Journey to the West", "year": 1592},
    "chapters": [{"content": "the monkey king is born"}, {"content": "妖怪 demons"}],
    "authors": [{"name": "Wu Chengen"}, {"name": "unknown editor"}],
}


def test_index_paths_embed_each_text_and_score_an_item_by_its_best(make):
    emb = LetterEmbeddings()
    fields = ["metadata.title", "chapters[*].content", "authors[0].name"]
    store = make(index={"dims": emb.dims, "embed": emb, "fields": fields},
                 ranking="similarity")
    assert store.index_config["dims"] == emb.dims and store.index_config["embed"] is emb
    store.put(NS, "book", BOOK)
    store.put(NS, "note", {"metadata": {"title": "a shopping list"}})
    stream = store.stream("用户/u1")
    texts = ["Journey to the West", "the monkey king is born", "妖怪 demons", "Wu Chengen",
             "a shopping list"]
    assert sorted(n.description for n in stream.nodes()) == sorted(texts)
    for query, best in [("monkey king", "the monkey king is born"), ("Wu Chengen", "Wu Chengen"),
                        ("journey west", "Journey to the West")]:
        found = store.search(NS, query=query)
        assert [i.key for i in found][:1] == ["book"] and len(found) == 2
        want = max(cosine(emb.embed_query(query), emb.embed_query(t)) for t in texts[:4])
        assert found[0].score == pytest.approx(want, abs=1e-6)
        assert want == pytest.approx(cosine(emb.embed_query(query), emb.embed_query(best)))
    # a put's own paths replace the fields; "$" is the whole value
    store.put(NS, "own", {"a": "zzz qqq", "b": "monkey"}, index=["a"])
    assert "own" not in [i.key for i in store.search(NS, query="monkey", limit=2)]
    assert [i.key for i in store.search(NS, query="zzz qqq", limit=1)] == ["own"]


def test_filters_read_odd_keys_and_dotted_paths(make):
    store = make()
    store.put(NS, "hyphen", {"access-level": "公开", "user": {"access-level": "nested"}})
    store.put(NS, "digit", {"123abc": "ok", "user": {"123abc": "ok2"}, "a.b": "literal"})
    for flt, keys in [({"access-level": "公开"}, ["hyphen"]),
                      ({"user.access-level": "nested"}, ["hyphen"]),
                      ({"123abc": "ok"}, ["digit"]), ({"user.123abc": "ok2"}, ["digit"]),
                      ({"a.b": "literal"}, ["digit"]),
                      ({"user.missing.x": None}, ["digit", "hyphen"]),
                      ({"user": {"123abc": "ok2"}}, ["digit"])]:
        assert sorted(i.key for i in store.search(NS, filter=flt)) == keys, flt
        assert sorted(i.key for i in store.search(NS, query="ok", filter=flt)) == keys, flt


def test_the_default_field_is_the_whole_value(make):
    emb = LetterEmbeddings()
    store = make(index={"dims": emb.dims, "embed": emb}, ranking="similarity")
    value = {"title": "西游记 Journey", "n": 3}
    store.put(NS, "book", value)
    [node] = store.stream("用户/u1").nodes()
    assert json.loads(node.description) == value  # the value's JSON, non-ASCII kept
    assert "西游记" in node.description
    [found] = store.search(NS, query=node.description)
    assert found.key == "book" and found.score == pytest.approx(1.0, abs=1e-6)


def test_an_update_supersedes_every_facet_and_a_delete_forgets_them(make):
    emb = LetterEmbeddings()
    store = make(index={"embed": emb, "fields": ["chapters[*].content"]})
    store.put(NS, "book", BOOK)
    stream = store.stream("用户/u1")
    first = [n.node_id for n in stream.nodes()]
    assert len(first) == 2
    store.put(NS, "book", {"chapters": [{"content": "新的一章 new chapter"}]})
    plain = GenerativeAgentsRetriever(stream=stream, update_access=False, k=10)
    assert [stream.get(d.id).description for d in plain.invoke("monkey")] == [
        "新的一章 new chapter"]
    store.delete(NS, "book")
    assert len(stream) == 0 and store.search(NS, query="chapter") == []


def test_index_config_is_checked(make, monkeypatch):
    with pytest.raises(ValidationError) as e:
        make(index={"dims": 7, "embed": LetterEmbeddings()}).put(NS, "k", {"text": "x"})
    assert e.value.field == "index.dims"
    for bad, field in [({"dims": 0}, "index.dims"), ({"fields": "text"}, "index.fields"),
                       ({"embed": 42}, "index.embed"), ({"dim": 3}, "index"),
                       ({"embed": "nope:model"}, "index.embed")]:
        with pytest.raises(ValidationError) as e:
            make(index=bad)
        assert e.value.field == field and "\n" not in str(e.value)
    with pytest.raises(ValidationError) as e:
        make(index={"embed": LetterEmbeddings()}, embeddings=LetterEmbeddings())
    assert e.value.field == "index.embed"
    with pytest.raises(ValidationError) as e:
        make().put(NS, "k", {"text": "x"}, index=["ok", ""])
    assert e.value.field == "index"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # a provider string LangChain resolves
    assert type(make(index={"embed": "openai:text-embedding-3-small"}).embeddings).__name__ == (
        "OpenAIEmbeddings")


def test_an_embedding_function_is_a_model(make):
    emb = LetterEmbeddings()
    store = make(index={"dims": emb.dims, "embed": emb.embed_documents, "fields": ["text"]},
                 ranking="similarity")
    store.put(NS, "k", {"text": "函数 embed function"})
    assert store.search(NS, query="embed function")[0].score == pytest.approx(
        cosine(emb.embed_query("embed function"), emb.embed_query("函数 embed function")))


# ------------------------------------------------------------------ scores


def test_similarity_scores_as_langgraphs_store(make):
    emb = LetterEmbeddings()
    index = {"dims": emb.dims, "embed": emb, "fields": ["text", "tags[*]"]}
    ours, theirs = make(index=index, ranking="similarity"), InMemoryStore(index=index)
    docs = {"a": {"text": "apple pie recipe", "tags": ["dessert", "甜点"]},
            "b": {"text": "banana bread"}, "c": {"text": "cherry", "tags": ["fruit"]},
            "d": {"text": "date night ideas"}, "e": {"no_text": True}}
    for key, value in docs.items():
        ours.put(NS, key, value)
        theirs.put(NS, key, value)
    for query in ("apple", "fruit dessert", "night", "bread and butter"):
        got, want = ours.search(NS, query=query), theirs.search(NS, query=query)
        assert [(i.key, i.score) for i in got] == [
            (i.key, pytest.approx(i.score, abs=1e-6) if i.score is not None else None)
            for i in want]
        threshold = [i.key for i in got if i.score is not None and i.score > 0.5]
        assert threshold == [i.key for i in want if i.score is not None and i.score > 0.5]


def test_weighted_scores_compare_across_searches(make):
    store = make()
    store.put(("alone",), "k", {"content": "the quick brown fox"})
    exact = store.search(("alone",), query="the quick brown fox")[0].score
    unrelated = store.search(("alone",), query="zzz")[0].score
    assert unrelated < 0.5 * exact  # a lone unrelated item does not score like a match
    store.put(NS, "k", {"content": "the quick brown fox"})
    for i in range(20):
        store.put(NS, f"other{i}", {"content": f"第{i}个 unrelated memory {i}"})
    crowded = {i.key: i.score for i in store.search(NS, query="zzz", limit=30)}
    assert crowded["k"] == pytest.approx(unrelated, abs=0.05)  # not stretched to the top
    best = store.search(NS, query="the quick brown fox", limit=1)[0]
    assert best.key == "k" and best.score == pytest.approx(exact, rel=0.1)


def test_ranking_is_checked(make):
    with pytest.raises(ValidationError) as e:
        make(ranking="cosine")
    assert e.value.field == "ranking"
    with pytest.raises(ValidationError) as e:
        make(ranking="similarity", retriever_kwargs={"recency_w": 1.0})
    assert e.value.field == "retriever_kwargs"


# ------------------------------------------------------------------ TTL


def test_ttl_default_override_and_none(make, clock):
    store = make(ttl={"default_ttl": 10})
    assert store.supports_ttl and store.ttl_config == {"default_ttl": 10}
    store.put(NS, "default", {"content": "默认 default"})
    store.put(NS, "short", {"content": "short"}, ttl=1)
    store.put(NS, "forever", {"content": "forever"}, ttl=None)
    clock.advance(minutes=2)
    assert store.get(NS, "short") is None  # expired: never returned, swept or not
    assert {i.key for i in store.search(NS)} == {"default", "forever"}
    assert {i.key for i in store.search(NS, query="short")} == {"default", "forever"}
    assert len(store.stream("用户/u1")) == 3  # not swept yet
    assert store.sweep_ttl() == 1 and len(store.stream("用户/u1")) == 2
    clock.advance(minutes=9)
    assert store.get(NS, "default") is not None  # the get above did not refresh it...
    clock.advance(minutes=9.5)  # ... this one did, at 11 minutes
    assert store.get(NS, "default", refresh_ttl=False) is not None
    clock.advance(minutes=1)
    assert store.get(NS, "default") is None
    assert asyncio.run(store.asweep_ttl()) == 1
    assert [i.key for i in store.search(NS)] == ["forever"] and store.list_namespaces() == [NS]


def test_a_sweep_forgets_as_a_delete_does(make, clock):
    store = make()
    store.put(NS, "k", {"content": "a memory that expires 过期"}, ttl=5)
    stream = store.stream("用户/u1")
    node = stream.nodes()[0].node_id
    stream.add_thought("a thought from it", evidence=[node], poignancy=3)
    store.put(NS, "k", {"content": "its update, expiring too"}, ttl=5)
    clock.advance(minutes=6)
    assert store.list_namespaces() == []
    assert store.sweep_ttl() == 1
    assert len(stream) == 0  # both versions and the thought citing them


def test_refresh_on_read_false_and_search_refresh(make, clock):
    store = make(ttl={"default_ttl": 4, "refresh_on_read": False})
    store.put(NS, "a", {"content": "a"})
    store.put(NS, "b", {"content": "b"})
    clock.advance(minutes=3)
    store.get(NS, "a")  # no refresh: the config says so
    store.search(NS, query="b", limit=1, refresh_ttl=True)  # refreshes what it returns
    clock.advance(minutes=2)
    assert store.get(NS, "a") is None
    assert [i.key for i in store.search(NS)] == ["b"]


def test_a_refresh_is_seen_by_another_store(make, clock):
    first, second = make(ttl={"default_ttl": 4}), make(ttl={"default_ttl": 4})
    first.put(NS, "a", {"content": "shared"})
    clock.advance(minutes=3)
    assert first.get(NS, "a") is not None  # refreshed to 7 minutes
    clock.advance(minutes=2)
    assert second.get(NS, "a", refresh_ttl=False) is not None
    assert second.sweep_ttl() == 0
    clock.advance(minutes=3)
    assert second.sweep_ttl() == 1 and first.get(NS, "a") is None


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "5", True])
def test_a_bad_ttl_is_refused_and_nothing_is_written(make, bad):
    store = make()
    with pytest.raises(ValidationError) as e:
        store.put(NS, "k", {"content": "x"}, ttl=bad)
    assert e.value.field == "ttl"
    assert store.get(NS, "k") is None and len(store.stream("用户/u1")) == 0
    with pytest.raises(ValidationError):
        make(ttl={"default_ttl": bad})


def test_the_sweeper_sweeps_until_stopped(make, clock):
    store = make(ttl={"default_ttl": 1, "sweep_interval_minutes": 0.2 / 60})
    store.put(NS, "k", {"content": "swept by the thread"})
    future = store.start_ttl_sweeper()
    assert store.start_ttl_sweeper() is future  # one sweeper
    clock.advance(minutes=2)
    deadline = time.monotonic() + 30
    while len(store.stream("用户/u1")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(store.stream("用户/u1")) == 0
    assert store.stop_ttl_sweeper(timeout=10) and future.result(timeout=1) is None

    async def again() -> bool:
        await store.astart_ttl_sweeper(0.2 / 60)
        return await store.astop_ttl_sweeper(timeout=10)

    assert asyncio.run(again())


def test_readers_never_see_an_expired_item_while_sweeps_run(make, clock):
    store = make(ttl={"default_ttl": 1})
    reader = make()
    for i in range(30):
        store.put(NS, f"k{i}", {"content": f"记忆 {i}"}, ttl=1 + i)
    errors: list[BaseException] = []
    seen_expired: list[str] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                now = clock.now
                for item in reader.search(NS, query="记忆", limit=40, refresh_ttl=False):
                    if int(item.key[1:]) + 1 <= (now - T0).total_seconds() / 60 - 0.01:
                        seen_expired.append(item.key)
            except Exception as e:  # noqa: BLE001 - a reader's error fails the test below
                errors.append(e)

    threads = [threading.Thread(target=read) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for _ in range(31):
            clock.advance(minutes=1)
            store.sweep_ttl()
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert errors == [] and seen_expired == []
    assert store.search(NS) == [] and len(store.stream("用户/u1")) == 0


def test_every_method_async(make, clock):
    emb = LetterEmbeddings()
    store = make(index={"embed": emb, "fields": ["text", "tags[*]"]}, ttl={"default_ttl": 5},
                 ranking="similarity")

    async def run() -> None:
        await store.aput(NS, "a", {"text": "异步 async apple", "tags": ["fruit"]})
        await store.aput(("其他",), "b", {"text": "banana"}, ttl=None)
        await store.aput(NS, "c", {"text": "hidden"}, index=False)
        assert (await store.aget(NS, "a")).value["tags"] == ["fruit"]
        found = await store.asearch(NS, query="fruit")
        assert [(i.key, i.score is None) for i in found] == [("a", False), ("c", True)]
        assert found[0].score == pytest.approx(cosine(emb.embed_query("fruit"),
                                                      emb.embed_query("fruit")))
        assert await store.alist_namespaces(prefix=("其他",)) == [("其他",)]
        assert await store.alist_namespaces(max_depth=1) == [("其他",), ("用户",)]
        clock.advance(minutes=6)
        assert await store.aget(NS, "a") is None
        assert await store.asweep_ttl() == 2
        await store.adelete(("其他",), "b")
        assert await store.alist_namespaces() == []
        results = await asyncio.gather(*(store.aput(NS, f"k{i}", {"text": f"并发 {i}"})
                                         for i in range(8)))
        assert results == [None] * 8 and len(await store.asearch(NS, limit=20)) == 8

    asyncio.run(run())
