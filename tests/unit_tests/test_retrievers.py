"""GenerativeAgentsRetriever: documents, candidates, weights, access times and persistence.

Every test runs three times: on Chroma, on PostgreSQL scoring in process, and on PostgreSQL
scoring in the database (``score_in="database"``); see the ``setup`` fixture.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import GenerativeAgentsRetriever, MemoryNode, MemoryStream, ValidationError
from langchain_genmem.core.timeutil import SimulationClock as Clock
from tests.support.embeddings import TableEmbeddings
from tests.support.fixtures import Store, open_store

T0 = datetime(2023, 2, 13, 15, 17, 40)
META_KEYS = {
    "persona", "node_id", "type", "created", "last_accessed", "expiration", "poignancy",
    "score", "recency", "relevance", "importance", "cosine", "dense", "lexical", "bm25", "rank",
    "depth", "subject", "predicate", "object", "keywords", "filling", "embedding_key",
    "candidates", "skipped_expired", "skipped_idle", "skipped_filtered",  # of the retrieval
    "lexical_share",
}




class Setup:
    """The backend and the scoring place this module's current test runs on."""

    store: Store
    score_in: str = "process"


SETUP = Setup()


@pytest.fixture(autouse=True, params=["chroma", "postgres", "postgres-database"])
def setup(request, tmp_path):
    backend, _, where = request.param.partition("-")
    with open_store(request, backend, tmp_path) as store:
        SETUP.store, SETUP.score_in = store, where or "process"
        yield SETUP


@pytest.fixture
def clock() -> Clock:
    return Clock(T0)


def make_stream(clock: Clock, table: Mapping[str, Sequence[float]] | None = None, *,
                size: int = 32, path=None, **kw):
    """A stream of the test's backend: a new empty store, or the test's one store with path."""
    emb = DeterministicFakeEmbedding(size=size) if table is None else TableEmbeddings(table)
    where = SETUP.store.kwargs(fresh=path is None)
    return MemoryStream("Maria Lopez", embeddings=emb, clock=clock, **where, **kw)


def make_retriever(**kw) -> GenerativeAgentsRetriever:
    return GenerativeAgentsRetriever(score_in=SETUP.score_in, **kw)


def ids(docs: Sequence[Document]) -> list[str]:
    return [d.metadata["node_id"] for d in docs]


def hours_ago(h: float) -> datetime:
    return T0 - timedelta(hours=h)


def add_events(stream: MemoryStream, events: list[dict]) -> list[MemoryNode]:
    """Add events in one commit: the same nodes, state and vectors as one add_event each
    (numbered in the order given), without a store commit per memory."""
    return stream.add_many([{"type": "event", **event} for event in events])


def twelve_events() -> list[dict]:
    """Twelve events an hour apart, poignancy 1..10 then 1, 2."""
    return [{"description": f"Maria Lopez memory {i}", "poignancy": 1 + i % 10,
             "created": hours_ago(i)} for i in range(12)]


# Three events with hand-computable components against the query "q" = [1, 0]:
# cosines 1, 0.6, 0; poignancies 2, 8, 5; last access 0, 10 and 20 hours ago.
HAND = {"q": [1.0, 0.0], "near": [1.0, 0.0], "half": [0.6, 0.8], "far": [0.0, 1.0]}


@pytest.fixture
def hand(clock) -> MemoryStream:
    stream = make_stream(clock, HAND)
    stream.add_event("near", poignancy=2, created=hours_ago(0))
    stream.add_event("half", poignancy=8, created=hours_ago(10))
    stream.add_event("far", poignancy=5, created=hours_ago(20))
    return stream


def test_components_and_scores_by_hand(hand):
    docs = make_retriever(stream=hand).invoke("q")
    by_text = {d.page_content: d.metadata for d in docs}
    lo = 0.99**20
    recency = {"near": 1.0, "half": (0.99**10 - lo) / (1.0 - lo), "far": 0.0}
    relevance = {"near": 1.0, "half": 0.6, "far": 0.0}
    importance = {"near": 0.0, "half": 1.0, "far": 0.5}
    cosine = {"near": 1.0, "half": 0.6, "far": 0.0}
    for text, meta in by_text.items():
        assert meta["recency"] == pytest.approx(recency[text], abs=1e-12)
        assert meta["relevance"] == pytest.approx(relevance[text], abs=1e-7)  # float32 store
        assert meta["importance"] == importance[text]
        assert meta["cosine"] == pytest.approx(cosine[text], abs=1e-7)
        expected = 0.5 * recency[text] + 3 * relevance[text] + 2 * importance[text]
        assert meta["score"] == pytest.approx(expected, abs=1e-6)
    # near: 0.5 + 3 = 3.5; half: 0.5*0.49 + 1.8 + 2 = 4.04...; far: 1
    assert [d.page_content for d in docs] == ["half", "near", "far"]
    assert [d.metadata["rank"] for d in docs] == [0, 1, 2]


def test_documents_carry_every_metadata_key(clock):
    stream = make_stream(clock)
    e = stream.add_event("Maria Lopez is studying", predicate="study", object="physics",
                         poignancy=4, created=hours_ago(1))
    stream.add_thought("Maria Lopez loves physics", poignancy=7, evidence=[e.node_id],
                       created=hours_ago(1), expiration=T0 + timedelta(days=30))
    docs = make_retriever(stream=stream).invoke("physics")
    assert len(docs) == 2
    for doc in docs:
        meta = doc.metadata
        assert set(meta) == META_KEYS
        node = stream.get(meta["node_id"])
        assert doc.id == node.node_id
        assert doc.page_content == node.description
        assert meta["persona"] == "Maria Lopez"
        for key in ("type", "created", "expiration", "poignancy", "depth", "subject",
                    "predicate", "object", "keywords", "filling", "embedding_key"):
            assert meta[key] == getattr(node, key), key
        assert meta["last_accessed"] == T0
        for key in ("recency", "relevance", "importance"):
            assert 0.0 <= meta[key] <= 1.0
    thought = next(d.metadata for d in docs if d.metadata["type"] == "thought")
    assert thought["depth"] == 1 and thought["filling"] == [e.node_id]


def test_score_is_the_weighted_sum_of_the_components(clock):
    stream = make_stream(clock)
    add_events(stream, [{"description": f"memory {i}", "poignancy": 1 + i % 10,
                         "created": hours_ago(3 * i)} for i in range(12)])
    stream.update_settings(recency_w=0.7, relevance_w=1.3, importance_w=0.4)
    retriever = make_retriever(stream=stream, gains=(1.0, 2.0, 3.0))
    docs = retriever.invoke("memory 4")
    assert docs[0].page_content == "memory 4"
    assert docs[0].metadata["relevance"] == 1.0
    for d in docs:
        m = d.metadata
        expected = (0.7 * m["recency"] * 1.0 + 1.3 * m["relevance"] * 2.0
                    + 0.4 * m["importance"] * 3.0)
        assert m["score"] == pytest.approx(expected, abs=1e-12)
    assert [d.metadata["score"] for d in docs] == sorted((d.metadata["score"] for d in docs),
                                                         reverse=True)


# ---------------------------------------------------------------- the Runnable interface


@pytest.fixture
def twelve(clock) -> MemoryStream:
    stream = make_stream(clock)
    add_events(stream, twelve_events())
    return stream


def test_invoke_k_default_and_per_call(twelve):
    retriever = make_retriever(stream=twelve, k=3)
    assert len(retriever.invoke("memory")) == 3
    assert len(retriever.invoke("memory", k=5)) == 5
    assert len(retriever.invoke("memory", k=0)) == 0
    assert len(retriever.invoke("memory", k=100)) == 12
    assert len(make_retriever(stream=twelve).invoke("memory")) == 12  # k=30


async def test_ainvoke_matches_invoke(twelve):
    retriever = make_retriever(stream=twelve, k=4, update_access=False)
    docs = await retriever.ainvoke("Maria Lopez memory 7")
    assert ids(docs) == ids(retriever.invoke("Maria Lopez memory 7"))
    assert len(docs) == 4


async def test_ainvoke_takes_k_per_call(twelve):
    retriever = make_retriever(stream=twelve, k=4)
    assert len(await retriever.ainvoke("memory", k=2)) == 2


def test_batch_is_invoke_per_query(twelve):
    retriever = make_retriever(stream=twelve, k=4, update_access=False)
    queries = ["Maria Lopez memory 1", "Maria Lopez memory 9"]
    assert [ids(d) for d in retriever.batch(queries)] == [ids(retriever.invoke(q)) for q in queries]
    assert [len(d) for d in retriever.batch(queries, k=2)] == [2, 2]


def test_nodes_for_and_report(twelve, clock):
    retriever = make_retriever(stream=twelve, k=3)
    report = retriever.retrieve_with_report("Maria Lopez memory 2")
    assert report.status == "ok"
    assert report.candidate_count == 12
    assert report.accessed_ids == ids(report.documents)
    scores = [d.metadata["score"] for d in report.documents]
    assert report.min_score <= min(scores) and report.max_score == scores[0]
    nodes = retriever.nodes_for("Maria Lopez memory 2")
    assert [n.node_id for n in nodes] == ids(retriever.invoke("Maria Lopez memory 2"))
    assert nodes[0] is twelve.get(nodes[0].node_id)


def test_bad_arguments_are_refused(twelve):
    with pytest.raises(ValidationError, match="recency_mode"):
        make_retriever(stream=twelve, recency_mode="days")
    with pytest.raises(ValidationError, match="k: expected an integer >= 0"):
        make_retriever(stream=twelve, k=-1)
    with pytest.raises(ValidationError, match="query"):
        make_retriever(stream=twelve).retrieve_with_report(42)  # type: ignore[arg-type]


# ---------------------------------------------------------------- candidates


def test_chats_are_never_candidates(clock):
    stream = make_stream(clock)
    stream.add_chat("conversing about physics", poignancy=10,
                    filling=[["Maria Lopez", "Hi"], ["Klaus Mueller", "Hello"]])
    stream.add_event("Maria Lopez is studying", poignancy=1)
    report = make_retriever(stream=stream).retrieve_with_report(
        "conversing about physics")
    assert [d.metadata["type"] for d in report.documents] == ["event"]
    assert report.candidate_count == 1


def test_chats_are_candidates_when_a_filter_names_them(clock):
    stream = make_stream(clock)
    chat = stream.add_chat("玛丽亚和克劳斯聊量子物理", poignancy=8, created=hours_ago(3),
                           filling=[["玛丽亚", "你好"], ["克劳斯", "你的论文写得怎么样？"]])
    idle = stream.add_chat("玛丽亚 is idle", poignancy=2, created=hours_ago(2))
    event = stream.add_event("玛丽亚在学习量子物理", poignancy=3, created=hours_ago(1))
    for mode in ("hours", "rank", "reverie"):
        retriever = make_retriever(stream=stream, update_access=False, recency_mode=mode)
        only = retriever.retrieve_with_report("量子物理", types=["chat"])
        assert ids(only.documents) == [chat.node_id], mode
        assert (only.candidate_count, only.skipped_filtered, only.skipped_idle) == (1, 1, 1)
        both = retriever.retrieve_with_report("量子物理", types=["event", "chat"])
        assert sorted(ids(both.documents)) == sorted([chat.node_id, event.node_id]), mode
        assert ids(retriever.invoke("量子物理")) == [event.node_id]  # the original's
    if SETUP.score_in == "process":  # the database always leaves idle memories out
        kept = make_retriever(stream=stream, idle_filter=False, types=["chat"]).invoke("量子物理")
        assert sorted(ids(kept)) == sorted([chat.node_id, idle.node_id])


def test_idle_embedding_keys_are_skipped(clock):
    stream = make_stream(clock)
    stream.add_event("bed is idle", poignancy=1)
    stream.add_event("Maria Lopez is idle", embedding_key="Maria Lopez is idle", poignancy=9)
    stream.add_event("desk is free", embedding_key="desk is idle", poignancy=9)
    kept = stream.add_event("an idle afternoon", embedding_key="an afternoon", poignancy=2)
    docs = make_retriever(stream=stream).invoke("bed is idle")
    assert ids(docs) == [kept.node_id]  # the rule reads embedding_key, not description


@pytest.mark.parametrize("fill", [[], ["chat"], ["idle"], ["chat", "idle"]])
def test_nothing_to_score_gives_no_documents(clock, fill):
    stream = make_stream(clock)
    if "chat" in fill:
        stream.add_chat("conversing about nothing", poignancy=3)
    if "idle" in fill:
        stream.add_event("desk is idle", poignancy=1)
    retriever = make_retriever(stream=stream)
    assert retriever.invoke("anything") == []
    report = retriever.retrieve_with_report("anything")
    assert report.status == "no_candidates"
    assert report.documents == [] and report.accessed_ids == []
    assert report.candidate_count == 0 and report.min_score is None


def test_expired_memories_are_skipped_unless_asked(clock):
    stream = make_stream(clock)
    old = stream.add_thought("an old plan", poignancy=9, created=hours_ago(48),
                             expiration=hours_ago(1))
    live = stream.add_thought("a live plan", poignancy=2, created=hours_ago(48),
                              expiration=T0 + timedelta(days=30))
    event = stream.add_event("an event", poignancy=1, created=hours_ago(2))
    got = make_retriever(stream=stream, update_access=False)
    assert set(ids(got.invoke("an old plan"))) == {live.node_id, event.node_id}
    every = {old.node_id, live.node_id, event.node_id}
    assert set(ids(got.model_copy(update={"include_expired": True}).invoke("x"))) == every
    # the original never reads expiration
    assert set(ids(got.model_copy(update={"recency_mode": "reverie"}).invoke("x"))) == every
    clock.now = T0 + timedelta(days=31)
    assert ids(got.invoke("x")) == [event.node_id]


# ---------------------------------------------------------------- time and kind filters

DAY = datetime(2023, 2, 13)


@pytest.fixture
def around_midnight(clock) -> tuple[MemoryStream, list[str]]:
    """Memories on both sides of the two midnights of 13 February (with Chinese text)."""
    clock.now = DAY + timedelta(days=2)
    stream = make_stream(clock)
    times = [DAY - timedelta(microseconds=1), DAY, DAY + timedelta(hours=12),
             DAY + timedelta(days=1) - timedelta(microseconds=1), DAY + timedelta(days=1)]
    events = [{"type": "event", "description": f"第{i}件事 event {i}", "poignancy": i + 1,
               "created": t} for i, t in enumerate(times)]
    six = DAY + timedelta(hours=6)
    thought = {"type": "thought", "description": "一个想法 a thought", "poignancy": 9,
               "created": six}
    nodes = stream.add_many([*events, thought])  # one commit: the same nodes as one add each
    return stream, [n.node_id for n in nodes]


def test_time_window_is_half_open_at_day_boundaries(around_midnight):
    stream, n = around_midnight
    got = make_retriever(stream=stream, update_access=False)
    day = got.retrieve_with_report("事", created_after=DAY, created_before=DAY + timedelta(days=1))
    assert set(ids(day.documents)) == {n[1], n[2], n[3], n[5]}
    assert day.skipped_filtered == 2 and day.candidate_count == 4
    assert day.documents[0].metadata["skipped_filtered"] == 2
    # dates and ISO texts mean their midnight; the next day starts where this one ends
    next_day = got.invoke("事", created_after="2023-02-14", created_before=date(2023, 2, 15))
    assert ids(next_day) == [n[4]]
    assert ids(got.invoke("事", created_before="2023-02-13")) == [n[0]]


def test_kinds_and_poignancy_filter_and_per_call_values_replace_the_retrievers(around_midnight):
    stream, n = around_midnight
    got = make_retriever(stream=stream, update_access=False, types=["event"], min_poignancy=3)
    assert set(ids(got.invoke("x"))) == {n[2], n[3], n[4]}
    assert set(ids(got.invoke("x", types=["thought"]))) == {n[5]}
    assert set(ids(got.invoke("x", min_poignancy=5, created_before="2023-02-14"))) == set()
    assert set(ids(got.invoke("x", node_ids=[n[3], n[0], "node_999"]))) == {n[3]}
    assert ids(asyncio.run(got.ainvoke("x", types=["thought"]))) == [n[5]]
    assert set(ids(got.batch(["x"], created_after="2023-02-14")[0])) == {n[4]}


def test_scores_are_normalised_over_the_filtered_set(hand, clock):
    """The filtered ranking equals that of a stream holding only the memories that pass."""
    got = make_retriever(stream=hand, update_access=False)
    filtered = got.invoke("q", created_before=hours_ago(5))
    alone = make_stream(clock, HAND)
    alone.add_event("half", poignancy=8, created=hours_ago(10))
    alone.add_event("far", poignancy=5, created=hours_ago(20))
    expected = make_retriever(stream=alone, update_access=False).invoke("q")
    assert [d.page_content for d in filtered] == [d.page_content for d in expected]
    for a, b in zip(filtered, expected, strict=True):
        for key in ("score", "recency", "relevance", "importance"):
            assert a.metadata[key] == pytest.approx(b.metadata[key], abs=1e-9)
    assert filtered[0].metadata["importance"] == 1.0  # poignancy 8 is the filtered maximum


def test_filtered_retrieval_updates_access_of_returned_memories_only(around_midnight, clock):
    stream, n = around_midnight
    got = make_retriever(stream=stream, k=1)
    [doc] = got.invoke("x", types="thought")
    assert doc.metadata["node_id"] == n[5]
    assert stream.get(n[5]).last_accessed == clock.now
    assert stream.get(n[2]).last_accessed == stream.get(n[2]).created


@pytest.mark.parametrize(("kw", "field"), [
    ({"created_after": "yesterday"}, "created_after"),
    ({"created_after": "2023-02-14", "created_before": "2023-02-13"}, "created_before"),
    ({"types": ["memo"]}, "types"),
    ({"min_poignancy": float("nan")}, "min_poignancy"),
    ({"since": "2023-02-13"}, "since"),
])
def test_bad_filters_are_refused_naming_the_field(twelve, kw, field):
    with pytest.raises(ValidationError) as e:
        make_retriever(stream=twelve).invoke("x", **kw)
    assert e.value.field == field
    if field != "since":
        with pytest.raises(ValidationError):
            make_retriever(stream=twelve, **kw)


# ---------------------------------------------------------------- weights and decay


@pytest.fixture
def three_hours(clock) -> MemoryStream:
    """Accessed 0, 1 and 2 hours ago; importance rises with age; one shared vector."""
    stream = make_stream(clock, {"q": [1.0, 0.0], "same": [1.0, 1.0]})
    add_events(stream, [{"description": text, "embedding_key": "same", "poignancy": p,
                         "created": hours_ago(h)}
                        for h, (text, p) in enumerate([("a", 1), ("b", 5), ("c", 9)])])
    return stream


def middle_recency(retriever: GenerativeAgentsRetriever) -> float:
    docs = retriever.invoke("q")
    return next(d.metadata["recency"] for d in docs if d.page_content == "b")


def test_decay_defaults_to_the_personas_and_can_be_overridden(three_hours):
    retriever = make_retriever(stream=three_hours, update_access=False)
    assert middle_recency(retriever) == pytest.approx((0.99 - 0.99**2) / (1 - 0.99**2))
    three_hours.update_settings(recency_decay=0.5)
    assert middle_recency(retriever) == pytest.approx(1 / 3)  # (0.5 - 0.25) / (1 - 0.25)
    mine = retriever.model_copy(update={"recency_decay": 0.9})
    assert middle_recency(mine) == pytest.approx((0.9 - 0.81) / (1 - 0.81))


def test_weights_default_to_the_personas_and_can_be_overridden(three_hours):
    retriever = make_retriever(stream=three_hours, update_access=False)
    by_importance = ["c", "b", "a"]
    assert [d.page_content for d in retriever.invoke("q")] == by_importance
    three_hours.update_settings(importance_w=0.0)
    assert [d.page_content for d in retriever.invoke("q")] == ["a", "b", "c"]  # recency
    docs = retriever.invoke("q")
    assert all(d.metadata["score"] == 0.5 * d.metadata["recency"] + 3 * 0.5 for d in docs)
    mine = retriever.model_copy(update={"importance_w": 1.0, "recency_w": 0.0})
    assert [d.page_content for d in mine.invoke("q")] == by_importance


# ---------------------------------------------------------------- access times


def test_returned_memories_are_accessed_at_the_clock_time_at_once(twelve, clock):
    clock.now = T0 + timedelta(hours=5)
    before = {n.node_id: n.last_accessed for n in twelve.nodes()}
    docs = make_retriever(stream=twelve, k=3).invoke("Maria Lopez memory 11")
    touched = set(ids(docs))
    assert all(d.metadata["last_accessed"] == clock.now for d in docs)
    for node in twelve.nodes():
        expected = clock.now if node.node_id in touched else before[node.node_id]
        assert node.last_accessed == expected
    # the next retrieval scores them as just accessed: all three have the top recency
    again = make_retriever(stream=twelve, k=12, update_access=False).invoke("x")
    assert {d.metadata["node_id"] for d in again if d.metadata["recency"] == 1.0} == touched


def test_update_access_false_leaves_access_times(twelve, clock):
    clock.now = T0 + timedelta(hours=5)
    before = {n.node_id: n.last_accessed for n in twelve.nodes()}
    report = make_retriever(stream=twelve, update_access=False).retrieve_with_report("x")
    assert report.accessed_ids == []
    assert {n.node_id: n.last_accessed for n in twelve.nodes()} == before


def fill_on_disk(path, clock) -> tuple[list[str], dict[str, datetime]]:
    """Twelve memories in a folder; retrieve three of them five hours later."""
    with make_stream(clock, path=path) as stream:
        add_events(stream, twelve_events())
    created = {f"node_{i + 1}": hours_ago(i) for i in range(12)}
    clock.now = T0 + timedelta(hours=5)
    return created, clock.now


def access_times(path, clock) -> dict[str, datetime]:
    stream = make_stream(clock, path=path)
    return {n.node_id: n.last_accessed for n in stream.nodes()}


@pytest.mark.parametrize("how", ["flush", "close"])
def test_access_times_are_stored_on_flush_and_close(tmp_path, clock, how):
    created, when = fill_on_disk(tmp_path, clock)
    stream = make_stream(clock, path=tmp_path, flush_interval=3600)
    touched = ids(make_retriever(stream=stream, k=3).invoke("Maria Lopez memory 3"))
    getattr(stream, how)()
    expected = {i: (when if i in touched else c) for i, c in created.items()}
    assert access_times(tmp_path, clock) == expected


def test_access_times_reach_the_store_within_the_flush_interval(tmp_path, clock):
    created, when = fill_on_disk(tmp_path, clock)
    stream = make_stream(clock, path=tmp_path, flush_interval=0.2)
    touched = ids(make_retriever(stream=stream, k=3).invoke("Maria Lopez memory 3"))
    deadline = time.monotonic() + 0.2 + 0.5
    expected = {i: (when if i in touched else c) for i, c in created.items()}
    while access_times(tmp_path, clock) != expected and time.monotonic() < deadline:
        time.sleep(0.05)  # stored as soon as the interval's timer ran: no need to wait it out
    assert access_times(tmp_path, clock) == expected  # a second stream on the same folder


# ---------------------------------------------------------------- retrieve_many


CARRY = {"A": [1.0, 0.0], "B": [0.0, 1.0], "C": [-1.0, 0.0], "q1": [1.0, 0.0], "q2": [1.0, 1.0]}


def carry_stream(clock) -> MemoryStream:
    """A and C accessed 48 hours ago, B 1 hour ago, equal poignancy; q2 is as close to A
    as to B, so recency alone decides it."""
    stream = make_stream(clock, CARRY)
    stream.add_event("A", poignancy=5, created=hours_ago(48))
    stream.add_event("B", poignancy=5, created=hours_ago(1))
    stream.add_event("C", poignancy=5, created=hours_ago(48))
    return stream


@pytest.mark.parametrize(("mode", "fresh", "carried"), [
    ("hours", "B", "A"),  # touched by q1, A becomes the most recent
    # the original's inverted order: [C, A, B] by access, then [C, B, A] once A is touched;
    # the first gets decay**1, so a touched memory drops to the lowest recency
    ("reverie", "A", "B"),
])
def test_retrieve_many_carries_access_times_between_focal_points(clock, mode, fresh, carried):
    def retriever():
        return make_retriever(stream=carry_stream(clock), k=1, recency_mode=mode)

    assert [d.page_content for d in retriever().invoke("q2")] == [fresh]
    got = retriever().retrieve_many(["q1", "q2"])
    assert list(got) == ["q1", "q2"]
    assert [d.page_content for d in got["q1"]] == ["A"]
    assert [d.page_content for d in got["q2"]] == [carried]
    one_by_one = retriever()
    assert [ids(one_by_one.invoke(q)) for q in ("q1", "q2")] == [ids(v) for v in got.values()]


# ---------------------------------------------------------------- ties and languages


def test_memories_sharing_a_vector_tie_and_come_newest_first(clock):
    """Nodes with one embedding_key share one vector: their cosines must tie exactly, so the
    original's tie order (same access time: events newest first) decides among them."""
    rng = np.random.default_rng(5)
    table = {f"other {i}": rng.standard_normal(384) for i in range(40)}
    table["taking a break"] = shared = rng.standard_normal(384)
    table["q"] = shared + 0.5 * rng.standard_normal(384)
    stream = make_stream(clock, table)
    group = add_events(stream, [{"description": f"Maria Lopez is taking a break ({i})",
                                 "embedding_key": "taking a break", "poignancy": 3,
                                 "created": hours_ago(1)} for i in range(23)])
    add_events(stream, [{"description": f"other {i}", "poignancy": 3, "created": hours_ago(1)}
                        for i in range(40)])
    docs = make_retriever(stream=stream, k=10).invoke("q")
    assert len({d.metadata["cosine"] for d in docs}) == 1
    assert ids(docs) == [n.node_id for n in reversed(group)][:10]


CHINESE = ["玛丽亚在学习物理", "克劳斯在写关于士绅化的论文", "伊莎贝拉在霍布斯咖啡馆筹备情人节派对"]


def test_chinese_memories_and_queries(tmp_path, clock):
    with make_stream(clock, path=tmp_path) as stream:
        for i, text in enumerate(CHINESE):
            stream.add_event(text, subject="玛丽亚", predicate="在", object="学习",
                             poignancy=3 + i, created=hours_ago(i))
    reopened = make_stream(clock, path=tmp_path)
    retriever = make_retriever(stream=reopened, update_access=False)
    docs = retriever.invoke("克劳斯在写关于士绅化的论文")
    assert docs[0].page_content == "克劳斯在写关于士绅化的论文"
    assert docs[0].metadata["relevance"] == 1.0
    assert math.isclose(docs[0].metadata["cosine"], 1.0, abs_tol=1e-6)
    assert sorted(d.page_content for d in docs) == sorted(CHINESE)
    assert docs[0].metadata["subject"] == "玛丽亚"
    assert len(retriever.invoke("情人节派对在哪里?", k=2)) == 2


def test_query_of_another_size_is_refused(clock):
    stream = make_stream(clock, {"a": [1.0, 0.0], "q": [1.0, 0.0, 0.0]})
    stream.add_event("a", poignancy=1)
    with pytest.raises(Exception, match="3"):
        make_retriever(stream=stream).invoke("q")


def test_zero_query_vector_scores_relevance_as_equal(clock):
    stream = make_stream(clock, {"a": [1.0, 0.0], "b": [0.0, 1.0], "zero": [0.0, 0.0]})
    stream.add_event("a", poignancy=1, created=hours_ago(2))
    stream.add_event("b", poignancy=1, created=hours_ago(1))
    docs = make_retriever(stream=stream).invoke("zero")
    assert [d.metadata["relevance"] for d in docs] == [0.5, 0.5]
    assert [d.page_content for d in docs] == ["b", "a"]
    assert np.isfinite([d.metadata["score"] for d in docs]).all()


def test_a_memory_committed_while_a_retrieval_reads_does_not_break_it(clock):
    """A write from another thread may land between a retrieval's reads of the cache (the
    service shares one stream between requests): the retrieval scores the rows it saw."""
    stream = make_stream(clock)
    for i in range(3):
        stream.add_event(f"event {i}", poignancy=i + 1)
    cache = stream.columns
    candidates = cache.candidates
    landed = []

    def racing_candidates(*args, **kwargs):
        if not landed:  # another request commits right now
            landed.append(stream.add_event("arrives mid-retrieval", poignancy=9))
        return candidates(*args, **kwargs)

    cache.candidates = racing_candidates
    docs = GenerativeAgentsRetriever(stream=stream, k=10).invoke("event")
    assert landed and len(stream) == 4
    assert 3 <= len(docs) <= 4 and len(set(ids(docs))) == len(docs)
