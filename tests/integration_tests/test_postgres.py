"""What only the PostgreSQL backend promises: many writing processes, coherence, the schema.

The behaviour both backends share is tested once, on both, through the `store` fixture
(test_store, test_retrievers, test_persistence, test_reverie_replication).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import (
    EmbeddingDimensionError,
    GenerativeAgentsRetriever,
    MemoryStream,
    StorageError,
    load_associative_memory,
)
from langchain_genmem.backends.postgres import PostgresBackend
from langchain_genmem.backends.postgres_schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    ensure_schema,
    schema_sql,
)
from langchain_genmem.core.state import DEFAULT_LEXICAL_WEIGHT
from langchain_genmem.core.timeutil import to_epoch

REPO = Path(__file__).resolve().parents[2]
T0 = datetime(2023, 2, 13, 9, 0)
PERSONA = "玛丽亚 Lopez"


@pytest.fixture
def dsn(request, tmp_path):
    from tests.support.fixtures import open_store

    with open_store(request, "postgres", tmp_path) as store:
        yield store.dsn


def open_stream(dsn: str, **kw) -> MemoryStream:
    return MemoryStream(PERSONA, dsn=dsn, embeddings=DeterministicFakeEmbedding(size=8), **kw)


# ---------------------------------------------------------------- many writers

WRITER = textwrap.dedent("""
    import sys
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_genmem import MemoryStream

    dsn, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    stream = MemoryStream("玛丽亚 Lopez", dsn=dsn, embeddings=DeterministicFakeEmbedding(size=8))
    print("ready", flush=True)
    sys.stdin.readline()  # start together
    for i in range(count):
        stream.add_event(f"{name} event {i}", subject="玛丽亚 Lopez", predicate="writes",
                         object=f"topic {i % 7}", poignancy=1 + i % 5)
    stream.close()
""")


def test_two_processes_adding_300_events_each_leave_exact_ids_and_counters(dsn):
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, dsn, name, "300"], cwd=REPO,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for name in ("甲", "乙")
    ]
    for w in writers:
        assert w.stdout.readline().strip() == "ready"
    for w in writers:
        w.stdin.write("go\n")
        w.stdin.flush()
    for w in writers:
        assert w.wait(timeout=300) == 0
    stream = open_stream(dsn)
    nodes = stream.nodes()[::-1]
    assert [n.node_id for n in nodes] == [f"node_{i}" for i in range(1, 601)]
    assert [n.type_count for n in nodes] == list(range(1, 601))
    for name in ("甲", "乙"):  # each writer's events in its own order, none lost or doubled
        mine = [n.description for n in nodes if n.description.startswith(name)]
        assert mine == [f"{name} event {i}" for i in range(300)]
    poignancy = 2 * sum(1 + i % 5 for i in range(300))
    state = stream.state
    assert state.node_count == 600 and state.type_count["event"] == 600
    assert state.importance_ele_n == 600
    assert state.importance_trigger_curr == 150 - poignancy
    topics = Counter(f"topic {i % 7}" for i in range(300))
    assert stream.kw_strength["event"] == {
        "玛丽亚 lopez": 600, **{t: 2 * n for t, n in topics.items()}}
    # the database says the same as the stream, row by row
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT keyword, strength FROM kw_strength WHERE persona_name = %s "
            "AND memory_type = 'event'", (PERSONA,)).fetchall()
    assert dict(rows) == stream.kw_strength["event"]


def test_threads_of_one_process_write_one_persona(dsn):
    from concurrent.futures import ThreadPoolExecutor

    streams = [open_stream(dsn) for _ in range(3)]

    def write(k: int) -> None:
        for i in range(20):
            streams[k].add_event(f"thread {k} event {i}", poignancy=1)

    with ThreadPoolExecutor(3) as pool:
        list(pool.map(write, range(3)))
    fresh = open_stream(dsn)
    assert [n.node_id for n in fresh.nodes()] == [f"node_{i}" for i in range(60, 0, -1)]
    assert fresh.state.importance_trigger_curr == 150 - 60


def test_a_writer_waiting_longer_than_lock_timeout_gets_a_clear_error(dsn):
    holder = PostgresBackend(dsn)
    waiter = PostgresBackend(dsn, lock_timeout=0.2)
    stream = MemoryStream(PERSONA, backend=waiter, embeddings=DeterministicFakeEmbedding(size=8))
    with holder.write_lock(PERSONA):
        with pytest.raises(StorageError, match="another writer held it"):
            stream.add_event("blocked", poignancy=1)
        other = MemoryStream("Klaus", backend=waiter, embeddings=DeterministicFakeEmbedding(size=8))
        assert other.add_event("another persona is not blocked", poignancy=1).node_id == "node_1"
    assert stream.add_event("now free", poignancy=1).node_id == "node_1"
    holder.close()
    waiter.close()


# ---------------------------------------------------------------- all or nothing


def test_a_connection_lost_inside_a_write_is_a_storage_error_and_the_pool_recovers(dsn):
    backend = PostgresBackend(dsn)
    with pytest.raises(StorageError, match="nothing was committed"):
        with backend.write_lock(PERSONA):
            backend._held.get().execute("SELECT pg_terminate_backend(pg_backend_pid())")
    stream = MemoryStream(PERSONA, backend=backend, embeddings=DeterministicFakeEmbedding(size=8))
    assert stream.add_event("after the loss", poignancy=1).node_id == "node_1"
    backend.close()

CRASH = textwrap.dedent("""
    import os, sys
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_genmem import MemoryStream
    from langchain_genmem.backends import postgres

    def die(*args, **kwargs):
        os._exit(3)  # the process dies after the nodes were copied, before the state

    postgres.PostgresBackend._store_state = staticmethod(die)
    stream = MemoryStream("玛丽亚 Lopez", dsn=sys.argv[1],
                          embeddings=DeterministicFakeEmbedding(size=8))
    stream.add_many([{"type": "event", "description": f"lost {i}", "poignancy": 9,
                      "keywords": ["lost"]} for i in range(50)])
""")


def test_a_writer_dying_mid_commit_leaves_nothing(dsn):
    stream = open_stream(dsn)
    stream.add_event("kept", poignancy=2, keywords=["kept"])
    before = stream.state
    done = subprocess.run([sys.executable, "-c", CRASH, dsn], cwd=REPO, timeout=120,
                          check=False, capture_output=True, text=True)
    assert done.returncode == 3, done.stderr
    fresh = open_stream(dsn)
    assert len(fresh) == 1 and fresh.state == before
    assert fresh.backend.retrieve_relevant(PERSONA, "event", ["lost"]) == []
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM memory_nodes").fetchone() == (1,)
    assert stream.add_event("next", poignancy=1).node_id == "node_2"


def test_a_failed_commit_rolls_back_nodes_and_strengths(dsn, monkeypatch):
    stream = open_stream(dsn)
    stream.add_event("kept", poignancy=2, keywords=["kept"])
    before = stream.state

    def refuse(conn, persona, state, *changes):
        conn.execute("SELECT 1 / 0")

    monkeypatch.setattr(PostgresBackend, "_store_state", staticmethod(refuse))
    with pytest.raises(StorageError, match=r"refused a value \(SQLSTATE 22012\); nothing was"):
        stream.add_many([{"type": "event", "description": f"n{i}", "poignancy": 5,
                          "keywords": ["lost"]} for i in range(30)])
    monkeypatch.undo()
    assert len(stream) == 1 and stream.state == before
    fresh = open_stream(dsn)
    assert len(fresh) == 1 and fresh.state == before
    assert stream.add_event("next", poignancy=1).node_id == "node_2"


def test_a_vector_of_the_wrong_size_is_refused_before_anything_is_written(dsn):
    stream = open_stream(dsn)
    stream.add_event("eight", poignancy=1)
    other = MemoryStream("Klaus", dsn=dsn, embeddings=DeterministicFakeEmbedding(size=4))
    with pytest.raises(EmbeddingDimensionError, match="expected vectors of size 8, got 4"):
        other.add_event("four", poignancy=1)
    assert len(MemoryStream("Klaus", dsn=dsn)) == 0
    with pytest.raises(EmbeddingDimensionError):
        PostgresBackend(dsn, dim=16)


# ---------------------------------------------------------------- coherence and access times


def test_another_process_sees_new_memories_and_access_times_at_its_next_retrieval(dsn):
    clock = [T0]
    a = open_stream(dsn, clock=lambda: clock[0], flush_interval=3600)
    b = open_stream(dsn, clock=lambda: clock[0])
    a.add_event("Maria Lopez is studying physics", poignancy=3)
    retriever_b = GenerativeAgentsRetriever(stream=b, update_access=False)
    assert [d.page_content for d in retriever_b.invoke("physics")] == [
        "Maria Lopez is studying physics"]
    clock[0] = T0 + timedelta(hours=3)
    GenerativeAgentsRetriever(stream=a).invoke("physics")
    a.flush()
    doc = retriever_b.invoke("physics")[0]
    assert doc.metadata["last_accessed"] == T0 + timedelta(hours=3)
    assert b.get("node_1").last_accessed == T0 + timedelta(hours=3)


def test_nothing_changed_costs_one_head_read(dsn, monkeypatch):
    a = open_stream(dsn)
    a.add_event("e", poignancy=1)
    b = open_stream(dsn)
    calls = Counter()
    for name in ("read_head", "read_state", "read_nodes", "read_access"):
        original = getattr(b.backend, name)

        def counted(*args, _name=name, _original=original, **kw):
            calls[_name] += 1
            return _original(*args, **kw)

        monkeypatch.setattr(b.backend, name, counted)
    assert b.refresh() is False
    assert calls == {"read_head": 1}
    a.add_event("f", poignancy=1)
    assert b.refresh() is True and len(b) == 2
    assert calls["read_nodes"] == 1


def test_access_times_never_move_backwards(dsn):
    stream = open_stream(dsn)
    node = stream.add_event("e", poignancy=1, created=T0)
    later, earlier = T0 + timedelta(hours=5), T0 + timedelta(hours=2)
    backend = stream.backend
    backend.write_access(PERSONA, {node.node_id: to_epoch(later)})
    backend.write_access(PERSONA, {node.node_id: to_epoch(earlier)})  # a slower process
    assert open_stream(dsn).get(node.node_id).last_accessed == later


# ---------------------------------------------------------------- keywords, import, schema


def test_keyword_retrieve_from_the_keywords_column_matches_the_stream(dsn):
    stream = open_stream(dsn)
    stream.add_event("玛丽亚 studies physics", subject="玛丽亚 Lopez", predicate="study",
                     object="Physics", poignancy=3)
    stream.add_event("Klaus studies physics", subject="Klaus Mueller", predicate="study",
                     object="physics", poignancy=3)
    stream.add_thought("玛丽亚 loves physics", subject="玛丽亚 LOPEZ", predicate="love",
                       object="physics", poignancy=3)
    backend = stream.backend
    for kind, lookup in (("event", stream.retrieve_relevant_events),
                         ("thought", stream.retrieve_relevant_thoughts)):
        for spo in (("玛丽亚 lopez", "x", "PHYSICS"), ("klaus mueller", "", ""), ("no", "", "")):
            assert backend.retrieve_relevant(PERSONA, kind, spo) == lookup(*spo)
    assert [n.node_id for n in backend.retrieve_relevant(PERSONA, "event", ["physics"])] == [
        "node_2", "node_1"]


def test_load_associative_memory_into_postgres(dsn):
    folder = (REPO / "data/generative_agents/July1_the_ville_isabella_maria_klaus-step-3-2"
              "/personas/Isabella Rodriguez/bootstrap_memory/associative_memory")
    stream = load_associative_memory(folder, persona="Isabella Rodriguez",
                                     embeddings=DeterministicFakeEmbedding(size=1536), dsn=dsn)
    saved = json.loads((folder / "nodes.json").read_text(encoding="utf-8"))
    again = MemoryStream("Isabella Rodriguez", dsn=dsn,
                         embeddings=DeterministicFakeEmbedding(size=1536))
    assert len(again) == len(saved) == len(stream)
    assert again.kw_strength == stream.kw_strength
    assert again.state == stream.state


def test_the_schema_is_idempotent_and_versioned(dsn):
    with psycopg.connect(dsn) as conn:
        assert ensure_schema(conn) == SCHEMA_VERSION
        assert ensure_schema(conn) == SCHEMA_VERSION
        versions = conn.execute("SELECT version FROM genmem_schema_version").fetchall()
        assert versions == [(v,) for v, _ in MIGRATIONS]  # each applied once, in order
        assert versions[-1] == (SCHEMA_VERSION,)
        indexes = {r[0] for r in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'memory_nodes'").fetchall()}
        assert {"memory_nodes_persona_type", "memory_nodes_keywords"} <= indexes
        assert not any("hnsw" in i or "ivf" in i for i in indexes)  # no ANN index
        conn.execute("INSERT INTO genmem_schema_version (version) VALUES (%s)",
                     (SCHEMA_VERSION + 1,))
        conn.commit()
    with pytest.raises(StorageError, match="upgrade langchain-genmem"):
        PostgresBackend(dsn)


def test_a_version_1_database_migrates_and_its_personas_get_the_default_relevance(dsn):
    from langchain_genmem.backends.postgres_schema import MIGRATION_1, VERSION_TABLE

    with psycopg.connect(dsn) as conn:  # what the release before hybrid relevance left behind
        conn.execute(VERSION_TABLE)
        conn.execute(MIGRATION_1)
        conn.execute("INSERT INTO genmem_schema_version (version) VALUES (1)")
        conn.execute(
            "INSERT INTO genmem_personas (persona_name, importance_trigger_max, "
            "importance_trigger_curr, importance_ele_n, recency_w, relevance_w, importance_w, "
            "recency_decay) VALUES (%s, 150, 150, 0, 1, 2, 1, 0.99)", (PERSONA,))
        conn.commit()
    stream = open_stream(dsn)
    assert stream.state.relevance_w == 2
    assert (stream.state.relevance_mode, stream.state.lexical_weight) == (
        "dense", DEFAULT_LEXICAL_WEIGHT)  # the column's SQL default is the package's
    stream.update_settings(relevance_mode="hybrid", lexical_weight=0.3)
    again = open_stream(dsn)
    assert (again.state.relevance_mode, again.state.lexical_weight) == ("hybrid", 0.3)
    with psycopg.connect(dsn) as conn, pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("UPDATE genmem_personas SET lexical_weight = 2")


def test_the_printed_schema_creates_the_same_tables(dsn):
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(schema_sql(dim=8))
        conn.execute(schema_sql(dim=8))  # runs twice without error
    stream = open_stream(dsn)
    stream.add_event("e", poignancy=1)
    assert len(open_stream(dsn)) == 1


def test_score_in_database_needs_postgres():
    from langchain_genmem import ValidationError

    stream = MemoryStream("A", embeddings=DeterministicFakeEmbedding(size=4))
    stream.add_event("e", poignancy=1)
    with pytest.raises(ValidationError, match="score_in"):
        GenerativeAgentsRetriever(stream=stream, score_in="database").invoke("e")


def test_a_dsn_and_a_chroma_store_at_once_is_refused(dsn, tmp_path):
    from langchain_genmem import ValidationError

    with pytest.raises(ValidationError, match="dsn"):
        MemoryStream(PERSONA, dsn=dsn, path=tmp_path)


# ---------------------------------------------------------------- lazy (stateless) streams


def count_reads(monkeypatch, stream: MemoryStream) -> Counter:
    """Count the backend's reads of a stream from now on, by method."""
    calls: Counter = Counter()
    for name in ("read_head", "read_state", "read_nodes", "read_access"):
        original = getattr(stream.backend, name)

        def counted(*args, _name=name, _original=original, **kw):
            calls[_name] += 1
            if _name == "read_nodes":
                calls["rows"] += args[2] - args[1] + 1
            return _original(*args, **kw)

        monkeypatch.setattr(stream.backend, name, counted)
    return calls


def seed_persona(dsn: str, n: int = 40) -> MemoryStream:
    stream = open_stream(dsn, clock=lambda: T0 + timedelta(days=2))
    stream.add_many([
        {"type": "chat" if i % 9 == 4 else "thought" if i % 5 == 4 else "event",
         "description": f"玛丽亚 记忆 {i % 13}", "poignancy": 1 + i % 10,
         "created": T0 + timedelta(minutes=7 * (i % 11)),
         **({"evidence": ["node_1"]} if i % 5 == 4 and i % 9 != 4 else {})}
        for i in range(n)
    ])
    return stream


def test_a_lazy_stream_opens_and_ranks_in_the_database_without_reading_a_node(dsn, monkeypatch):
    full = seed_persona(dsn)
    backend = PostgresBackend(dsn)
    monkeypatch.setattr(PostgresBackend, "read_nodes", lambda *a, **k: pytest.fail("read"))
    lazy = MemoryStream(PERSONA, backend=backend, lazy=True,
                        embeddings=DeterministicFakeEmbedding(size=8),
                        clock=lambda: T0 + timedelta(days=2))
    assert lazy.lazy and len(lazy) == 40 and "node_40" in lazy and "node_41" not in lazy
    for mode in ("hours", "rank", "reverie"):
        kw = {"k": 7, "recency_mode": mode, "score_in": "database", "update_access": False}
        want = GenerativeAgentsRetriever(stream=full, **kw).invoke("玛丽亚 记忆 3")
        got = GenerativeAgentsRetriever(stream=lazy, **kw).invoke("玛丽亚 记忆 3")
        assert [d.metadata["node_id"] for d in got] == [d.metadata["node_id"] for d in want]
        assert [d.metadata["score"] for d in got] == [d.metadata["score"] for d in want]
    assert lazy.lazy


def test_a_lazy_stream_reads_one_row_for_get_and_none_to_add(dsn, monkeypatch):
    thoughts = seed_persona(dsn).state.type_count["thought"]
    lazy = open_stream(dsn, lazy=True)
    calls = count_reads(monkeypatch, lazy)
    assert lazy.get("node_3").description == "玛丽亚 记忆 2"
    assert calls["rows"] == 1
    thought = lazy.add_thought("玛丽亚 想到 物理", poignancy=4, evidence=["node_10"])
    assert thought.node_id == "node_41" and thought.type_count == thoughts + 1
    assert thought.depth == 2  # node_10 is a thought citing node_1
    assert calls["rows"] == 2  # the evidence's depth: one more row
    assert lazy.lazy and len(lazy) == 41
    full = open_stream(dsn)
    assert full.get("node_41").description == "玛丽亚 想到 物理"
    assert full.state.node_count == 41 and full.state.type_count == lazy.state.type_count
    assert full.kw_strength == lazy.kw_strength


def test_a_lazy_stream_sees_another_writer_at_once_and_writes_access_times_through(dsn):
    seed_persona(dsn)
    clock = lambda: T0 + timedelta(days=3)  # noqa: E731
    lazy = open_stream(dsn, lazy=True, clock=clock)
    other = open_stream(dsn, clock=clock)
    other.add_event("克劳斯 写了 一篇 论文", poignancy=9)
    retriever = GenerativeAgentsRetriever(stream=lazy, k=3, score_in="database")
    docs = retriever.invoke("克劳斯 写了 一篇 论文")
    assert docs[0].metadata["node_id"] == "node_41" and len(lazy) == 41
    assert open_stream(dsn).get("node_41").last_accessed == T0 + timedelta(days=3)
    assert lazy.get("node_41").last_accessed == T0 + timedelta(days=3)
    lazy.mark_accessed(["node_1"], T0 + timedelta(days=4))
    assert open_stream(dsn).get("node_1").last_accessed == T0 + timedelta(days=4)


def test_a_lazy_stream_loads_the_persona_for_what_needs_every_node(dsn):
    full = seed_persona(dsn)
    lazy = open_stream(dsn, lazy=True, clock=lambda: T0 + timedelta(days=2))
    kw = {"k": 5, "update_access": False}
    got = GenerativeAgentsRetriever(stream=lazy, **kw).invoke("玛丽亚 记忆 3")  # in process
    assert not lazy.lazy
    want = GenerativeAgentsRetriever(stream=full, **kw).invoke("玛丽亚 记忆 3")
    assert [d.metadata["node_id"] for d in got] == [d.metadata["node_id"] for d in want]
    assert [n.node_id for n in lazy.nodes()] == [n.node_id for n in full.nodes()]
    assert lazy.keyword_index == full.keyword_index


# ---------------------------------------------------------------- ranking in SQL, adversarial


def same_ranking(stream: MemoryStream, focal: str, **kw) -> list[str]:
    """Rank in process and in the database; both give the same ids and values."""
    got = {}
    for where in ("process", "database"):
        retriever = GenerativeAgentsRetriever(stream=stream, score_in=where,
                                              update_access=False, **kw)
        got[where] = [(d.metadata["node_id"], d.metadata["score"], d.metadata["recency"],
                       d.metadata["relevance"], d.metadata["importance"])
                      for d in retriever.invoke(focal)]
    assert [r[0] for r in got["database"]] == [r[0] for r in got["process"]]
    for mine, theirs in zip(got["database"], got["process"], strict=True):
        assert mine[1:] == pytest.approx(theirs[1:], abs=1e-6), mine[0]
    return [r[0] for r in got["process"]]


ADVERSARIAL = [
    {"recency_mode": mode, **extra}
    for mode in ("hours", "rank", "reverie")
    for extra in ({}, {"recency_decay": 0.01}, {"types": ["event", "chat"]},
                  {"include_expired": True}, {"min_poignancy": 3, "k": 3})
]


@pytest.mark.parametrize("kw", ADVERSARIAL, ids=lambda kw: "-".join(map(str, kw.values())))
def test_ranking_in_the_database_equals_in_process_on_ties_and_tiny_recencies(dsn, kw):
    """Equal vectors, equal access times, a decay whose powers underflow, chats, expiry."""
    now = T0 + timedelta(days=400)
    stream = open_stream(dsn, clock=lambda: now)
    same = [0.5, -0.25, 0.125, 1.0, 0.0, 0.5, 0.75, -1.0]
    stream.add_many(
        [{"type": ("chat", "thought", "event")[i % 3], "description": f"同一 记忆 {i}",
          "poignancy": 1 + i % 4, "embedding": same if i % 2 else [x + i % 5 for x in same],
          "created": T0 + timedelta(days=i % 3 * 90),  # equal access times, months apart
          **({"expiration": T0 + timedelta(days=200)} if i % 7 == 0 else {}),
          **({"evidence": []} if i % 3 == 1 else {})}
         for i in range(300)]  # 200 candidates: 0.01 ** 200 underflows
    )
    kw = {"k": 12, **kw}
    assert len(same_ranking(stream, "同一 记忆", **kw)) == kw["k"]


def test_equal_cosines_and_poignancies_normalise_to_one_half_in_the_database(dsn):
    stream = open_stream(dsn, clock=lambda: T0 + timedelta(days=1))
    stream.add_many([{"type": "event", "description": f"一样 {i}", "poignancy": 3,
                      "embedding": [1.0] * 8, "created": T0} for i in range(5)])
    docs = GenerativeAgentsRetriever(stream=stream, score_in="database", k=5,
                                     update_access=False).invoke("一样")
    assert [d.metadata["node_id"] for d in docs] == [f"node_{i}" for i in (5, 4, 3, 2, 1)]
    assert {(d.metadata["relevance"], d.metadata["importance"], d.metadata["recency"])
            for d in docs} == {(0.5, 0.5, 0.5)}
    same_ranking(stream, "一样", k=5)


@pytest.mark.parametrize("mode", ["hours", "rank", "reverie"])
def test_ranking_in_the_database_keeps_microseconds_old_times_and_zero_vectors(dsn, mode):
    """Access times a microsecond apart, before 1970, and vectors of norm 0 rank as in process."""
    old = datetime(1969, 12, 31, 23, 59, 59, 999_999)
    stream = open_stream(dsn, clock=lambda: T0 + timedelta(days=1))
    stream.add_many(
        [{"type": ("event", "thought")[i % 2], "description": f"微秒 记忆 {i}",
          "poignancy": 1 + i % 3,
          "embedding": [0.0] * 8 if i % 5 == 0 else [1.0, (i % 4) * 0.5, 0, 0, 0, 0, 0, 1.0],
          "created": (old if i % 3 == 0 else T0) + timedelta(microseconds=i % 6)}
         for i in range(60)]
    )
    assert len(same_ranking(stream, "微秒 记忆", k=20, recency_mode=mode)) == 20
