"""A stream written by one process reads back identically in another; personas stay apart.

The first tests run on every backend (the `store` fixture): the child processes get the
store's MemoryStream arguments (a Chroma folder or a PostgreSQL DSN) as JSON.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.support.warm import shared
from tests.support.writers import as_printed

WRITER = textwrap.dedent(
    """
    import json, sys
    from datetime import datetime, timedelta
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_genmem import GenerativeAgentsRetriever, MemoryStream

    t = [datetime(2023, 2, 13, 9, 0)]
    s = MemoryStream("玛丽亚 Lopez", **json.loads(sys.argv[1]),
                     embeddings=DeterministicFakeEmbedding(size=16), clock=lambda: t[0])
    e1 = s.add_event("玛丽亚 Lopez is studying physics", subject="玛丽亚 Lopez",
                     predicate="study", object="Physics", poignancy=4)
    s.add_event("bed is idle", subject="bed", predicate="is", object="idle", poignancy=1)
    c = s.add_chat("chat about the exam", subject="玛丽亚 Lopez", predicate="chat with",
                   object="Klaus Mueller", poignancy=5,
                   filling=[["玛丽亚 Lopez", "考试难吗？"], ["Klaus Mueller", "Not at all"]])
    s.add_thought("玛丽亚 Lopez worries about exams", subject="玛丽亚 Lopez", predicate="worry",
                  object="exams", poignancy=6, evidence=[e1.node_id, c.node_id],
                  expiration=t[0] + timedelta(days=30))
    s.update_settings(recency_decay=0.995, importance_w=1.5)
    t[0] = datetime(2023, 2, 13, 12, 0)
    GenerativeAgentsRetriever(stream=s, k=2).invoke("exams")
    """
)

ROOT = Path(__file__).resolve().parents[2]

# A fresh process reading the store back (what `read_back` returns, as JSON).
DUMP = textwrap.dedent(
    """
    import json, sys
    from tests.integration_tests.test_persistence import read_back
    print(json.dumps(read_back(sys.argv[1], sys.argv[2]), ensure_ascii=False, sort_keys=True))
    """
)


def read_back(where: str, persona: str) -> dict[str, Any]:
    """Everything the store holds for ``persona`` (``where``: its arguments as JSON)."""
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from langchain_genmem import MemoryStream

    s = MemoryStream(persona, **json.loads(where), embeddings=DeterministicFakeEmbedding(size=16))
    try:
        out = {
            "nodes": [n.model_dump(mode="json") for n in s.nodes()],
            "index": s.keyword_index,
            "strength": s.kw_strength,
            "state": s.state.model_dump(mode="json"),
            "vectors": {k: v.tolist() for k, v in s.embeddings_by_key().items()},
        }
    finally:
        s.close()
    return as_printed(out)


def run(code: str, *args: str) -> str:
    done = shared().run([sys.executable, "-c", code, *args], timeout=120, cwd=ROOT,
                        env={**os.environ, "PYTHONPATH": os.pathsep.join(
                            [str(ROOT), os.environ.get("PYTHONPATH", "")])})
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_restarted_process_sees_the_same_stream(store):
    where = json.dumps(store.kwargs())
    run(WRITER, where)  # exits without close(): access times flushed at exit
    first = json.loads(run(DUMP, where, "玛丽亚 Lopez"))  # a fresh process opening the store
    # read once more after that process exited (here: no child needed), the same again
    assert read_back(where, "玛丽亚 Lopez") == first
    nodes = {n["node_id"]: n for n in first["nodes"]}
    assert list(nodes) == ["node_4", "node_3", "node_2", "node_1"]
    assert nodes["node_4"]["depth"] == 1 and nodes["node_4"]["filling"] == ["node_1", "node_3"]
    assert nodes["node_4"]["expiration"] == "2023-03-15T09:00:00"
    # the retrieval at 12:00 returned the thought and the event: their access time persisted
    accessed = sorted(n["node_id"] for n in first["nodes"]
                      if n["last_accessed"].endswith("12:00:00"))
    assert accessed == ["node_1", "node_4"]
    assert first["index"]["event"]["physics"] == ["node_1"]
    assert first["index"]["chat"]["klaus mueller"] == ["node_3"]
    assert first["strength"] == {
        "event": {"玛丽亚 lopez": 1, "physics": 1},
        "thought": {"玛丽亚 lopez": 1, "worry": 1, "exams": 1},
    }
    state = first["state"]
    assert state["node_count"] == 4 and state["importance_ele_n"] == 2
    assert state["importance_trigger_curr"] == 145 and state["recency_decay"] == 0.995
    assert state["importance_w"] == 1.5
    assert len(first["vectors"]) == 4


def test_personas_sharing_a_folder_never_see_each_other(store):
    where = json.dumps(store.kwargs())
    run(WRITER, where)
    other = read_back(where, "Klaus Mueller")  # once the writer exited
    assert other["nodes"] == [] and other["state"]["node_count"] == 0


@pytest.fixture
def server_client(chroma_server):
    return chroma_server.client


def test_personas_sharing_a_chroma_server(server_client, request):
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from langchain_genmem import GenerativeAgentsRetriever, MemoryStream

    name = f"iso-{request.node.name[-20:].replace('[', '').replace(']', '')}"
    emb = DeterministicFakeEmbedding(size=8)
    maria = MemoryStream("Maria", client=server_client(), embeddings=emb, collection_name=name)
    klaus = MemoryStream("Klaus", client=server_client(), embeddings=emb, collection_name=name)
    maria.add_event("Maria studies physics", poignancy=3, keywords=["physics"])
    klaus.add_event("Klaus studies physics", poignancy=3, keywords=["physics"])
    klaus.add_event("Klaus writes his paper", poignancy=3)
    assert len(maria) == 1 and len(klaus) == 2
    assert [n.description for n in maria.retrieve_relevant_events("physics", "", "")] == [
        "Maria studies physics"
    ]
    docs = GenerativeAgentsRetriever(stream=maria).invoke("physics")
    assert [d.page_content for d in docs] == ["Maria studies physics"]
    # a third client of the same server sees each persona's own memories
    again = MemoryStream("Klaus", client=server_client(), embeddings=emb, collection_name=name)
    assert [n.description for n in again.nodes()] == ["Klaus writes his paper",
                                                      "Klaus studies physics"]
    assert again.backend.personas() == ["Klaus", "Maria"]
