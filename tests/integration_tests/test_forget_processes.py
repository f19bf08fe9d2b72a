"""Forgetting across processes: other processes find nothing forgotten; a killed forget is whole.

Real child processes read what a forget left: an embedded folder opened after the forgetting
process closed it, a Chroma server and a PostgreSQL database whose streams were open (and
caught up) before the forget. A child forgetting is killed with SIGKILL at an exact point of
its forget (before the commit point, between the deletions of the records, inside the
database transaction): the memories are then all there or all forgotten, and the next write
finishes what the store left.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem.memory.stream import MemoryStream
from tests.support import warm
from tests.support.forgotten import START, Seeded, assert_forgotten, memories
from tests.support.writers import kill_when_paused, spawn_python

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
P = "玛丽亚 Lopez"

# Opens the stream a JSON argument describes (a folder, a Chroma server or a database).
OPEN = textwrap.dedent(
    """
    import json, sys
    from datetime import datetime
    import chromadb
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_genmem.memory.stream import MemoryStream

    def open_stream(where, **kwargs):
        where = dict(where)
        if "host" in where:
            where["client"] = chromadb.HttpClient(host=where.pop("host"), port=where.pop("port"))
        return MemoryStream("玛丽亚 Lopez", embeddings=DeterministicFakeEmbedding(size=16),
                            clock=lambda: datetime(2023, 2, 14, 8), **where, **kwargs)
    """
)

CHECK = OPEN + textwrap.dedent(
    """
    from tests.support.forgotten import assert_forgotten
    where, ids, texts, keywords, write = json.loads(sys.argv[1])
    for lazy in ((False, True) if "dsn" in where else (False,)):
        stream = open_stream(where, lazy=lazy)
        assert_forgotten(stream, ids, texts, keywords)
    if write:
        stream.add_event("玛丽亚去了博物馆", poignancy=3)
    print(json.dumps({"live": len(stream), "ids": [n.node_id for n in stream.nodes()]}))
    """
)

FORGET = OPEN + textwrap.dedent(
    """
    where, ids = json.loads(sys.argv[1])
    report = open_stream(where).forget(ids)
    print(json.dumps(report.to_dict()))
    """
)

# Stops the forget at a point and waits there for SIGKILL: before the state record is
# written (Chroma's commit point), after the first deletion of records (after it), or once
# the backend's forget returned inside the write lock (PostgreSQL: before COMMIT).
KILLED = OPEN + textwrap.dedent(
    """
    import os, time
    from pathlib import Path
    where, ids, point, ready = json.loads(sys.argv[1])
    stream = open_stream(where)

    def pause():
        Path(ready).write_text(str(os.getpid()))
        while True:
            time.sleep(60)

    class Pausing:
        def __init__(self, inner, method):
            self.inner, self.method = inner, method
        def __getattr__(self, name):
            return getattr(self.inner, name)
        def upsert(self, **kw):
            if self.method == "upsert":
                pause()
            return self.inner.upsert(**kw)
        def delete(self, **kw):
            self.inner.delete(**kw)
            mine = {"玛丽亚 Lopez::" + i for i in ids}
            if self.method == "delete" and mine & set(kw.get("ids") or ()):
                pause()  # a forgotten node's record deleted, the others not yet

    backend = stream.backend
    if point == "before_commit":
        backend.states = Pausing(backend.states, "upsert")
    elif point == "deleting":
        backend.batch = 1
        backend.nodes = Pausing(backend.nodes, "delete")
    else:
        forget = backend.forget
        def forget_then_pause(*args, **kwargs):
            forget(*args, **kwargs)
            pause()
        backend.forget = forget_then_pause
    stream.forget(ids)
    raise SystemExit("the forget was not paused")
    """
)


def fake() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=16)


def child(code: str, *args: Any) -> dict[str, Any]:
    """Run a child Python from the repository root (it imports tests.support); its JSON."""
    argv = [sys.executable, "-c", code, json.dumps(list(args), ensure_ascii=False)]
    done = warm.shared().run(argv, timeout=300, cwd=ROOT, env={
        **os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])})
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def open_here(where: dict[str, Any], **kwargs: Any) -> MemoryStream:
    where = dict(where)
    if "host" in where:
        import chromadb

        where["client"] = chromadb.HttpClient(host=where.pop("host"), port=where.pop("port"))
    return MemoryStream(P, embeddings=fake(), clock=lambda: START + timedelta(days=1),
                        **where, **kwargs)


def forgotten_of(seeds: Seeded, *names: str) -> tuple[list[str], list[str], list[str]]:
    return ([seeds[n] for n in names], [seeds.text[n] for n in names],
            [seeds.keyword[n] for n in names])


@pytest.fixture(params=["server", "postgres"])
def shared(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """A store many processes use at once: a Chroma server collection or a database."""
    if request.param == "server":
        server = request.getfixturevalue("chroma_server")
        yield {"host": server.host, "port": server.port,
               "collection_name": f"forget_{uuid.uuid4().hex[:12]}"}
        return
    server = request.getfixturevalue("postgres_server")
    name = f"t_{uuid.uuid4().hex[:16]}"
    yield {"dsn": server.create_database(name)}
    server.drop_database(name)


def test_a_process_opening_the_folder_after_a_forget_finds_nothing(tmp_path: Path) -> None:
    where = {"path": str(tmp_path / "store")}
    stream = open_here(where)
    seeds = memories(stream)
    report = stream.forget([seeds["library"]], keep_derived=False)
    assert report.derived == (seeds["insight"], seeds["deeper"])
    stream.forget(speaker="Maria", conversation="chat-上海")
    stream.close()
    names = ("library", "insight", "deeper", "turn2")
    seen = child(CHECK, where, *forgotten_of(seeds, *names), True)
    assert seen == {"live": 5, "ids": ["node_9", seeds["travel"], seeds["cafe"], seeds["turn1"],
                                       seeds["breakfast"]]}


def test_open_streams_of_other_processes_catch_up_with_a_forget(shared: dict[str, Any]) -> None:
    here = open_here(shared)
    seeds = memories(here)
    lazy = open_here(shared, lazy=True) if "dsn" in shared else None
    report = child(FORGET, shared, [seeds["breakfast"], seeds["cafe"]])
    assert report["forgotten"] == [seeds["breakfast"], seeds["cafe"], seeds["deeper"]]
    gone = forgotten_of(seeds, "breakfast", "cafe", "deeper")
    assert_forgotten(here, *gone)  # open before the forget: caught up at its next retrieval
    if lazy is not None:
        assert_forgotten(lazy, *gone)
    seen = child(CHECK, shared, *gone, True)
    assert seen["live"] == 6 and seen["ids"][0] == "node_9"
    for stream in (here, lazy):
        if stream is not None:
            stream.close()


def killed_forget(tmp_path: Path, names: list[str], point: str) -> tuple[dict, Any, list[str]]:
    """Seed an embedded folder, then kill a process forgetting ``names`` at ``point``.

    Returns:
        The folder (as ``open_here`` takes it), the seeds, and the ids the forget was given.
    """
    where = {"path": str(tmp_path / "store")}
    stream = open_here(where)
    seeds = memories(stream)
    stream.close()
    ids = [seeds[name] for name in names]
    ready, log = tmp_path / "ready", tmp_path / "killed.log"
    proc = spawn_python(KILLED, json.dumps([where, ids, point, str(ready)]), log_path=log)
    kill_when_paused(proc, ready, log)
    return where, seeds, ids


@pytest.mark.parametrize("point", ["before_commit", "deleting"])
def test_a_forget_killed_on_an_embedded_folder_is_all_or_nothing(
    point: str, tmp_path: Path,
) -> None:
    where, seeds, ids = killed_forget(tmp_path, ["library", "cafe"], point)
    records = _raw_texts(where["path"])
    if point == "before_commit":  # nothing happened: every memory is there, forgettable
        assert seeds.text["library"] in records and seeds.text["cafe"] in records
        seen = child(CHECK, where, [], [], [], False)
        assert seen["live"] == 8
        report = child(FORGET, where, ids)
        assert report["forgotten"] == [*ids, seeds["insight"], seeds["deeper"]]
        return
    # committed: a reader sees all of it gone although records of it are still in Chroma
    # (their fields already erased: only persona and number are left until the delete)
    assert seeds.text["cafe"] not in records and seeds.text["library"] not in records
    numbers = [json.loads(r).get("node_count") for r in records.split("\x00")]
    assert any(int(seeds[name].split("_")[1]) in numbers for name in ("cafe", "library"))
    gone = forgotten_of(seeds, "library", "insight", "deeper", "cafe")
    seen = child(CHECK, where, *gone, True)  # its write finishes the deletions
    assert seen["live"] == 5
    assert all(text not in _raw_texts(where["path"]) for text in gone[1])


def test_a_forget_killed_inside_the_database_transaction_forgets_nothing(
    postgres_server: Any, tmp_path: Path,
) -> None:
    name = f"t_{uuid.uuid4().hex[:16]}"
    where = {"dsn": postgres_server.create_database(name)}
    try:
        stream = open_here(where)
        seeds = memories(stream)
        ready, log = tmp_path / "ready", tmp_path / "killed.log"
        proc = spawn_python(KILLED, json.dumps([where, [seeds["cafe"]], "in_lock", str(ready)]),
                            log_path=log)
        kill_when_paused(proc, ready, log)
        assert child(CHECK, where, [], [], [], False)["live"] == 8
        assert stream.forget([seeds["cafe"]]).forgotten == (seeds["cafe"],)
        assert_forgotten(stream, *forgotten_of(seeds, "cafe"))
        stream.close()
    finally:
        postgres_server.drop_database(name)


def _raw_texts(folder: str) -> str:
    """Every text of the persona's node records in the Chroma folder, read in a child."""
    code = textwrap.dedent(
        """
        import json, sys
        from langchain_genmem.backends.chroma import ChromaBackend, persistent_client
        backend = ChromaBackend(persistent_client(json.loads(sys.argv[1])[0]))
        got = backend.nodes.get(where={"persona": "玛丽亚 Lopez"}, include=["metadatas"])
        print(json.dumps({"texts": [json.dumps(m, ensure_ascii=False) for m in got["metadatas"]]}))
        """
    )
    return "\x00".join(child(code, folder)["texts"])
