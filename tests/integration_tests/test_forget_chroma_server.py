"""Forgetting on a real Chroma server, seen and finished by other processes.

A process forgets nodes (or dies right after the forget's commit point); other processes,
each with its own client, read the new state with its gaps, and the next writer finishes
the forget. The collection itself is checked for the forgotten texts and ids.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from langchain_genmem.backends.chroma import FORGETTING_KEY, ChromaBackend
from tests.support.forgetting import commit_nodes, forget, random_vectors, text_of
from tests.support.writers import run_python

P = "玛丽亚"

CHILD = textwrap.dedent(
    """
    import json, os, sys
    import chromadb
    from langchain_genmem.backends.chroma import ChromaBackend
    from tests.support.forgetting import commit_nodes, forget, random_vectors

    port, name, action = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    backend = ChromaBackend(chromadb.HttpClient(host="127.0.0.1", port=port), name,
                            lease_ttl=2.0)
    persona = "玛丽亚"
    if action == "die-after-commit":  # the process ends right after the state record
        ChromaBackend._finish_forget = lambda *a, **k: os._exit(9)
        forget(backend, persona, [2, 3])
    if action == "add":
        commit_nodes(backend, persona, random_vectors(1, 8, seed=9))
    state = backend.read_state(persona)
    print(json.dumps({
        "rev": state.rev, "node_count": state.node_count, "live": state.live_count,
        "since_1": state.forgotten_since(1),
        "numbers": [s.node.node_count for s in backend.read_nodes(persona, 1, state.node_count)],
    }))
    """
)


def _raw(backend: ChromaBackend) -> dict[str, str]:
    got = backend.nodes.get(where={"persona": P}, include=["metadatas"])
    return {i: json.dumps(m, ensure_ascii=False) for i, m in zip(got["ids"], got["metadatas"],
                                                                  strict=True)}


def test_another_process_sees_a_forget_with_its_gaps(chroma_server) -> None:
    backend = ChromaBackend(chroma_server.client(), "forget-seen")
    commit_nodes(backend, P, random_vectors(8, 8))
    forget(backend, P, [4, 5, 8])
    raw = _raw(backend)
    assert sorted(raw) == [f"{P}::node_{n}" for n in (1, 2, 3, 6, 7)]
    assert not any(text_of(n) in text for text in raw.values() for n in (4, 5, 8))
    seen = run_python(CHILD, str(chroma_server.port), "forget-seen", "read")
    assert seen == {"rev": 2, "node_count": 8, "live": 5, "since_1": [[4, 5], [8, 8]],
                    "numbers": [1, 2, 3, 6, 7]}
    added = run_python(CHILD, str(chroma_server.port), "forget-seen", "add")
    assert (added["node_count"], added["numbers"][-2:]) == (9, [7, 9])


def test_a_forget_whose_process_died_after_its_commit_point_is_finished_by_the_next_writer(
    chroma_server,
) -> None:
    name = "forget-died"
    backend = ChromaBackend(chroma_server.client(), name)
    commit_nodes(backend, P, random_vectors(5, 8))
    port = str(chroma_server.port)
    died = subprocess.run([sys.executable, "-c", CHILD, port, name, "die-after-commit"],
                          capture_output=True, text=True, timeout=180, check=False)
    assert died.returncode == 9, died.stderr[-3000:]
    state_meta = backend.states.get(ids=[f"{P}::state"], include=["metadatas"])["metadatas"][0]
    assert state_meta[FORGETTING_KEY] == 2  # committed, its records still in the collection
    assert text_of(2) in _raw(backend)[f"{P}::node_2"]
    reader = run_python(CHILD, port, name, "read")  # the gap: not shown though still stored
    assert reader["numbers"] == [1, 4, 5] and reader["since_1"] == [[2, 3]]
    writer = run_python(CHILD, port, name, "add")  # waits for the dead writer's lease
    assert writer["numbers"] == [1, 4, 5, 6]
    assert sorted(_raw(backend)) == [f"{P}::node_{n}" for n in (1, 4, 5, 6)]
    state_meta = backend.states.get(ids=[f"{P}::state"], include=["metadatas"])["metadatas"][0]
    assert FORGETTING_KEY not in state_meta
