"""SIGTERM and SIGINT within the flush interval keep the access times (real child processes)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from datetime import datetime
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import MemoryStream
from langchain_genmem.core.errors import ConfigurationError
from langchain_genmem.memory.shutdown import flush_on_signals, flush_open_streams

PERSONA = "玛丽亚 Maria"
CREATED = datetime(2023, 2, 13, 9, 0)
ACCESSED = datetime(2023, 2, 14, 18, 30)

# The child adds two memories, marks them accessed with an hour-long flush interval, says
# "ready" and sleeps: only a flush on the signal can store the access time in time.
# It starts with Python's own SIGINT handler, as under a shell, whatever the test process
# passed on (a worker of pytest-xdist can be left ignoring SIGINT, and children inherit that).
CHILD = textwrap.dedent(
    """
    import datetime, signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_genmem import MemoryStream

    def work():
        stream = MemoryStream({persona!r}, path=sys.argv[1], flush_interval=3600,
                              embeddings=DeterministicFakeEmbedding(size=8))
        for text in ("玛丽亚在学习物理", "Maria is eating lunch"):
            stream.add_event(text, subject="Maria", predicate="is", object="x",
                             poignancy=3, created={created!r})
        stream.mark_accessed(["node_1", "node_2"], when={accessed!r})
        print("ready", flush=True)
        time.sleep(60)
    """
).format(persona=PERSONA, created=CREATED, accessed=ACCESSED)

LIBRARY = CHILD + "\nfrom langchain_genmem.memory.shutdown import flush_on_signals\n" \
    "flush_on_signals()\nwork()\n"
# The genmem entry point, with its typer app replaced by the work above.
CLI = CHILD + (
    "\nimport langchain_genmem.cli\ncli = sys.modules['langchain_genmem.cli.app']\n"
    "cli.app = work\ncli.main()\n"
)


def run_and_signal(script: str, folder: Path, signum: int) -> int:
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(folder)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.strip() == "ready", child.stderr.read() if child.stderr else line
        child.send_signal(signum)
        return child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def accessed(folder: Path) -> list[datetime]:
    stream = MemoryStream(PERSONA, path=folder, embeddings=DeterministicFakeEmbedding(size=8))
    return [stream.get(node_id).last_accessed for node_id in ("node_1", "node_2")]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("entry", ["library", "cli"])
def test_sigterm_within_the_flush_interval_keeps_access_times(tmp_path: Path, entry: str):
    code = run_and_signal(LIBRARY if entry == "library" else CLI, tmp_path, signal.SIGTERM)
    assert code == -signal.SIGTERM  # the default action still ends the process
    assert accessed(tmp_path) == [ACCESSED, ACCESSED]


@pytest.mark.timeout(180)
def test_sigint_keeps_access_times_and_still_interrupts(tmp_path: Path):
    code = run_and_signal(CLI, tmp_path, signal.SIGINT)
    assert code != 0  # KeyboardInterrupt, as before
    assert accessed(tmp_path) == [ACCESSED, ACCESSED]


def test_the_previous_handler_runs_after_the_flush_and_comes_back(tmp_path: Path):
    seen: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: seen.append(signum))
    try:
        stream = MemoryStream(PERSONA, flush_interval=3600,
                              embeddings=DeterministicFakeEmbedding(size=8))
        stream.add_event("Maria is studying", subject="Maria", predicate="is", object="x",
                         poignancy=3, created=CREATED)
        stream.mark_accessed(["node_1"], when=ACCESSED)
        restore = flush_on_signals([signal.SIGUSR1])
        flush_on_signals([signal.SIGUSR1])  # twice: the first previous handler is kept
        signal.raise_signal(signal.SIGUSR1)
        assert seen == [signal.SIGUSR1]
        assert stream.flush() == 0  # the handler flushed it already
        restore()
        assert signal.getsignal(signal.SIGUSR1) is not None
        signal.raise_signal(signal.SIGUSR1)
        assert seen == [signal.SIGUSR1, signal.SIGUSR1]
        assert flush_open_streams() == 0
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_only_the_main_thread_installs_handlers():
    import threading

    errors: list[BaseException] = []

    def install() -> None:
        try:
            flush_on_signals()
        except ConfigurationError as e:
            errors.append(e)

    thread = threading.Thread(target=install)
    thread.start()
    thread.join()
    assert len(errors) == 1 and "main thread" in str(errors[0])
