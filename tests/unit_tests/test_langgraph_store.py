"""GenerativeAgentsStore against what LangGraph's InMemoryStore does for the same calls.

Tests parametrised over ``memory`` (LangGraph's ``InMemoryStore``), ``chroma`` and
``postgres`` hold where the two stores agree; the tests after them say where and why
GenerativeAgentsStore is meant to differ (ranking, ``created_at`` on update, listing order).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langgraph.store.base import BaseStore, GetOp, ListNamespacesOp, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from langchain_genmem import (
    GenerativeAgentsRetriever,
    GenerativeAgentsStore,
    MemoryStream,
    SimulationClock,
    ValidationError,
)
from langchain_genmem.retrieval.presets import CHAT_RETRIEVAL
from tests.support.fixtures import open_store

T0 = datetime(2023, 2, 13, 8, 0)
NS = ("memories", "u1")


def emb() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=32)


@pytest.fixture
def clock() -> SimulationClock:
    return SimulationClock(T0)


@pytest.fixture
def genmem(backend, clock) -> Iterator[GenerativeAgentsStore]:
    store = GenerativeAgentsStore(embeddings=emb(), clock=clock, **backend.kwargs())
    yield store
    store.close()


@pytest.fixture(params=["memory", "chroma", "postgres"])
def any_store(request, clock, tmp_path) -> Iterator[BaseStore]:
    """Either store: the behaviour the tests using it check is BaseStore's, shared by both."""
    if request.param == "memory":
        yield InMemoryStore()
        return
    with open_store(request, request.param, tmp_path) as backend:
        store = GenerativeAgentsStore(embeddings=emb(), clock=clock, **backend.kwargs())
        yield store
        store.close()


# ---------------------------------------------------------------- BaseStore semantics both share


def test_put_get_update_delete(any_store):
    assert any_store.get(NS, "a") is None
    any_store.put(NS, "a", {"content": "我喜欢饺子", "kind": "food"})
    item = any_store.get(NS, "a")
    assert (item.namespace, item.key, item.value) == (
        NS,
        "a",
        {"content": "我喜欢饺子", "kind": "food"},
    )
    any_store.put(NS, "a", {"content": "I like noodles now", "kind": "food"})
    assert any_store.get(NS, "a").value["content"] == "I like noodles now"
    assert any_store.get(("memories", "u2"), "a") is None
    any_store.delete(NS, "a")
    assert any_store.get(NS, "a") is None
    any_store.delete(NS, "never there")  # deleting a missing key is no error


def test_search_without_query_filters_limits_and_spans_a_namespace_prefix(any_store):
    for i in range(5):
        any_store.put(
            NS, f"k{i}", {"content": f"memory {i}", "n": i, "tag": "even" if i % 2 == 0 else "odd"}
        )
    any_store.put(("memories", "u2"), "other", {"content": "someone else", "n": 9, "tag": "even"})
    keys = lambda items: {i.key for i in items}  # noqa: E731
    assert keys(any_store.search(NS)) == {f"k{i}" for i in range(5)}
    assert keys(any_store.search(NS, filter={"tag": "even"})) == {"k0", "k2", "k4"}
    assert keys(any_store.search(NS, filter={"n": {"$gte": 3}})) == {"k3", "k4"}
    assert keys(any_store.search(NS, filter={"n": {"$ne": 0}, "tag": "even"})) == {"k2", "k4"}
    assert keys(any_store.search(("memories",), filter={"tag": "even"})) == {
        "k0",
        "k2",
        "k4",
        "other",
    }
    assert len(any_store.search(NS, limit=2)) == 2
    assert len(any_store.search(NS, limit=2, offset=4)) == 1
    assert all(i.score is None for i in any_store.search(NS))


def test_list_namespaces_prefix_suffix_depth_limit_offset(any_store):
    for ns in [("a", "b", "c"), ("a", "b", "d"), ("a", "x"), ("z", "b", "c"), ("用户", "记忆")]:
        any_store.put(ns, "k", {"content": "x"})
    assert any_store.list_namespaces() == sorted(
        [("a", "b", "c"), ("a", "b", "d"), ("a", "x"), ("z", "b", "c"), ("用户", "记忆")]
    )
    assert any_store.list_namespaces(prefix=("a",)) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "x"),
    ]
    assert any_store.list_namespaces(prefix=("*", "b")) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("z", "b", "c"),
    ]
    assert any_store.list_namespaces(suffix=("c",)) == [("a", "b", "c"), ("z", "b", "c")]
    assert any_store.list_namespaces(max_depth=1) == [("a",), ("z",), ("用户",)]
    assert any_store.list_namespaces(limit=2, offset=1) == [("a", "b", "d"), ("a", "x")]
    # Meant to differ: InMemoryStore keeps listing a namespace whose items were all deleted;
    # this store lists namespaces that hold items (as LangGraph's PostgresStore does).
    any_store.delete(("a", "x"), "k")
    emptied_listed = ("a", "x") in any_store.list_namespaces()
    assert emptied_listed == isinstance(any_store, InMemoryStore)


def test_batch_reads_see_the_store_before_the_batchs_puts(any_store):
    any_store.put(NS, "a", {"content": "old"})
    got = any_store.batch(
        [
            PutOp(NS, "a", {"content": "new"}),
            GetOp(NS, "a"),
            PutOp(NS, "b", {"content": "first"}),
            PutOp(NS, "b", {"content": "last"}),
            SearchOp(NS, None, 10, 0),
            ListNamespacesOp(None, None, 10, 0),
        ]
    )
    assert got[0] is None and got[1].value == {"content": "old"}
    assert {i.key for i in got[4]} == {"a"} and got[5] == [NS]
    assert any_store.get(NS, "a").value == {"content": "new"}
    assert any_store.get(NS, "b").value == {"content": "last"}


def test_async_api(any_store):
    async def run() -> tuple:
        await any_store.aput(NS, "a", {"content": "异步 memory"})
        item = await any_store.aget(NS, "a")
        found = await any_store.asearch(NS)
        spaces = await any_store.alist_namespaces()
        await any_store.adelete(NS, "a")
        return item, found, spaces, await any_store.aget(NS, "a")

    item, found, spaces, gone = asyncio.run(run())
    assert item.value == {"content": "异步 memory"} and [i.key for i in found] == ["a"]
    assert spaces == [NS] and gone is None


def test_ttl_is_taken_where_the_store_supports_it(any_store):
    if not any_store.supports_ttl:  # InMemoryStore
        with pytest.raises(NotImplementedError):
            any_store.put(NS, "a", {"content": "x"}, ttl=5)
        return
    any_store.put(NS, "a", {"content": "x"}, ttl=5)
    assert any_store.get(NS, "a").value == {"content": "x"}


# ------------------------------------------------------------ where GenerativeAgentsStore differs


def test_search_ranks_exactly_as_the_retriever_and_updates_access(backend, clock):
    """InMemoryStore ranks by cosine alone; this store, given the simulation's weights, by
    recency, relevance and importance, on the absolute scale."""
    genmem = GenerativeAgentsStore(embeddings=emb(), clock=clock, retriever_kwargs={},
                                   **backend.kwargs())
    for i, text in enumerate(
        [
            "我喜欢饺子 dumplings",
            "I work at a bakery",
            "Klaus likes jazz",
            "我的生日是三月",
            "I am learning Rust",
        ]
    ):
        genmem.put(NS, f"k{i}", {"content": text, "poignancy": 1 + 2 * i})
        clock.advance(hours=3)
    stream = genmem.stream("memories/u1")
    peek = GenerativeAgentsRetriever(stream=stream, update_access=False, scale="absolute")
    expected = peek.invoke("what food do I like?")
    got = genmem.search(NS, query="what food do I like?", limit=5)
    by_node = {genmem.get(NS, i.key).key: i for i in got}
    assert [stream.get(d.id).description for d in expected] == [i.value["content"] for i in got]
    assert [d.metadata["score"] for d in expected] == pytest.approx(
        [i.score for i in got], abs=1e-9
    )
    assert len(by_node) == 5
    # offset pages through the same ranking (every memory was accessed now by the search
    # above, so this one and the next read the same access times)
    again = genmem.search(NS, query="what food do I like?", limit=5)
    assert [i.key for i in genmem.search(NS, query="what food do I like?", limit=2, offset=1)] == [
        i.key for i in again[1:3]
    ]
    assert all(stream.get(d.id).last_accessed == clock.now for d in expected)


def test_update_supersedes_without_renumbering_and_keeps_created_at(genmem, clock):
    """InMemoryStore resets created_at on update; this store keeps it (as PostgresStore does)."""
    genmem.put(NS, "food", {"content": "I love dumplings"})
    clock.advance(hours=2)
    genmem.put(NS, "job", {"content": "I work at a bakery"})
    clock.advance(hours=2)
    genmem.put(NS, "food", {"content": "I love noodles now"})
    stream = genmem.stream("memories/u1")
    assert [n.node_id for n in reversed(stream.nodes())] == ["node_1", "node_2", "node_3"]
    item = genmem.get(NS, "food")
    assert item.created_at == T0.replace(tzinfo=timezone.utc)
    assert item.updated_at == (T0 + timedelta(hours=4)).replace(tzinfo=timezone.utc)
    ranked = genmem.search(NS, query="I love dumplings")
    assert sorted(i.value["content"] for i in ranked) == [
        "I love noodles now",
        "I work at a bakery",
    ]
    genmem.delete(NS, "job")
    assert [i.key for i in genmem.search(NS, query="bakery")] == ["food"]
    # the superseded version stays as history; the deleted item is forgotten
    assert [n.node_id for n in reversed(stream.nodes())] == ["node_1", "node_3"]


def test_returned_values_are_copies(genmem):
    genmem.put(NS, "a", {"content": "x", "tags": ["饺子"]})
    genmem.get(NS, "a").value["tags"].append("changed")
    genmem.search(NS)[0].value["content"] = "changed"
    assert genmem.get(NS, "a").value == {"content": "x", "tags": ["饺子"]}


def test_listing_without_query_is_newest_first(genmem, clock):
    """InMemoryStore lists in insertion order; this store newest first (by updated_at)."""
    for key in ["a", "b", "c"]:
        genmem.put(NS, key, {"content": key})
        clock.advance(minutes=1)
    genmem.put(NS, "a", {"content": "a again"})
    assert [i.key for i in genmem.search(NS)] == ["a", "c", "b"]


def test_time_and_kind_filters_at_day_boundaries(genmem, clock):
    day = datetime(2023, 2, 14)
    for when, key, kind in [
        (day - timedelta(microseconds=1), "late", "event"),
        (day, "midnight", "event"),
        (day + timedelta(hours=9), "thought", "thought"),
        (day + timedelta(days=1), "next", "event"),
    ]:
        clock.now = when
        genmem.put(
            NS,
            key,
            {"content": f"{key} 记忆", "type": kind, "poignancy": 4 if kind == "event" else 9},
        )
    window = {"created_after": "2023-02-14", "created_before": "2023-02-15"}
    assert {i.key for i in genmem.search(NS, filter=window)} == {"midnight", "thought"}
    assert {i.key for i in genmem.search(NS, query="记忆", filter=window)} == {
        "midnight",
        "thought",
    }
    assert [i.key for i in genmem.search(NS, query="记忆", filter={"types": ["thought"]})] == [
        "thought"
    ]
    assert {i.key for i in genmem.search(NS, filter={"min_poignancy": 5})} == {"thought"}
    assert {i.key for i in genmem.search(NS, filter={**window, "type": "event"})} == {"midnight"}
    with pytest.raises(ValidationError) as e:
        genmem.search(NS, filter={"created_after": "tomorrow"})
    assert e.value.field == "created_after"


def test_items_survive_reopening_the_store(backend, clock):
    first = GenerativeAgentsStore(embeddings=emb(), clock=clock, **backend.kwargs())
    first.put(NS, "a", {"content": "持久的记忆"})
    first.put(("other",), "b", {"content": "x"})
    first.delete(("other",), "b")
    first.close()
    again = GenerativeAgentsStore(embeddings=emb(), clock=clock, **backend.kwargs())
    assert again.get(NS, "a").value == {"content": "持久的记忆"}
    assert again.list_namespaces() == [NS]
    assert [i.key for i in again.search(NS, query="记忆")] == ["a"]
    again.close()


def test_persona_mapping_text_field_and_index(backend, clock):
    store = GenerativeAgentsStore(
        embeddings=emb(),
        clock=clock,
        persona_for=lambda ns: ns[-1],
        text_field="text",
        **backend.kwargs(),
    )
    store.put(("prefs", "Maria"), "a", {"text": "Maria likes physics"})
    store.put(("facts", "Maria"), "b", {"other": "no text field"})
    store.put(("facts", "Maria"), "c", {"text": "hidden", "note": "shown"}, index=["note"])
    store.put(("facts", "Maria"), "d", {"text": "not ranked"}, index=False)
    stream = store.stream("Maria")
    assert [n.description for n in reversed(stream.nodes())] == [
        "Maria likes physics",
        '{"other": "no text field"}',
        "shown",
        "not ranked",
    ]
    found = store.search(("facts",), query="x")  # the unranked item after the ranked ones
    assert {i.key for i in found[:2]} == {"b", "c"} and None not in [i.score for i in found[:2]]
    assert [(i.key, i.score) for i in found[2:]] == [("d", None)]
    assert {i.key for i in store.search(("facts",))} == {"b", "c", "d"}
    store.close()


def test_poignancy_from_the_model_or_the_default(backend, clock):
    from langchain_core.language_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    model = GenericFakeChatModel(messages=iter([AIMessage("Rating: 8")]))
    rated = GenerativeAgentsStore(embeddings=emb(), clock=clock, model=model, **backend.kwargs())
    rated.put(NS, "a", {"content": "我考上了大学"})
    rated.put(NS, "b", {"content": "given", "poignancy": 2})
    assert [n.poignancy for n in reversed(rated.stream("memories/u1").nodes())] == [8.0, 2.0]
    rated.close()
    plain = GenerativeAgentsStore(
        embeddings=emb(), clock=clock, default_poignancy=3, **backend.kwargs(fresh=True)
    )
    plain.put(NS, "a", {"content": "x"})
    assert plain.stream("memories/u1").nodes()[0].poignancy == 3.0
    plain.close()


def test_bad_input_is_refused_naming_the_field(genmem):
    with pytest.raises(ValidationError) as e:
        GenerativeAgentsStore(retriever_kwargs={"kk": 3})
    assert e.value.field == "kk"
    with pytest.raises(ValidationError) as e:
        genmem.search(NS, filter={"n": {"$near": 1}})
    assert e.value.field == "filter"
    with pytest.raises(ValidationError) as e:
        genmem.put(NS, "a", {"content": "x"}, index="content")
    assert e.value.field == "index"
    with pytest.raises(ValidationError) as e:
        genmem.put(NS, "b", {"content": "x", "when": datetime(2023, 2, 13)})
    assert e.value.field == "value"
    assert genmem.get(NS, "a") is None and genmem.get(NS, "b") is None  # nothing half-written
    assert len(genmem.stream("memories/u1")) == 0


def test_search_scored_in_the_database_equals_in_process(request, tmp_path, clock):
    with open_store(request, "postgres", tmp_path) as backend:
        stores = [
            GenerativeAgentsStore(
                embeddings=emb(),
                clock=clock,
                **backend.kwargs(),
                # the database normalises over the candidates: so does this in-process one
                retriever_kwargs={"score_in": where, "update_access": False,
                                  **({"scale": "candidates"} if where == "process" else {})},
            )
            for where in ("process", "database")
        ]
        for i in range(6):
            stores[0].put(NS, f"k{i}", {"content": f"第{i}条 memory {i}", "poignancy": 1 + i})
            clock.advance(hours=7)
        stores[0].put(NS, "k2", {"content": "第2条 replaced", "poignancy": 9})
        window = {"created_after": T0 + timedelta(hours=7), "types": ["event"]}
        got = [s.search(NS, query="memory", filter=window, limit=4) for s in stores]
        assert [i.key for i in got[0]] == [i.key for i in got[1]]
        assert [i.score for i in got[0]] == pytest.approx([i.score for i in got[1]], abs=1e-6)
        assert "k0" not in {i.key for i in got[0]} and len(got[0]) == 4
        for s in stores:
            s.close()


def test_search_scores_as_the_persona_is_set_unless_configured(backend, clock):
    """Relevance follows the persona's settings; retriever_kwargs fix it for every persona."""
    texts = ["the idle reactor hums in the physics lab", "我喜欢饺子 dumplings",
             "Klaus likes jazz", "克劳斯喜欢爵士乐"]
    store = GenerativeAgentsStore(embeddings=emb(), clock=clock, retriever_kwargs={},
                                  **backend.kwargs())
    for i, text in enumerate(texts):
        store.put(NS, f"k{i}", {"content": text, "poignancy": 1 + i})
        clock.advance(hours=2)
    stream = store.stream("memories/u1")

    def expected(query: str, over: MemoryStream = stream, **kwargs) -> list[tuple[str, float]]:
        kwargs.setdefault("idle_filter", False)
        kwargs.setdefault("scale", "absolute")
        peek = GenerativeAgentsRetriever(stream=over, update_access=False, **kwargs)
        return [(over.get(d.id).description, d.metadata["score"]) for d in peek.invoke(query)]

    def got(s: GenerativeAgentsStore, query: str) -> list[tuple[str, float]]:
        return [(i.value["content"], i.score) for i in s.search(NS, query=query, limit=10)]

    stream.update_settings(recency_w=0.0, importance_w=0.0)  # relevance alone ranks
    rankings = set()
    for mode in ("lexical", "hybrid", "dense"):
        stream.update_settings(relevance_mode=mode, lexical_weight=0.75)
        want = expected("爵士乐 jazz", relevance=mode, lexical_weight=0.75)
        assert want == expected("爵士乐 jazz")  # the persona's settings, as the store reads them
        found = got(store, "爵士乐 jazz")
        assert [t for t, _ in found] == [t for t, _ in want]
        assert [s for _, s in found] == pytest.approx([s for _, s in want], abs=1e-9)
        rankings.add(tuple(t for t, _ in found))
    assert len(rankings) > 1  # the setting changed the ranking
    # the idle filter is off: an item that says "idle" is found
    assert "the idle reactor hums in the physics lab" in [t for t, _ in got(store, "reactor")]
    fixed = GenerativeAgentsStore(embeddings=emb(), clock=clock, **backend.kwargs(),
                                  retriever_kwargs={"relevance": "lexical", "idle_filter": True})
    stream.update_settings(relevance_mode="dense")
    theirs = fixed.stream("memories/u1")
    theirs.refresh()
    assert theirs.state.relevance_mode == "dense"
    want = expected("爵士乐 jazz", theirs, relevance="lexical", idle_filter=True)
    assert got(fixed, "爵士乐 jazz") == [(t, pytest.approx(x, abs=1e-9)) for t, x in want]
    assert "the idle reactor hums in the physics lab" not in [t for t, _ in got(fixed, "reactor")]
    fixed.close()
    store.close()


def test_search_ranks_as_chat_retrieval_by_default(backend, clock):
    """Without retriever_kwargs a store ranks conversation memories as the chat agent does."""
    store = GenerativeAgentsStore(embeddings=emb(), clock=clock, **backend.kwargs())
    texts = ["我们上周去爬山了 hiking", "the idle reactor hums", "Klaus likes jazz", "我喜欢饺子"]
    for i, text in enumerate(texts):
        store.put(NS, f"k{i}", {"content": text, "poignancy": 9 - 2 * i})
        clock.advance(hours=5)
    stream = store.stream("memories/u1")
    peek = GenerativeAgentsRetriever(stream=stream, update_access=False, k=10, **CHAT_RETRIEVAL,
                                     scale="absolute")
    simulation = GenerativeAgentsRetriever(stream=stream, update_access=False, k=10,
                                           idle_filter=False, scale="absolute")
    query = "what did we do last week? 爬山"
    want = [(stream.get(d.id).description, d.metadata["score"]) for d in peek.invoke(query)]
    other = [(stream.get(d.id).description, d.metadata["score"])
             for d in simulation.invoke(query)]
    got = [(i.value["content"], i.score) for i in store.search(NS, query=query, limit=10)]
    assert [t for t, _ in got] == [t for t, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-9)
    assert [s for _, s in got] != pytest.approx([s for _, s in other], abs=1e-9)
    store.close()
