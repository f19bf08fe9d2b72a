"""PostgreSQL failing under a stream: errors are the package's own, and a stream recovers.

Also what a distributed PostgreSQL (Citus) needs of the backend: every statement that reads
or writes a persona's rows names the persona (``docs/citus.md``).
"""

from __future__ import annotations

import json
import logging
import math
import re
import socket
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream, StorageError, ValidationError
from langchain_genmem.backends.postgres import PostgresBackend
from langchain_genmem.core.timeutil import to_epoch
from tests.support.postgres_server import RestartablePostgres

T0 = datetime(2023, 2, 13, 9, 0)
PERSONA = "玛丽亚 Lopez"
TABLES = ("memory_nodes", "kw_strength", "genmem_personas")


@pytest.fixture
def dsn(request, tmp_path):
    from tests.support.fixtures import open_store

    with open_store(request, "postgres", tmp_path) as store:
        yield store.dsn


def fake() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=8)


def test_a_stream_fails_with_storage_errors_while_the_server_is_down_and_recovers(caplog):
    caplog.set_level(logging.DEBUG, logger="langchain_genmem.backends.postgres")
    with RestartablePostgres() as server:  # its own folder, readable by the server's user
        backend = PostgresBackend(server.dsn(), connect_timeout=1)
        stream = MemoryStream(PERSONA, backend=backend, embeddings=fake(), clock=lambda: T0)
        stream.add_event("玛丽亚 reads about physics", poignancy=4, keywords=["physics"])
        retriever = GenerativeAgentsRetriever(stream=stream, k=1)
        assert len(retriever.invoke("physics")) == 1
        server.kill()

        with pytest.raises(StorageError, match="check persona '玛丽亚 Lopez' for changes") as e:
            retriever.invoke("physics")  # reads on a connection the server cut
        assert isinstance(e.value.__cause__, psycopg.Error)
        assert backend.reachability.state == "down"  # probed in the background since
        with pytest.raises(StorageError, match="refused or lost.*calls fail at once until"):
            retriever.invoke("physics")  # no server to connect to: at once, not after 1 s
        with pytest.raises(StorageError, match="nothing was committed"):
            stream.add_event("lost while the server is down", poignancy=2)
        with pytest.raises(StorageError, match="list the personas"):
            backend.personas()
        for error in (e.value, *(r.exc_info[1] for r in caplog.records if r.exc_info)):
            assert "\n" not in str(error) and "socket" not in str(error)  # no driver text
        outage = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(outage) == 1 and "cannot be reached" in outage[0].getMessage()
        assert not any(r.exc_info for r in caplog.records)  # one line, no traceback

        server.start_again()
        assert [d.page_content for d in eventually(lambda: retriever.invoke("physics"))] == [
            "玛丽亚 reads about physics"
        ]
        assert stream.add_event("back again", poignancy=3).node_id == "node_2"
        assert backend.personas() == [PERSONA]
        back = [r for r in caplog.records if r.levelno >= logging.WARNING][1:]
        assert len(back) == 1 and "answers again" in back[0].getMessage()
        stream.close()
        backend.close()


def eventually(call, timeout: float = 30.0):
    """What ``call`` returns once it stops raising StorageError (the server is back)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except StorageError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def silent_listener() -> tuple[socket.socket, list[socket.socket]]:
    """A TCP socket on 127.0.0.1 that accepts connections and never says a word."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    return listener, held


@pytest.mark.timeout(60)  # the driver's own default waited 130 s
@pytest.mark.parametrize("how", ["keyword", "dsn"])
def test_a_host_that_accepts_and_never_answers_is_a_storage_error_after_the_timeout(how):
    listener, held = silent_listener()
    port = listener.getsockname()[1]
    try:
        dsn = f"postgresql://genmem:secret@127.0.0.1:{port}/genmem"
        if how == "keyword":
            with pytest.raises(StorageError, match="did not answer within the connect timeout"):
                PostgresBackend(dsn, connect_timeout=1)
        else:
            with pytest.raises(StorageError, match="did not answer") as e:
                MemoryStream(PERSONA, dsn=dsn + "?connect_timeout=1", embeddings=fake())
            assert "secret" not in str(e.value)
        assert held  # it was reached: the wait was the server's silence, not a refusal
    finally:
        listener.close()
        for conn in held:
            conn.close()


def test_the_connect_timeout_comes_from_the_keyword_the_dsn_or_the_environment(monkeypatch):
    from langchain_genmem.backends.postgres import (
        DEFAULT_CONNECT_TIMEOUT,
        resolve_connect_timeout,
    )

    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
    assert resolve_connect_timeout("postgresql://u@h/db") == DEFAULT_CONNECT_TIMEOUT == 10
    assert resolve_connect_timeout("postgresql://u@h/db?connect_timeout=3") == 3
    assert resolve_connect_timeout("postgresql://u@h/db?connect_timeout=3", 7) == 7
    monkeypatch.setenv("PGCONNECT_TIMEOUT", "4")
    assert resolve_connect_timeout("host=h dbname=db") == 4
    with pytest.raises(ValidationError, match="connect_timeout"):
        resolve_connect_timeout("postgresql://u@h/db", 0)


# ---------------------------------------------------------------- refused before PostgreSQL


@pytest.mark.parametrize("name", ["a\x00b", "tab\there", "x" * 201])
def test_a_bad_persona_name_is_refused_before_postgres_sees_it(dsn, name):
    with pytest.raises(ValidationError, match="persona"):
        MemoryStream(name, dsn=dsn, embeddings=fake())
    backend = PostgresBackend(dsn)
    with pytest.raises(ValidationError, match="persona"):
        backend.read_head(name)
    with pytest.raises(ValidationError, match="persona"):
        with backend.write_lock(name):
            pass
    backend.close()


class NaNQueries(Embeddings):
    """Documents embed normally; a query embeds to NaN (a model that failed on it)."""

    def __init__(self, bad: float = math.nan) -> None:
        self.inner, self.bad = fake(), bad

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return [self.bad] * 8


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_non_finite_query_vector_is_refused_on_the_database_path(dsn, bad):
    stream = MemoryStream(PERSONA, dsn=dsn, embeddings=NaNQueries(bad), clock=lambda: T0)
    stream.add_event("玛丽亚 studies", poignancy=3)
    retriever = GenerativeAgentsRetriever(stream=stream, k=3, score_in="database")
    with pytest.raises(ValidationError, match="query embedding.*NaN or infinite"):
        retriever.invoke("anything")
    stream.close()


# ---------------------------------------------------------------- access times


def test_an_earlier_clock_never_moves_a_later_access_time_back_in_either_path(dsn):
    now = [T0 + timedelta(hours=5)]
    mine = MemoryStream(PERSONA, dsn=dsn, embeddings=fake(), clock=lambda: now[0])
    mine.add_many([{"type": "event", "description": f"事件 {i}", "poignancy": 1 + i % 9,
                    "created": T0} for i in range(12)])
    other = MemoryStream(PERSONA, dsn=dsn, embeddings=fake(),
                         clock=lambda: T0 + timedelta(hours=20))
    later = T0 + timedelta(hours=20)
    other.mark_accessed(["node_3", "node_7"], later)
    other.flush()

    def retrieve(score_in: str) -> list[tuple[str, float]]:
        docs = GenerativeAgentsRetriever(stream=mine, k=12, score_in=score_in).invoke("事件")
        return [(d.metadata["node_id"], round(d.metadata["score"], 6)) for d in docs]

    assert retrieve("process")  # merges node_3/node_7's later times, then touches at 5 h
    assert mine.get("node_3").last_accessed == later
    assert mine.get("node_7").last_accessed == later
    mine.flush()
    with psycopg.connect(dsn) as conn:
        stored = dict(conn.execute(
            "SELECT node_id, last_accessed FROM memory_nodes WHERE persona_name = %s",
            (PERSONA,)).fetchall())
    assert stored["node_3"] == later and stored["node_7"] == later
    cached = mine.columns.last_accessed[: mine.columns.n]
    assert cached[2] == cached[6] == to_epoch(later)
    assert retrieve("process") == retrieve("database")
    other.close()
    mine.close()


# ---------------------------------------------------------------- every statement names its persona


def plan_nodes(plan: dict) -> list[dict]:
    out = [plan]
    for child in plan.get("Plans", []):
        out += plan_nodes(child)
    return out


CONDITIONS = ("Index Cond", "Recheck Cond", "Filter", "Join Filter", "Hash Cond")


def unfiltered_scans(conn: psycopg.Connection, sql: str, params: object) -> list[str]:
    """Scans of the genmem tables in a statement's plan that have no persona_name condition."""
    row = conn.execute(f"EXPLAIN (FORMAT JSON) {sql}", params).fetchone()
    plan = (row[0] if isinstance(row[0], list) else json.loads(row[0]))[0]["Plan"]
    bad = []
    for node in plan_nodes(plan):
        if node.get("Relation Name") in TABLES and "Scan" in node["Node Type"]:
            conditions = " ".join(str(node.get(k, "")) for k in CONDITIONS)
            if "persona_name" not in conditions:
                bad.append(f"{node['Node Type']} on {node['Relation Name']}")
    return bad


def statements_of_one_persona(dsn: str, monkeypatch) -> list[tuple[str, object]]:
    """Every statement on the genmem tables a stream's life sends: open, adds of each kind,
    settings, retrievals both ways, access times, a second open, a catch-up, another persona
    written, listed and dropped. Each with its parameters."""
    backend = PostgresBackend(dsn)
    sent: list[tuple[str, object]] = []
    execute, copy = psycopg.Cursor.execute, psycopg.Cursor.copy

    def recording_execute(self, query, params=None, **kw):
        sent.append((str(query), params))
        return execute(self, query, params, **kw)

    def recording_copy(self, statement, params=None, **kw):
        sent.append((str(statement), params))
        return copy(self, statement, params, **kw)

    monkeypatch.setattr(psycopg.Cursor, "execute", recording_execute)
    monkeypatch.setattr(psycopg.Cursor, "copy", recording_copy)
    clock = [T0]
    stream = MemoryStream(PERSONA, backend=backend, embeddings=fake(), clock=lambda: clock[0])
    first = stream.add_event("玛丽亚 reads 物理", poignancy=5, keywords=["物理", "read"])
    stream.add_thought("玛丽亚 likes 物理", poignancy=7, evidence=[first.node_id])
    stream.add_chat("玛丽亚 and Klaus talk", poignancy=3, filling=[["玛丽亚", "你好"]])
    stream.update_settings(recency_w=0.5)
    stream.add_many([{"type": "event", "description": "no keywords now", "poignancy": 2,
                      "keywords": []}], state={"kw_strength": {"event": {}, "thought": {}}})
    for score_in in ("process", "database"):
        clock[0] += timedelta(hours=1)
        GenerativeAgentsRetriever(stream=stream, k=2, score_in=score_in).invoke("物理")
    stream.flush()
    stream.retrieve_relevant_events("玛丽亚", "reads", "物理")
    fresh = MemoryStream(PERSONA, backend=backend, embeddings=fake())  # loads every node
    stream.add_event("玛丽亚 writes 物理", poignancy=4, keywords=["物理"])
    assert fresh.refresh()  # catches up: the state with its strengths, the new node
    other = MemoryStream("Klaus", backend=backend, embeddings=fake())
    other.add_event("Klaus writes", poignancy=2)
    other.close()
    assert backend.personas() == sorted(["Klaus", PERSONA])
    backend.drop("Klaus")
    monkeypatch.undo()
    fresh.close()
    stream.close()
    return [(sql, p) for sql, p in sent if any(t in sql for t in TABLES)]


def listing_and_schema(sql: str) -> bool:
    """Listing every persona (the one statement over all of them) or fixing the vector size."""
    return sql.startswith(("SELECT persona_name FROM",
                           "ALTER TABLE memory_nodes ALTER COLUMN embedding"))


def test_every_statement_on_a_personas_rows_names_the_persona(dsn, monkeypatch):
    touching = statements_of_one_persona(dsn, monkeypatch)
    kinds = {sql.split()[0].upper() for sql, _ in touching}
    assert {"SELECT", "INSERT", "UPDATE", "DELETE", "COPY"} <= kinds
    listing = [sql for sql, _ in touching if sql.startswith("SELECT persona_name FROM")]
    assert len(listing) == 1  # listing personas: the one statement over all of them
    problems = []
    with psycopg.connect(dsn) as conn:
        from pgvector.psycopg import register_vector

        register_vector(conn)
        assert unfiltered_scans(conn, listing[0], None)  # the check sees a scan of everyone
        for sql, params in touching:
            verb = sql.split()[0].upper()
            if listing_and_schema(sql):
                continue
            if verb in ("INSERT", "COPY"):
                columns = sql[sql.index("(") + 1 : sql.index(")")]
                if "persona_name" not in columns.split(",")[0]:
                    problems.append(sql)
            elif verb in ("SELECT", "WITH", "UPDATE", "DELETE"):
                problems += [f"{b}: {sql}" for b in unfiltered_scans(conn, sql, params)]
            else:
                problems.append(f"unexpected statement: {sql}")
    assert problems == []


# A distributed PostgreSQL (Citus) routes a statement to one shard only when every genmem
# table it reads is constrained by persona_name = <value> in the same SELECT; PostgreSQL's
# own planner derives such conditions (so the plans above show them), Citus does not.
PERSONA_VALUE = r"persona_name\s*=\s*(?:%s|%\(\w+\)s)"
TABLE_USE = re.compile(r"\b(?:FROM|JOIN|UPDATE)\s+(" + "|".join(TABLES) + r")\b"
                       r"(?:\s+(?:AS\s+)?(?!(?:WHERE|JOIN|ON|SET|ORDER|GROUP|LIMIT)\b)(\w+))?",
                       re.IGNORECASE)


def select_scopes(sql: str) -> list[str]:
    """The statement and each parenthesised SELECT in it, each without the ones inside it."""
    scopes: list[str] = []
    stack: list[list[str]] = [[]]
    quoted = False
    for ch in sql:
        if ch == "'":
            quoted = not quoted
        if quoted or ch not in "()":
            stack[-1].append(ch)
        elif ch == "(":
            stack.append([])
        else:
            inner = "".join(stack.pop())
            if inner.lstrip().upper().startswith(("SELECT", "WITH")):
                scopes.append(inner)
                stack[-1].append("(subquery)")
            else:
                stack[-1].append(f"({inner})")
    return ["".join(stack[0]), *scopes]


def tables_without_their_persona(sql: str) -> list[str]:
    """Each genmem table a scope of ``sql`` reads without ``persona_name = <value>`` on it."""
    missing = []
    for scope in select_scopes(sql):
        uses = TABLE_USE.findall(scope)
        for table, alias in uses:
            named = re.search(rf"\b{alias}\.{PERSONA_VALUE}", scope) if alias else None
            if named is None and len(uses) == 1:  # one table: an unqualified column is its
                named = re.search(rf"(?<![\w.]){PERSONA_VALUE}", scope)
            if named is None:
                missing.append(f"{table} in: {scope.strip()}")
    return missing


def test_the_check_of_statement_texts_sees_a_table_left_to_a_join_condition():
    correlated = ("SELECT a, (SELECT count(*) FROM kw_strength k "
                  "WHERE k.persona_name = p.persona_name) FROM genmem_personas p "
                  "WHERE p.persona_name = %s")
    assert tables_without_their_persona(correlated) == [
        "kw_strength in: SELECT count(*) FROM kw_strength k "
        "WHERE k.persona_name = p.persona_name"]
    assert tables_without_their_persona(correlated.replace("= p.persona_name", "= %s")) == []
    assert tables_without_their_persona("SELECT persona_name FROM genmem_personas")


def test_every_statement_names_the_persona_in_each_table_it_reads(dsn, monkeypatch):
    touching = statements_of_one_persona(dsn, monkeypatch)
    assert any("FROM kw_strength" in sql and "FROM genmem_personas" in sql
               for sql, _ in touching)  # the state with its strengths: open and catch-up
    problems = [f"{gap}\n  statement: {sql}" for sql, _ in touching
                if not listing_and_schema(sql) for gap in tables_without_their_persona(sql)]
    assert problems == []


def test_the_citus_page_distributes_every_table_by_persona_name():
    page = (Path(__file__).resolve().parents[2] / "docs" / "citus.md").read_text("utf-8")
    for table in TABLES:
        assert f"create_distributed_table('{table}', 'persona_name'" in page


def persona_name_types(conn) -> dict[str, str]:
    rows = conn.execute(
        "SELECT table_name, data_type FROM information_schema.columns "
        "WHERE column_name = 'persona_name' AND table_name = ANY(%s)", (list(TABLES),)
    ).fetchall()
    return dict(rows)


def test_persona_name_has_one_type_in_every_table_so_they_colocate(dsn):
    from langchain_genmem.backends.postgres_schema import MIGRATIONS, VERSION_TABLE

    with psycopg.connect(dsn) as conn:  # a database a release of schema version 3 left
        conn.execute(VERSION_TABLE)
        for version, sql in MIGRATIONS[:3]:
            conn.execute(sql)
            conn.execute("INSERT INTO genmem_schema_version (version) VALUES (%s)", (version,))
        conn.execute("INSERT INTO kw_strength VALUES ('玛丽亚', '咖啡', 'event', 3)")
        conn.commit()
        assert persona_name_types(conn)["kw_strength"] == "character varying"
    PostgresBackend(dsn).close()  # migrates
    with psycopg.connect(dsn) as conn:
        assert set(persona_name_types(conn).values()) == {"text"}
        assert conn.execute("SELECT * FROM kw_strength").fetchall() == [
            ("玛丽亚", "咖啡", "event", 3)]
