"""Reads that stay right while the same persona's memories are forgotten, on every backend.

One thread forgets memories one by one through the library while three threads read the
same stream: weighted retrieval (hybrid relevance in process, so each result carries a
lexical score; dense in the database), keyword lookups and reads by id. Every memory that
comes back must carry the text its id was written with and a lexical score above 0 exactly
when it holds a query word; one whose forget returned before the read began never comes
back; no read fails. Access times then moved on exactly the memories retrievals returned,
in process and in the store. See `tests/support/read_while_forget.py`.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream
from langchain_genmem.core.errors import UnknownNodeError
from langchain_genmem.core.timeutil import to_epoch
from tests.support.read_while_forget import (
    KEYWORDS,
    NOW,
    QUERIES,
    Ledger,
    check_documents,
    check_nodes,
    items,
    run,
    served_run,
)

P = "玛丽亚"
MEMORIES = 300
BACKENDS = ["memory", "folder", "chroma-server", "postgres", "postgres-in-database"]
# memories forgotten one by one: fewer where a forget takes longer (a Chroma server's
# forget is some ten HTTP calls), so that each test takes a few seconds
FORGETS = {"memory": 100, "folder": 60, "chroma-server": 30, "postgres": 100,
           "postgres-in-database": 100}


def fake() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=32)


@pytest.fixture(params=BACKENDS)
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The MemoryStream arguments of a fresh store of each kind, how to rank, how many go."""
    kind = request.param
    forgets = {"forgets": FORGETS[kind]}
    if kind == "memory":
        yield forgets
    elif kind == "folder":
        yield {"path": str(tmp_path / "store"), **forgets}
    elif kind == "chroma-server":
        server = request.getfixturevalue("chroma_server")
        yield {"client": server.client(), "collection_name": f"c{uuid.uuid4().hex[:12]}",
               **forgets}
    else:
        server = request.getfixturevalue("postgres_server")
        yield {"dsn": server.create_database(f"rwf_{uuid.uuid4().hex[:12]}"),
               "score_in": "database" if kind.endswith("database") else "process", **forgets}


def test_reads_never_return_a_wrong_memory_or_fail_while_memories_are_forgotten(
    where: dict[str, Any],
) -> None:
    score_in = where.pop("score_in", "process")
    forgets = where.pop("forgets")
    stream = MemoryStream(P, embeddings=fake(), clock=lambda: NOW, **where)
    ledger = Ledger()
    written = stream.add_many(items(MEMORIES))
    ledger.written = {n.node_id: item for n, item in zip(written, items(MEMORIES), strict=True)}
    ids = [n.node_id for n in written]
    victims = random.Random(7).sample(ids, forgets)
    hybrid = {"relevance": "hybrid"} if score_in == "process" else {}
    retriever = GenerativeAgentsRetriever(stream=stream, k=10, score_in=score_in, **hybrid)

    def retrieve(rng: random.Random) -> None:
        query = rng.choice(QUERIES)
        before = ledger.gone_now()
        report = retriever.retrieve_with_report(query)
        check_documents(ledger, query, before, [
            (d.metadata["node_id"], d.page_content, d.metadata.get("bm25"))
            for d in report.documents])
        assert report.accessed_ids == [d.metadata["node_id"] for d in report.documents]

    def look_up(rng: random.Random) -> None:
        keyword = rng.choice(KEYWORDS)
        before = ledger.gone_now()
        nodes = stream.retrieve_relevant_events(keyword, "", "")
        check_nodes(ledger, keyword, before, [(n.node_id, n.description, n.keywords)
                                              for n in nodes])

    def read_one(rng: random.Random) -> None:
        node_id = rng.choice(ids)
        before = ledger.gone_now()
        try:
            node = stream.get(node_id)
        except UnknownNodeError:
            if node_id not in victims:
                ledger.problem(f"get({node_id}) said it is no memory; it was never forgotten")
            return
        check_documents(ledger, "", before, [(node.node_id, node.description, None)],
                        accessed=False)

    run(lambda node_id: stream.forget([node_id]), [retrieve, look_up, read_one], victims,
        ledger)
    assert ledger.problems == []
    assert ledger.reads >= 90
    assert len(stream) == MEMORIES - forgets

    stream.flush()
    accessed = {n.node_id: n.last_accessed for n in stream.nodes()}
    place = where or {"backend": stream.backend}  # in memory: the same store, reopened
    again = MemoryStream(P, embeddings=fake(), clock=lambda: NOW, **place)
    stored = {n.node_id: n.last_accessed for n in again.nodes()}
    for node_id, item in ledger.written.items():
        if node_id in victims:
            assert node_id not in accessed and node_id not in stored
            continue
        want = NOW if node_id in ledger.returned else datetime_of(item["created"])
        assert to_epoch(accessed[node_id]) == pytest.approx(to_epoch(want)), node_id
        assert to_epoch(stored[node_id]) == pytest.approx(to_epoch(want)), node_id
    again.close()
    stream.close()


def datetime_of(text: str) -> Any:
    from datetime import datetime

    return datetime.fromisoformat(text)


# --- through `genmem serve`: one process forgets, three clients read ----------------------

ADMIN = "admin-key-0123456789abcdef"
SERVED = ["folder", "chroma-server", "postgres", "postgres-in-database"]


@pytest.fixture(params=SERVED)
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A running `genmem serve` over a fresh store of each kind: its URL, how many go."""
    from tests.support.genmem_server import GenmemServer

    kind, args = request.param, ["--api-key", ADMIN, "--create"]
    global_args = ["--now", NOW.isoformat()]
    if kind == "chroma-server":
        server = request.getfixturevalue("chroma_server")
        global_args += ["--chroma-host", server.host, "--chroma-port", str(server.port),
                        "--collection", f"c{uuid.uuid4().hex[:12]}"]
    elif kind.startswith("postgres"):
        pg = request.getfixturevalue("postgres_server")
        global_args += ["--dsn", pg.create_database(f"rwf_{uuid.uuid4().hex[:12]}")]
        if kind.endswith("database"):
            args += ["--score-in", "database"]
    with GenmemServer(tmp_path / "store", *args, global_args=global_args) as srv:
        yield srv.url, FORGETS[kind]


@pytest.mark.slow
def test_clients_of_a_server_never_get_a_wrong_memory_or_an_error_while_it_forgets(
    served: tuple[str, int], request: pytest.FixtureRequest,
) -> None:
    url, forgets = served
    in_database = request.node.callspec.params["served"].endswith("database")
    ledger = served_run(url, ADMIN, P, memories=MEMORIES, forgotten=forgets,
                        in_database=in_database)
    assert ledger.problems == []
    assert ledger.reads >= 60
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}) as http:
        stats = http.get(f"/personas/{P}").json()
    assert stats["memories"] == MEMORIES - forgets


# --- the LangGraph store: one instance deletes items, another searches and gets them -----


def test_a_stores_searches_and_gets_stay_right_while_another_store_deletes(
    postgres_server,
) -> None:
    from langchain_genmem import GenerativeAgentsStore

    dsn = postgres_server.create_database(f"rwf_{uuid.uuid4().hex[:12]}")
    writer = GenerativeAgentsStore(dsn=dsn, embeddings=fake(), clock=lambda: NOW)
    reader = GenerativeAgentsStore(dsn=dsn, embeddings=fake(), clock=lambda: NOW)
    ns = ("users", "玛丽亚")
    sent = items(120)
    for i, item in enumerate(sent):
        writer.put(ns, f"k{i}", {"content": item["description"], "n": i})
    keys = [f"k{i}" for i in range(len(sent))]
    victims = random.Random(3).sample(keys, 60)
    ledger = Ledger()
    ledger.written = {f"k{i}": item for i, item in enumerate(sent)}

    def search(rng: random.Random) -> None:
        query = rng.choice(QUERIES)
        before = ledger.gone_now()
        found = reader.search(ns, query=query, limit=10)
        check_documents(ledger, query, before, [(f.key, f.value["content"], None)
                                                for f in found], accessed=False)
        assert all(f.value["n"] == int(f.key[1:]) for f in found)

    def get(rng: random.Random) -> None:
        key = rng.choice(keys)
        before = ledger.gone_now()
        got = reader.get(ns, key)
        if got is None:
            if key not in victims:
                ledger.problem(f"get({key}) found nothing; it was never deleted")
            return
        check_documents(ledger, "", before, [(got.key, got.value["content"], None)],
                        accessed=False)

    run(lambda key: writer.delete(ns, key), [search, search, get], victims, ledger)
    assert ledger.problems == []
    assert len(reader.search(ns, limit=200)) == 60
    writer.close()
    reader.close()


# --- the LangGraph store's TTL: one process sweeps, another reads ----------------------------

SWEEPER = """
import json, sys, time
import chromadb
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_genmem import GenerativeAgentsStore

where = json.loads(sys.argv[1])
if "host" in where:
    where = {"client": chromadb.HttpClient(host=where.pop("host"), port=where.pop("port")),
             **where}
store = GenerativeAgentsStore(embeddings=DeterministicFakeEmbedding(size=32), **where)
ns = ("users", "玛丽亚")
expires = {}  # the latest each item may expire: its put's return, plus its ttl
for i in range(40):
    ttl = 0.01 + 0.001 * i  # 0.6 s to 2.9 s, in minutes
    store.put(ns, f"k{i}", {"content": f"记忆 {i} expires"}, ttl=ttl)
    expires[f"k{i}"] = time.time() + ttl * 60
print(json.dumps(expires), flush=True)
swept = 0
end = time.time() + 3.5
while time.time() < end:
    swept += store.sweep_ttl()
    time.sleep(0.2)
print(json.dumps({"swept": swept}), flush=True)
store.close()
"""


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["chroma-server", "postgres"])
def test_a_store_never_returns_an_item_expired_while_another_process_sweeps(
        kind, request, tmp_path) -> None:
    import json
    import subprocess
    import sys
    import time

    from langchain_genmem import GenerativeAgentsStore

    if kind == "chroma-server":
        server = request.getfixturevalue("chroma_server")
        collection = f"c{uuid.uuid4().hex[:12]}"
        given = {"host": server.host, "port": server.port, "collection_name": collection}
        mine = {"client": server.client(), "collection_name": collection}
    else:
        dsn = request.getfixturevalue("postgres_server").create_database(
            f"ttl_{uuid.uuid4().hex[:12]}")
        given = mine = {"dsn": dsn}
    child = subprocess.Popen([sys.executable, "-c", SWEEPER, json.dumps(given)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    expires = json.loads(child.stdout.readline() or "null")
    assert expires, child.stderr.read() if child.stderr else ""
    reader = GenerativeAgentsStore(embeddings=fake(), **mine)
    ns = ("users", "玛丽亚")
    late, reads = [], 0
    while child.poll() is None:
        began = time.time()
        found = [*reader.search(ns, query="记忆", limit=50, refresh_ttl=False),
                 *filter(None, [reader.get(ns, f"k{reads % 40}", refresh_ttl=False)])]
        late += [(item.key, round(began - expires[item.key], 3)) for item in found
                 if expires[item.key] < began]
        reads += 1
    out, err = child.communicate()
    assert child.returncode == 0, err
    assert json.loads(out.splitlines()[-1])["swept"] == 40
    assert late == [] and reads > 10
    assert reader.search(ns, query="记忆") == []
    reader.close()
