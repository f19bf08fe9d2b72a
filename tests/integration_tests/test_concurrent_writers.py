"""Several processes writing one persona: all memories kept, or a writer refused by name.

Real processes on one embedded Chroma folder and on one `chroma run` server. On a server the
writers are serialised by a lease and number after each other; on a folder a second writing
process is refused with ConcurrentWriterError naming the first, and so is a read that
another process's write made impossible (tests/integration_tests/test_folder_races.py races
them), never a raw chromadb error.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.support.processes import stop_process
from tests.support.writers import (
    PAUSE_HOOKS,
    check_consistent,
    kill_when_paused,
    read_stream,
    run_python,
    wait_files,
)

pytestmark = pytest.mark.slow

PERSONA = "玛丽亚 Lopez"

# argv[1]: JSON options. where: a folder or "http://host:port"; tag; count; collection;
# lock_timeout; lease_ttl; pause (a PAUSE_HOOKS point) and ready; barrier: a file to wait
# for before writing (the process first writes "<barrier>.<tag>"); hold: a file to wait for
# after writing (the process first writes "<hold>.<tag>"). Prints what it did as JSON.
WRITER = PAUSE_HOOKS + textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    import chromadb
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_genmem import ConcurrentWriterError, GenMemError, MemoryStream
    from langchain_genmem.backends.chroma import ChromaBackend

    o = json.loads(sys.argv[1])
    if o["where"].startswith("http://"):
        host, port = o["where"][7:].split(":")
        client = chromadb.HttpClient(host=host, port=int(port))
    else:
        client = chromadb.PersistentClient(path=o["where"])
    backend = ChromaBackend(client, o.get("collection", "genmem"),
                            lock_timeout=o.get("lock_timeout"),
                            lease_ttl=o.get("lease_ttl", 30))
    if o.get("pause"):
        pause_at(backend, o["pause"], o["ready"])
    s = MemoryStream("玛丽亚 Lopez", backend=backend,
                     embeddings=DeterministicFakeEmbedding(size=8))

    def wait_for(name):
        Path(o[name] + "." + o["tag"]).write_text(str(os.getpid()))
        while not Path(o[name]).exists():
            time.sleep(0.02)

    if o.get("barrier"):
        wait_for("barrier")
    done, error = 0, None
    try:
        for i in range(o["count"]):
            text = f"{o['tag']} 事件 {i}"
            if i % 10 == 9:  # some batches, some single writes
                s.add_many([{"type": "event", "description": text, "poignancy": 2,
                             "subject": o["tag"], "predicate": "does", "object": f"thing {i}"},
                            {"type": "thought", "description": text + " thought",
                             "poignancy": 3, "subject": o["tag"], "predicate": "thinks",
                             "object": "things", "evidence": ["node_1"]}])
            else:
                s.add_event(text, poignancy=2, subject=o["tag"], predicate="does",
                            object=f"thing {i}")
            done += 1
    except GenMemError as e:
        error = {"type": type(e).__name__, "message": str(e),
                 "holder": getattr(e, "holder", None)}
    if o.get("hold"):
        wait_for("hold")
    print(json.dumps({"pid": os.getpid(), "done": done, "error": error, "len": len(s)},
                     ensure_ascii=False))
    """
)



def expected_descriptions(tag: str, count: int) -> list[str]:
    out = []
    for i in range(count):
        out.append(f"{tag} 事件 {i}")
        if i % 10 == 9:
            out.append(f"{tag} 事件 {i} thought")
    return out




def finish(proc, log: Path) -> dict:
    try:
        proc.wait(timeout=300)
    finally:
        stop_process(proc)
    text = log.read_text(encoding="utf-8")
    assert proc.returncode == 0, text[-4000:]
    return json.loads(text.strip().splitlines()[-1])




def test_two_processes_on_one_server_both_keep_every_memory(spawned, chroma_server, tmp_path: Path):
    where, collection = f"http://127.0.0.1:{chroma_server.port}", "two-writers"
    barrier = tmp_path / "go"
    procs = []
    for tag in ("A", "B"):
        opts = {"where": where, "collection": collection, "tag": tag, "count": 30,
                "barrier": str(barrier)}
        log = tmp_path / f"{tag}.log"
        procs.append((spawned(WRITER, json.dumps(opts), log_path=log), log))
    wait_files(tmp_path / "go.A", tmp_path / "go.B")
    barrier.write_text("go")  # both start writing at once
    results = [finish(p, log) for p, log in procs]
    assert [r["error"] for r in results] == [None, None]
    dump = read_stream(where, collection)
    check_consistent(dump, expected_descriptions("A", 30) + expected_descriptions("B", 30))


def test_a_dead_lease_holder_blocks_only_until_its_lease_expires(
    spawned, chroma_server, tmp_path: Path
):
    where, collection = f"http://127.0.0.1:{chroma_server.port}", "dead-holder"
    ready = tmp_path / "paused"
    log = tmp_path / "holder.log"
    holder = spawned(WRITER, json.dumps({
        "where": where, "collection": collection, "tag": "H", "count": 1, "lease_ttl": 3,
        "pause": "in_lock", "ready": str(ready)}), log_path=log)
    wait_files(ready)
    pid = int(ready.read_text())
    # alive (its heartbeat renews the 3 s lease): a writer waiting 5 s is refused by name
    refused = run_python(WRITER, json.dumps({
        "where": where, "collection": collection, "tag": "W", "count": 1, "lock_timeout": 5}))
    assert refused["error"]["type"] == "ConcurrentWriterError"
    assert f"pid {pid}" in refused["error"]["holder"]
    assert f"pid {pid}" in refused["error"]["message"] and refused["done"] == 0
    # killed inside the lock: its lease expires and the next writer goes on
    kill_when_paused(holder, ready, log)
    after = run_python(WRITER, json.dumps({
        "where": where, "collection": collection, "tag": "W", "count": 3}))
    assert after["error"] is None and after["len"] == 3
    check_consistent(read_stream(where, collection), expected_descriptions("W", 3))


def test_a_second_process_writing_a_folder_is_refused_by_name(spawned, tmp_path: Path):
    folder = str(tmp_path / "store")
    hold = tmp_path / "release"
    log = tmp_path / "first.log"
    first = spawned(WRITER, json.dumps({
        "where": folder, "tag": "A", "count": 20, "hold": str(hold)}), log_path=log)
    wait_files(tmp_path / "release.A")
    pid = int((tmp_path / "release.A").read_text())
    second = run_python(WRITER, json.dumps({"where": folder, "tag": "B", "count": 5}))
    assert second["done"] == 0 and second["error"]["type"] == "ConcurrentWriterError"
    assert f"pid {pid}" in second["error"]["message"]
    assert "chroma run" in second["error"]["message"]
    hold.write_text("go")
    assert finish(first, log)["error"] is None
    # the first process has exited: the folder takes the next writer, numbered after it
    third = run_python(WRITER, json.dumps({"where": folder, "tag": "C", "count": 5}))
    assert third["error"] is None and third["len"] == 20 + 5 + 2
    check_consistent(read_stream(folder, "genmem"),
                     expected_descriptions("A", 20) + expected_descriptions("C", 5))


def test_a_writer_killed_on_a_folder_does_not_block_the_next(spawned, tmp_path: Path):
    folder = str(tmp_path / "store")
    ready = tmp_path / "paused"
    log = tmp_path / "killed.log"
    proc = spawned(WRITER, json.dumps({
        "where": folder, "tag": "K", "count": 1, "pause": "in_lock", "ready": str(ready)}),
        log_path=log)
    kill_when_paused(proc, ready, log)
    after = run_python(WRITER, json.dumps({"where": folder, "tag": "N", "count": 3,
                                           "lock_timeout": 1}))
    assert after["error"] is None and after["len"] == 3


READER = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_genmem import GenerativeAgentsRetriever, GenMemError, MemoryStream

    folder, ready, go = sys.argv[1:4]
    s = MemoryStream("玛丽亚 Lopez", path=folder, embeddings=DeterministicFakeEmbedding(size=8))
    # a pure reader: marking memories accessed is a write, which takes the folder
    r = GenerativeAgentsRetriever(stream=s, k=100, update_access=False)
    before = len(r.invoke("事件"))
    Path(ready).write_text(str(os.getpid()))
    while not Path(go).exists():
        time.sleep(0.02)
    outcome = {"before": before}
    for attempt in range(3):
        try:
            outcome["after"] = len(r.invoke("事件"))
        except GenMemError as e:
            outcome["error"] = {"type": type(e).__name__, "message": str(e)}
    print(json.dumps(outcome, ensure_ascii=False))
    """
)


def test_a_reader_of_a_folder_another_process_wrote_is_told_who_or_works(
    spawned, tmp_path: Path
):
    folder = str(tmp_path / "store")
    assert run_python(WRITER, json.dumps({"where": folder, "tag": "A", "count": 5}))["len"] == 5
    ready, go, log = tmp_path / "ready", tmp_path / "go", tmp_path / "reader.log"
    reader = spawned(READER, folder, str(ready), str(go), log_path=log)
    wait_files(ready)
    wrote = run_python(WRITER, json.dumps({"where": folder, "tag": "B", "count": 20}))
    assert wrote["error"] is None and wrote["len"] == 5 + 20 + 2
    go.write_text("go")
    seen = finish(reader, log)  # a raw chromadb error would end the reader with a traceback
    assert seen["before"] == 5
    if "error" in seen:  # its Chroma index misses that write: it is told who wrote
        assert seen["error"]["type"] == "ConcurrentWriterError"
        assert "Chroma server or PostgreSQL" in seen["error"]["message"]
        assert f"pid {wrote['pid']}" in seen["error"]["message"]  # names the writer
        assert "Error finding id" not in seen["error"]["message"]
    else:
        assert seen["after"] == 5 + 20 + 2
