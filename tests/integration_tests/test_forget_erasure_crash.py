"""A forget with its erasure killed by SIGKILL: the folder reopens whole, and nothing stays.

A child process commits a persona to an embedded Chroma folder and forgets two of its
memories, then stops at an exact point and is killed: once the forget returned (Chroma's
vector index not yet written since, so reopening replays the rewritten log), right before
the erasure's last step (the records deleted, what Chroma freed not zeroed yet), or with its
erasing process killed inside a step (in the transaction that overwrites the records' rows,
or in the one that zeroes free pages, leaving a hot journal). The folder then reopens with
the right counts, gets and queries, and once the next write has finished the forget, no
file holds the forgotten bytes.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from langchain_genmem.backends.chroma import ChromaBackend, persistent_client
from tests.support.erasure import holding, needles
from tests.support.forgetting import commit_nodes, random_vectors, text_of
from tests.support.writers import kill_when_paused, spawn_python

pytestmark = pytest.mark.slow

P = "玛丽亚"
DIM = 8

STOP_IN = textwrap.dedent(
    """
    import os, sys
    from langchain_genmem.backends import chroma_erase

    step = getattr(chroma_erase, STEP)

    def step_then_die(*args, **kwargs):
        step(*args, **kwargs)
        os._exit(9)  # inside the step's transaction: SQLite rolls back what it had not committed

    setattr(chroma_erase, STEP, step_then_die)
    chroma_erase.main()
    """
)
CHILD = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    from langchain_genmem.backends import chroma_erase
    from langchain_genmem.backends.chroma import ChromaBackend, persistent_client
    from langchain_genmem.core.errors import StorageError
    from tests.support.forgetting import commit_nodes, forget, random_vectors

    folder, persona, dim, size, gone, point, ready = json.loads(sys.argv[1])

    def pause(*args, **kwargs):
        Path(ready).write_text(str(os.getpid()))
        while True:
            time.sleep(60)

    backend = ChromaBackend(persistent_client(folder))
    commit_nodes(backend, persona, random_vectors(size, dim))
    if point == "before_finish":
        chroma_erase.finish = pause
    elif point in STEPS:  # the erasing process dies inside that step
        code = STOP_IN.replace("STEP", repr(STEPS[point]))
        chroma_erase.ERASER = (sys.executable, "-c", code)
    try:
        forget(backend, persona, gone)
    except StorageError:
        assert point in STEPS  # the forget is committed; its erasure is not finished
    pause()
    """
).replace("STOP_IN", repr(STOP_IN)).replace("STEPS", repr(
    {"in_prepare": "_clear_metadata", "in_finish": "_zero_freelist"}))
DELETED = frozenset({"after_forget", "before_finish", "in_finish"})  # Chroma deleted them


def check_reopened(folder: Path, size: int, gone: list[int], extra: int = 0) -> ChromaBackend:
    """Counts, gets and queries of the reopened folder: the forgotten records are gone."""
    backend = ChromaBackend(persistent_client(folder))
    vectors = random_vectors(size, DIM)
    assert backend.nodes.count() == size - len(gone) + extra
    assert backend.nodes.get(ids=[f"{P}::node_{n}" for n in gone])["ids"] == []
    kept = [n for n in range(1, size + 1) if n not in gone]
    read = {s.node.node_count: s for s in backend.read_nodes(P, 1, size)}
    assert sorted(read) == kept
    assert read[kept[-1]].node.description == text_of(kept[-1])
    for n in (1, kept[-1]):
        hit = backend.nodes.query(query_embeddings=[vectors[n - 1]], n_results=1)
        assert hit["ids"] == [[f"{P}::node_{n}"]]
    for n in gone:  # the forgotten vector finds a neighbour, never the forgotten record
        hit = backend.nodes.query(query_embeddings=[vectors[n - 1]], n_results=3)
        assert not {f"{P}::node_{g}" for g in gone} & set(hit["ids"][0])
    return backend


@pytest.mark.parametrize(("point", "size"), [
    ("after_forget", 40), ("after_forget", 1_500), ("before_finish", 1_500),
    ("in_prepare", 1_500), ("in_finish", 1_500),
])
def test_a_killed_forget_reopens_whole_and_its_erasure_is_finished(
    point: str, size: int, tmp_path: Path,
) -> None:
    folder, ready, log = tmp_path / "store", tmp_path / "ready", tmp_path / "child.log"
    gone = [3, size - 1]
    proc = spawn_python(CHILD, json.dumps([str(folder), P, DIM, size, gone, point, str(ready)]),
                        log_path=log)
    kill_when_paused(proc, ready, log)
    bytes_of = needles(random_vectors(size, DIM), gone)
    if point == "after_forget":
        assert holding(folder, bytes_of) == []
    else:  # not yet erased: the vector is still in the index file Chroma wrote
        assert ("data_level0.bin", "vector 3") in holding(folder, bytes_of)
    if point in DELETED:
        backend = check_reopened(folder, size, gone)
    else:  # the records are still in Chroma (readers skip them) until the next write
        backend = ChromaBackend(persistent_client(folder))
        assert sorted(s.node.node_count for s in backend.read_nodes(P, 1, 5)) == [1, 2, 4, 5]
    commit_nodes(backend, P, random_vectors(1, DIM, seed=9))  # finishes the forget
    assert holding(folder, bytes_of) == []
    backend.close()
    check_reopened(folder, size, gone, extra=1).close()
    assert holding(folder, bytes_of) == []
