"""Child processes that write a memory stream, and a way to stop one at an exact point.

A writer script calls :data:`PAUSE_HOOKS` code (exec'd at its top) to wrap its backend so that
it writes its pid to a "ready" file and sleeps when it reaches a named point (``pages``: after
the 2nd page of node records; ``sweep``: after the 1st page of leftovers deleted;
``before_state``/``after_state``: around the state record; ``in_lock``: inside the write
lock). The test
waits for that file and kills the child with SIGKILL: the kill lands at that point every
time, not by timing luck.

```python
proc = spawn_python(WRITER, folder, "pages", ready, log_path=tmp_path / "w.log")
kill_when_paused(proc, ready)  # SIGKILL once it sits at the point
```
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.processes import log_tail, stop_process
from tests.support.warm import WarmProcess, shared

if TYPE_CHECKING:  # importing this module stays cheap: the package loads where it is used
    from langchain_genmem import MemoryNode

__all__ = [
    "PAUSE_HOOKS",
    "check_consistent",
    "kill_when_paused",
    "as_printed",
    "read_stream",
    "recounted_strength",
    "run_python",
    "spawn_python",
    "wait_files",
]

# Exec'd by writer scripts: `pause_at(backend, point, ready)` installs the hooks.
PAUSE_HOOKS = '''
import os, time
from pathlib import Path

def _pause(ready):
    Path(ready).write_text(str(os.getpid()))
    while True:
        time.sleep(60)  # the test kills this process here

class _PausingCollection:
    def __init__(self, inner, point, ready):
        self.inner, self.point, self.ready = inner, point, ready
        self.pages = self.deletes = 0
    def __getattr__(self, name):
        return getattr(self.inner, name)
    def upsert(self, **kw):
        self.inner.upsert(**kw)
        self.pages += 1
        if self.point == "pages" and self.pages == 2:
            _pause(self.ready)
    def delete(self, **kw):
        self.inner.delete(**kw)
        self.deletes += 1
        if self.point == "sweep" and self.deletes == 1:
            _pause(self.ready)

def pause_at(backend, point, ready):
    backend.nodes = _PausingCollection(backend.nodes, point, ready)
    write_state = backend.write_state
    def hooked(persona, state):
        if point == "before_state":
            _pause(ready)
        write_state(persona, state)
        if point == "after_state":
            _pause(ready)
    backend.write_state = hooked
    if point == "in_lock":
        lock = backend.write_lock
        from contextlib import contextmanager
        @contextmanager
        def paused_lock(persona):
            with lock(persona):
                _pause(ready)
                yield
        backend.write_lock = paused_lock
'''


def spawn_python(code: str, *args: str, log_path: Path) -> WarmProcess | subprocess.Popen[bytes]:
    """Start ``python -c code args...`` (warm: `tests.support.warm`) with its output in
    ``log_path``; ``pid`` is the child's own."""
    with log_path.open("wb") as log:
        return shared().popen([sys.executable, "-c", code, *args], stdin=subprocess.DEVNULL,
                              stdout=log, stderr=subprocess.STDOUT)


def kill_when_paused(
    proc: WarmProcess | subprocess.Popen[bytes], ready: Path, log_path: Path,
    timeout: float = 120.0
) -> None:
    """Wait until the child wrote ``ready`` (it sits at its pause point), then SIGKILL it.

    Raises:
        AssertionError: the child exited or did not pause within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while not written(ready):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_process(proc)
            msg = f"writer never reached its pause point:\n{log_tail(log_path)}"
            raise AssertionError(msg)
        time.sleep(0.05)
    assert int(ready.read_text()) == proc.pid
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    ready.unlink()


def run_python(code: str, *args: str, timeout: float = 180.0) -> dict:
    """Run ``python -c code args...`` to the end and parse the JSON it prints last."""
    done = shared().run([sys.executable, "-c", code, *args], timeout=timeout)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def recounted_strength(nodes: Iterable[MemoryNode]) -> dict[str, dict[str, int]]:
    """The keyword strengths ``nodes`` give, counted again from scratch (oldest first)."""
    from langchain_genmem.memory.keywords import count_keywords

    strength: dict[str, dict[str, int]] = {"event": {}, "thought": {}}
    for node in nodes:
        count_keywords(strength, node)
    return strength


def as_printed(out: dict) -> dict:
    """``out`` as a child process printing it as JSON gives it back (tuples as lists...)."""
    return json.loads(json.dumps(out, ensure_ascii=False))


def read_stream(where: str, collection: str) -> dict:
    """What a folder or a Chroma server (``http://host:port``) holds for the test persona.

    Read in the test process once the writers exited: what they left is what is checked.
    """
    import chromadb
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from langchain_genmem import MemoryStream
    from langchain_genmem.backends.chroma import ChromaBackend

    if where.startswith("http://"):
        host, port = where[7:].split(":")
        client = chromadb.HttpClient(host=host, port=int(port))
    else:
        client = chromadb.PersistentClient(path=where)
    s = MemoryStream("玛丽亚 Lopez", backend=ChromaBackend(client, collection),
                     embeddings=DeterministicFakeEmbedding(size=8))
    try:
        nodes = list(reversed(s.nodes()))
        out = {
            "ids": [n.node_id for n in nodes],
            "descriptions": [n.description for n in nodes],
            "type_counts": [[n.type, n.type_count] for n in nodes],
            "state": s.state.model_dump(), "strength": recounted_strength(nodes),
        }
    finally:
        s.close()
    return as_printed(out)


def written(path: Path) -> bool:
    """Whether a child wrote ``path``: it exists and holds text (a file another process
    creates exists before what it writes is in it)."""
    try:
        return bool(path.read_text().strip())
    except FileNotFoundError:
        return False


def wait_files(*paths: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not all(written(p) for p in paths):
        assert time.monotonic() < deadline, f"never appeared: {[str(p) for p in paths]}"
        time.sleep(0.05)


def check_consistent(dump: dict, expected: list[str]) -> None:
    """Every memory kept once, numbered 1..n, counters and strengths agree with the nodes."""
    n = len(dump["ids"])
    assert dump["ids"] == [f"node_{i}" for i in range(1, n + 1)]
    assert sorted(dump["descriptions"]) == sorted(expected)
    assert dump["state"]["node_count"] == n
    seen: dict[str, int] = {}
    for node_type, type_count in dump["type_counts"]:
        seen[node_type] = seen.get(node_type, 0) + 1
        assert type_count == seen[node_type]
    assert dump["state"]["type_count"] == {**{"event": 0, "thought": 0, "chat": 0}, **seen}
    assert dump["state"]["kw_strength"] == dump["strength"]
