"""Processes racing on one embedded Chroma folder: they wait for a write, or are told who wrote.

A process that opens or reads a persona while another process writes it waits for the write
in flight and then works, or gets ConcurrentWriterError naming the writer; never an error from
inside Chroma (``Error finding id``), which is what a reader met when its first read of the
folder and the state it read next straddled another process's commit, and at every read after
another process wrote.
"""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import pytest

from tests.support.processes import log_tail, stop_process
from tests.support.writers import check_consistent, read_stream, run_python, wait_files

pytestmark = pytest.mark.slow

PERSONA = "玛丽亚 Lopez"

# argv[1]: JSON options: folder; role "writer" (writes until the file `stop` exists, `first`
# appears once its first memory is stored) or "racer" (opens once `first` exists, reads,
# refreshes, then tries one write). Prints what happened as JSON.
RACER = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    import chromadb
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_genmem import GenMemError, GenerativeAgentsRetriever, MemoryStream
    from langchain_genmem.backends.chroma import ChromaBackend

    o = json.loads(sys.argv[1])
    EMB = DeterministicFakeEmbedding(size=8)

    def stream():
        backend = ChromaBackend(chromadb.PersistentClient(path=o["folder"]),
                                lock_timeout=o.get("lock_timeout"))
        return MemoryStream("玛丽亚 Lopez", backend=backend, embeddings=EMB)

    def outcome(step, run):
        try:
            return {"step": step, "ok": True, "value": run()}
        except GenMemError as e:
            return {"step": step, "ok": False, "type": type(e).__name__, "message": str(e),
                    "holder": getattr(e, "holder", None)}

    if o["role"] == "writer":
        s, done = stream(), 0
        while not Path(o["stop"]).exists() and done < o["limit"]:
            if done % 7 == 6:
                s.add_many([{"type": "event", "description": f"W 事件 {done}", "poignancy": 2},
                            {"type": "thought", "description": f"W 事件 {done} thought",
                             "poignancy": 3, "evidence": ["node_1"]}])
            else:
                s.add_event(f"W 事件 {done}", poignancy=2)
            done += 1
            Path(o["first"]).write_text("written")
            time.sleep(0.05)  # a core left to the racers; a store small enough to open fast
        print(json.dumps({"pid": os.getpid(), "done": done, "len": len(s)}))
        sys.exit(0)

    while not Path(o["first"]).exists():
        time.sleep(0.01)
    made = []

    def open_stream():
        made.append(stream())
        return len(made[0])

    steps = [outcome("open", open_stream)]
    if made:
        s = made[0]
        r = GenerativeAgentsRetriever(stream=s, k=5, update_access=False)
        for i in range(2):
            steps.append(outcome("refresh", lambda: [s.refresh(), len(s)][1]))
            steps.append(outcome("retrieve", lambda: len(r.invoke("事件"))))
            time.sleep(0.05)
        steps.append(outcome("write", lambda: s.add_event("R 事件", poignancy=1).node_id))
    print(json.dumps(steps, ensure_ascii=False))
    """
)


def check_named(step: dict, writer_pid: int) -> None:
    """A step worked, or was refused with ConcurrentWriterError naming the writer."""
    if step["ok"]:
        return
    assert step["type"] == "ConcurrentWriterError", step
    assert f"pid {writer_pid}" in step["holder"] and f"pid {writer_pid}" in step["message"], step
    assert "Error finding id" not in step["message"], step


def test_processes_opening_and_reading_while_another_writes_wait_or_name_it(
    spawned, tmp_path: Path
):
    folder = tmp_path / "store"
    first, stop = tmp_path / "first", tmp_path / "stop"
    wlog = tmp_path / "writer.log"
    writer = spawned(RACER, json.dumps({"folder": str(folder), "role": "writer", "limit": 5000,
                                        "first": str(first), "stop": str(stop)}), log_path=wlog)
    wait_files(first)
    racer = json.dumps({"folder": str(folder), "role": "racer", "first": str(first),
                        "lock_timeout": 1.5})
    results = []
    # two rounds of two racers, each a fresh process opening mid-write: every racer goes
    # through the same case (open, read, refresh, refused write), so four of them cover it
    for race in range(2):
        logs = [tmp_path / f"racer-{race}-{i}.log" for i in range(2)]
        procs = [spawned(RACER, racer, log_path=log) for log in logs]
        for proc, log in zip(procs, logs, strict=True):
            proc.wait(timeout=120)
            assert proc.returncode == 0, log_tail(log)
            results.append(json.loads(log.read_text("utf-8").strip().splitlines()[-1]))
    stop.write_text("stop")
    writer.wait(timeout=120)
    assert writer.returncode == 0, log_tail(wlog)
    wrote = json.loads(wlog.read_text("utf-8").strip().splitlines()[-1])
    for steps in results:
        for step in steps:
            check_named(step, wrote["pid"])
        assert steps[0]["step"] == "open" and steps[0]["ok"], steps  # it waited, then opened
        assert steps[-1]["step"] == "write" and not steps[-1]["ok"]  # the writer holds it
    assert wrote["len"] == wrote["done"] + wrote["done"] // 7
    expected = []
    for i in range(wrote["done"]):
        expected.append(f"W 事件 {i}")
        if i % 7 == 6:
            expected.append(f"W 事件 {i} thought")
    check_consistent(read_stream(str(folder), "genmem"), expected)


# argv: folder, ready file, go file. Opens the persona, pausing inside the open (after its
# first reads, before the state) until `go` exists; prints what it opened and when it went on.
PAUSED_READER = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    import chromadb
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_genmem import MemoryStream
    from langchain_genmem.backends.chroma import ChromaBackend

    folder, ready, go = sys.argv[1:4]
    backend = ChromaBackend(chromadb.PersistentClient(path=folder))
    read_state, went_on = backend.read_state, []

    def paused(persona):
        if not went_on:
            Path(ready).write_text(str(os.getpid()))
            while not Path(go).exists():
                time.sleep(0.01)
            went_on.append(time.time())
        return read_state(persona)

    backend.read_state = paused
    s = MemoryStream("玛丽亚 Lopez", backend=backend,
                     embeddings=DeterministicFakeEmbedding(size=8))
    print(json.dumps({"len": len(s), "went_on": went_on[0],
                      "last": s.nodes()[0].description}, ensure_ascii=False))
    """
)

WRITE = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_genmem import MemoryStream

    s = MemoryStream("玛丽亚 Lopez", path=sys.argv[1],
                     embeddings=DeterministicFakeEmbedding(size=8))
    if len(sys.argv) > 4:
        Path(sys.argv[4]).write_text("opened")  # opened: about to write
    for i in range(int(sys.argv[2])):
        s.add_event(f"{sys.argv[3]} 事件 {i}", poignancy=2)
    print(json.dumps({"len": len(s), "done": time.time()}))
    """
)


def test_a_write_waits_for_a_process_that_is_opening_the_folder(spawned, tmp_path: Path):
    folder = str(tmp_path / "store")
    assert run_python(WRITE, folder, "5", "A")["len"] == 5
    ready, go, log = tmp_path / "ready", tmp_path / "go", tmp_path / "reader.log"
    reader = spawned(PAUSED_READER, folder, str(ready), str(go), log_path=log)
    wait_files(ready)  # the reader has read the folder once and sits inside its open
    wlog, writing = tmp_path / "writer.log", tmp_path / "writing"
    writer = spawned(WRITE, folder, "3", "B", str(writing), log_path=wlog)
    wait_files(writing)
    deadline = time.monotonic() + 3  # time enough to store 3 memories, if nothing holds it
    while writer.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    go.write_text("go")
    for proc, path in ((reader, log), (writer, wlog)):
        try:
            proc.wait(timeout=120)
        finally:
            stop_process(proc)
        assert proc.returncode == 0, log_tail(path)
    opened = json.loads(log.read_text("utf-8").strip().splitlines()[-1])
    wrote = json.loads(wlog.read_text("utf-8").strip().splitlines()[-1])
    assert opened["len"] == 5 and opened["last"] == "A 事件 4"  # one moment: before the write
    assert wrote["len"] == 8 and wrote["done"] > opened["went_on"]  # the write waited for it
