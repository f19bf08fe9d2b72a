"""A single add whose server lease is lost mid-write is never seen by a reader.

Real processes on a `chroma run` server: writer A stores a single memory's record (the
record is its own commit) and is then frozen with SIGSTOP before it can check its lease and
give it back; its lease expires and writer B takes the persona over. A reader polling the
server throughout must never see A's memory, B's memory must survive A's clean-up when A
is thawed, and A must report that nothing was committed.
"""

from __future__ import annotations

import json
import os
import signal
import textwrap
import time
from pathlib import Path

import chromadb
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import MemoryStream
from langchain_genmem.backends.chroma import ChromaBackend
from tests.support.writers import check_consistent, read_stream, run_python, wait_files

pytestmark = pytest.mark.slow

PERSONA = "玛丽亚 Lopez"
TTL = 2.0

# argv[1]: JSON {where, collection, ready, go}. Two single adds, then a third whose record
# is written and which then waits (with its lease held) for `go` before checking the lease.
STALLING_WRITER = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    import chromadb
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_genmem import GenMemError, MemoryStream
    from langchain_genmem.backends.chroma import ChromaBackend

    o = json.loads(sys.argv[1])
    host, port = o["where"][7:].split(":")
    backend = ChromaBackend(chromadb.HttpClient(host=host, port=int(port)), o["collection"],
                            lease_ttl=o["ttl"])
    s = MemoryStream("玛丽亚 Lopez", backend=backend,
                     embeddings=DeterministicFakeEmbedding(size=8))
    s.add_event("kept 保留 1", poignancy=1)
    s.add_event("kept 保留 2", poignancy=1)
    nodes = backend.nodes

    class Stalling:
        def __getattr__(self, name):
            return getattr(nodes, name)

        def upsert(self, **kw):
            nodes.upsert(**kw)
            Path(o["ready"]).write_text(str(os.getpid()))
            while not Path(o["go"]).exists():
                time.sleep(0.05)

    backend.nodes = Stalling()
    error = None
    try:
        s.add_event("lost 丢失", poignancy=9)
    except GenMemError as e:
        error = {"type": type(e).__name__, "message": str(e)}
    print(json.dumps({"error": error, "len": len(s)}, ensure_ascii=False))
    """
)

SINGLE_ADD = textwrap.dedent(
    """
    import json, sys
    import chromadb
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_genmem import MemoryStream
    from langchain_genmem.backends.chroma import ChromaBackend

    where, collection, text = sys.argv[1], sys.argv[2], sys.argv[3]
    host, port = where[7:].split(":")
    s = MemoryStream("玛丽亚 Lopez", backend=ChromaBackend(
        chromadb.HttpClient(host=host, port=int(port)), collection),
        embeddings=DeterministicFakeEmbedding(size=8))
    node = s.add_event(text, poignancy=2)
    print(json.dumps({"node_id": node.node_id, "len": len(s)}, ensure_ascii=False))
    """
)


def test_a_single_add_that_lost_its_lease_is_never_seen(spawned, chroma_server, tmp_path: Path):
    where, collection = f"http://127.0.0.1:{chroma_server.port}", "lease-fencing"
    ready, go, log = tmp_path / "ready", tmp_path / "go", tmp_path / "a.log"
    writer = spawned(STALLING_WRITER, json.dumps({
        "where": where, "collection": collection, "ready": str(ready), "go": str(go),
        "ttl": TTL}), log_path=log)
    reader = MemoryStream(PERSONA, backend=ChromaBackend(chroma_server.client(), collection),
                          embeddings=DeterministicFakeEmbedding(size=8))
    seen: list[list[str]] = []

    def look() -> None:
        reader.refresh()
        seen.append([n.description for n in reversed(reader.nodes())])

    wait_files(ready)  # A's record is stored; A still holds the lease
    look()
    os.kill(writer.pid, signal.SIGSTOP)  # A freezes, heartbeat and all
    try:
        deadline = time.monotonic() + TTL + 1.0
        while time.monotonic() < deadline:  # its lease runs out meanwhile
            look()
            time.sleep(0.1)
        took_over = run_python(SINGLE_ADD, where, collection, "from B 来自")
        assert took_over == {"node_id": "node_3", "len": 3}
        look()
    finally:
        os.kill(writer.pid, signal.SIGCONT)
    go.write_text("go")
    writer.wait(timeout=120)
    result = json.loads(log.read_text(encoding="utf-8").strip().splitlines()[-1])
    look()

    assert result["error"]["type"] == "ConcurrentWriterError"
    assert "lease was lost" in result["error"]["message"] and result["len"] == 2
    assert all("lost 丢失" not in view for view in seen)
    assert seen[0] == ["kept 保留 1", "kept 保留 2"]
    assert seen[-1] == ["kept 保留 1", "kept 保留 2", "from B 来自"]
    dump = read_stream(where, collection)
    check_consistent(dump, ["kept 保留 1", "kept 保留 2", "from B 来自"])
    leftovers = chromadb.HttpClient(host="127.0.0.1", port=chroma_server.port).get_collection(
        collection).get(where={"node_count": {"$gt": 3}}, include=[])
    assert leftovers["ids"] == []
