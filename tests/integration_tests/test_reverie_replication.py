"""``recency_mode="reverie"`` reproduces the original ``new_retrieve`` on the two real personas.

The expectation is computed here, independently of the package, by restating the original's code
(section 3) with dicts and loops: the persona's memory replayed from ``node_1`` upward into
``seq_event`` / ``seq_thought`` (newest first, ``last_accessed = created``), then per focal
point: candidates = events + thoughts without "idle" keys, stable-sorted by ``last_accessed``;
recency ``decay ** (i + 1)``; ``normalize_dict_floats``; ``gw = [0.5, 3, 2]`` times the
scratch weights; ``top_highest_x_values`` (a stable sort); ``last_accessed = curr_time`` for
the returned nodes. The stream is built from the same ``nodes.json`` through ``add_many``,
with an ``Embeddings`` that looks texts up in ``embeddings.json``.

The replication runs on Chroma and on PostgreSQL (ranking in process and in the database);
a last check ranks the same history both ways on PostgreSQL in every recency mode.

The last tests run two streams of one persona against a real Chroma server: one writes, the
other (in another process, or another client) sees the memory at its next retrieval.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream
from tests.support.embeddings import TableEmbeddings
from tests.support.fixtures import open_store

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "data" / "generative_agents"
PERSONAS = {
    "Maria Lopez": DATA / "July1_the_ville_isabella_maria_klaus-step-3-12/personas/Maria Lopez",
    "Isabella Rodriguez": DATA
    / "July1_the_ville_isabella_maria_klaus-step-3-2/personas/Isabella Rodriguez",
}
FOCAL_POINTS = {
    "Maria Lopez": [
        "Maria Lopez and Klaus Mueller have a close relationship",
        "Klaus Mueller is working on a research paper",
        "taking a break",
        "Maria Lopez is preparing for college",
        "desk is idle",
    ],
    "Isabella Rodriguez": [
        "Isabella Rodriguez loves her work at Hobbs Cafe.",
        "Isabella Rodriguez is sleeping",
        "bed is being used",
    ],
}
TOL = 1e-6


@dataclass
class Saved:
    persona: str
    nodes: dict[str, dict[str, Any]]
    embeddings: dict[str, list[float]]
    scratch: dict[str, Any]

    @property
    def curr_time(self) -> datetime:
        return datetime.strptime(self.scratch["curr_time"], "%B %d, %Y, %H:%M:%S")


def read_saved(persona: str) -> Saved:
    memory = PERSONAS[persona] / "bootstrap_memory"
    folder = memory / "associative_memory"
    return Saved(
        persona,
        json.loads((folder / "nodes.json").read_text(encoding="utf-8")),
        json.loads((folder / "embeddings.json").read_text(encoding="utf-8")),
        json.loads((memory / "scratch.json").read_text(encoding="utf-8")),
    )


def when(text: str | None) -> datetime | None:
    return None if text is None else datetime.strptime(text, "%Y-%m-%d %H:%M:%S")


# ---------------------------------------------------------------- the original, restated


class ConceptNode:
    def __init__(self, node_id: str, details: dict[str, Any]) -> None:
        self.node_id = node_id
        self.type = details["type"]
        self.created = when(details["created"])
        self.last_accessed = self.created
        self.embedding_key = details["embedding_key"]
        self.poignancy = details["poignancy"]


class AssociativeMemory:
    def __init__(self, saved: Saved) -> None:
        self.seq_event: list[ConceptNode] = []
        self.seq_thought: list[ConceptNode] = []
        self.seq_chat: list[ConceptNode] = []
        self.id_to_node: dict[str, ConceptNode] = {}
        self.embeddings: dict[str, list[float]] = {}
        for count in range(len(saved.nodes)):
            node_id = f"node_{count + 1}"
            details = saved.nodes[node_id]
            node = ConceptNode(node_id, details)
            seq = {"event": self.seq_event, "thought": self.seq_thought, "chat": self.seq_chat}
            seq[node.type][0:0] = [node]
            self.id_to_node[node_id] = node
            self.embeddings[node.embedding_key] = saved.embeddings[node.embedding_key]


def cos_sim(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def normalize_dict_floats(d: dict[str, float], target_min: float, target_max: float):
    min_val = min(val for val in d.values())
    max_val = max(val for val in d.values())
    range_val = max_val - min_val
    if range_val == 0:
        for key in d:
            d[key] = (target_max - target_min) / 2
    else:
        for key, val in d.items():
            d[key] = (val - min_val) * (target_max - target_min) / range_val + target_min
    return d


def top_highest_x_values(d: dict[str, float], x: int) -> dict[str, float]:
    return dict(sorted(d.items(), key=lambda item: item[1], reverse=True)[:x])


def new_retrieve(memory, scratch, embeddings, curr_time, focal_points, n_count=30):
    """Returns {focal point: [(node_id, recency, relevance, importance, score), ...]}."""
    retrieved = {}
    for focal_pt in focal_points:
        nodes = [[i.last_accessed, i] for i in memory.seq_event + memory.seq_thought
                 if "idle" not in i.embedding_key]
        nodes = sorted(nodes, key=lambda x: x[0])
        nodes = [i for created, i in nodes]

        recency_vals = [scratch["recency_decay"] ** i for i in range(1, len(nodes) + 1)]
        recency_out = {node.node_id: recency_vals[count] for count, node in enumerate(nodes)}
        recency_out = normalize_dict_floats(recency_out, 0, 1)
        importance_out = normalize_dict_floats({n.node_id: n.poignancy for n in nodes}, 0, 1)
        focal_embedding = embeddings[focal_pt]
        relevance_out = {n.node_id: cos_sim(memory.embeddings[n.embedding_key], focal_embedding)
                         for n in nodes}
        relevance_out = normalize_dict_floats(relevance_out, 0, 1)

        gw = [0.5, 3, 2]
        master_out = {}
        for key in recency_out:
            master_out[key] = (scratch["recency_w"] * recency_out[key] * gw[0]
                               + scratch["relevance_w"] * relevance_out[key] * gw[1]
                               + scratch["importance_w"] * importance_out[key] * gw[2])
        master_out = top_highest_x_values(master_out, len(master_out.keys()))
        master_out = top_highest_x_values(master_out, n_count)
        master_nodes = [memory.id_to_node[key] for key in master_out]
        for n in master_nodes:
            n.last_accessed = curr_time
        retrieved[focal_pt] = [
            (k, recency_out[k], relevance_out[k], importance_out[k], master_out[k])
            for k in master_out
        ]
    return retrieved


# ---------------------------------------------------------------- the package


def replay(saved: Saved, **stream_kwargs) -> MemoryStream:
    """The saved persona through add_many, node_1 upward, with its scratch weights."""
    stream = MemoryStream(saved.persona, embeddings=TableEmbeddings(saved.embeddings),
                          clock=lambda: saved.curr_time, **stream_kwargs)
    items = []
    for count in range(len(saved.nodes)):
        d = saved.nodes[f"node_{count + 1}"]
        items.append({
            "type": d["type"], "description": d["description"], "subject": d["subject"],
            "predicate": d["predicate"], "object": d["object"], "keywords": d["keywords"],
            "poignancy": d["poignancy"], "created": when(d["created"]),
            "expiration": when(d["expiration"]), "filling": d["filling"],
            "embedding_key": d["embedding_key"],
        })
    weights = ("recency_w", "relevance_w", "importance_w", "recency_decay")
    stream.add_many(items, state={k: saved.scratch[k] for k in weights})
    return stream


def as_rows(docs) -> list[tuple[str, float, float, float, float]]:
    return [(d.metadata["node_id"], d.metadata["recency"], d.metadata["relevance"],
             d.metadata["importance"], d.metadata["score"]) for d in docs]


def assert_same(got, expected) -> None:
    assert list(got) == list(expected)
    for focal, rows in expected.items():
        assert [r[0] for r in got[focal]] == [r[0] for r in rows], focal
        for mine, theirs in zip(got[focal], rows, strict=False):
            assert mine[1:] == pytest.approx(theirs[1:], abs=TOL), (focal, mine[0])


def assert_same_access_times(stream: MemoryStream, memory: AssociativeMemory) -> None:
    assert {n.node_id: n.last_accessed for n in stream.nodes()} == {
        i: n.last_accessed for i, n in memory.id_to_node.items()}


@pytest.mark.parametrize("where", ["chroma", "postgres", "postgres-database"])
@pytest.mark.parametrize("persona", list(PERSONAS))
def test_reverie_mode_reproduces_new_retrieve(request, tmp_path, persona, where):
    backend, _, score_in = where.partition("-")
    with open_store(request, backend, tmp_path) as store:
        check_reverie_replication(persona, store.kwargs(), score_in or "process")


def check_reverie_replication(persona: str, kwargs: dict[str, Any], score_in: str) -> None:
    saved = read_saved(persona)
    memory = AssociativeMemory(saved)
    stream = replay(saved, **kwargs)
    assert stream.state.recency_decay == saved.scratch["recency_decay"]  # 0.99 / 0.995
    retriever = GenerativeAgentsRetriever(stream=stream, recency_mode="reverie", score_in=score_in)
    focal = FOCAL_POINTS[persona]

    expected = new_retrieve(memory, saved.scratch, saved.embeddings, saved.curr_time, focal)
    got = {f: as_rows(docs) for f, docs in retriever.retrieve_many(focal).items()}
    assert_same(got, expected)
    assert_same_access_times(stream, memory)
    # something was really carried over: a later focal point saw earlier ones' access times
    assert any(n.last_accessed == saved.curr_time for n in stream.nodes())

    # again, through a reopened store: the access times were persisted and drive the ranking
    stream.close()
    reopened = MemoryStream(persona, embeddings=TableEmbeddings(saved.embeddings),
                            clock=lambda: saved.curr_time, **kwargs)
    assert_same_access_times(reopened, memory)
    again = focal[:2][::-1]
    expected = new_retrieve(memory, saved.scratch, saved.embeddings, saved.curr_time, again)
    retriever = GenerativeAgentsRetriever(stream=reopened, recency_mode="reverie",
                                          score_in=score_in)
    got = {f: as_rows(docs) for f, docs in retriever.retrieve_many(again).items()}
    assert_same(got, expected)
    reopened.close()


@pytest.mark.parametrize("mode", ["hours", "rank", "reverie"])
@pytest.mark.parametrize("persona", list(PERSONAS))
def test_database_scoring_equals_process_scoring(request, tmp_path, persona, mode):
    """Two identical PostgreSQL streams, one ranked in process, one in the database, through
    the same focal points (access times carried over): same ids, order and scores."""
    saved = read_saved(persona)
    focal = FOCAL_POINTS[persona] * 2
    with open_store(request, "postgres", tmp_path) as store:
        ranked = {}
        for score_in in ("process", "database"):
            stream = replay(saved, **store.kwargs(fresh=True))
            retriever = GenerativeAgentsRetriever(stream=stream, recency_mode=mode,
                                                  score_in=score_in, k=20)
            ranked[score_in] = [as_rows(retriever.invoke(f)) for f in focal]
    for here, there in zip(ranked["process"], ranked["database"], strict=True):
        assert [r[0] for r in here] == [r[0] for r in there]
        for mine, theirs in zip(here, there, strict=True):
            assert mine[1:] == pytest.approx(theirs[1:], abs=TOL)


def test_maria_has_what_makes_the_comparison_meaningful():
    """The fixture exercises idle skipping, chats, shared vectors and tied creation times."""
    saved = read_saved("Maria Lopez")
    nodes = saved.nodes.values()
    keys = [n["embedding_key"] for n in nodes]
    assert sum("idle" in k for k in keys) > 100
    assert any(n["type"] == "chat" for n in nodes)
    assert len(set(keys)) < len(keys)
    assert len({n["created"] for n in nodes}) < len(saved.nodes) / 2
    assert all(f in saved.embeddings for f in FOCAL_POINTS["Maria Lopez"])


# ---------------------------------------------------------------- one persona, two processes


def server_stream(chroma_server, collection: str, persona: str = "Maria Lopez") -> MemoryStream:
    return MemoryStream(persona, embeddings=DeterministicFakeEmbedding(size=32),
                        client=chroma_server.client(), collection_name=collection)


WRITER = textwrap.dedent("""
    import sys
    import chromadb
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_genmem import MemoryStream

    port, collection, description = sys.argv[1], sys.argv[2], sys.argv[3]
    client = chromadb.HttpClient(host="127.0.0.1", port=int(port))
    with MemoryStream("Maria Lopez", embeddings=DeterministicFakeEmbedding(size=32),
                      client=client, collection_name=collection) as stream:
        print(stream.add_event(description, poignancy=9).node_id)
""")


def test_a_memory_written_by_another_process_is_retrieved_next(chroma_server):
    collection = f"cross-{uuid.uuid4().hex[:12]}"
    with server_stream(chroma_server, collection) as reader:
        reader.add_event("Maria Lopez is reading a book", poignancy=2)
        retriever = GenerativeAgentsRetriever(stream=reader)
        assert len(retriever.invoke("anything")) == 1
        text = "Maria Lopez is cooking dinner for Klaus Mueller"
        out = subprocess.run([sys.executable, "-c", WRITER, str(chroma_server.port), collection,
                              text], capture_output=True, text=True, timeout=120, cwd=REPO,
                             check=True)
        assert out.stdout.split() == ["node_2"]
        docs = retriever.invoke(text)
        assert [d.page_content for d in docs][0] == text
        assert len(reader) == 2


def test_two_clients_share_a_persona_and_never_see_another(chroma_server):
    collection = f"cross-{uuid.uuid4().hex[:12]}"
    with (server_stream(chroma_server, collection) as writer,
          server_stream(chroma_server, collection) as reader,
          server_stream(chroma_server, collection, "Isabella Rodriguez") as other):
        assert GenerativeAgentsRetriever(stream=reader).invoke("x") == []
        node = writer.add_event("Maria Lopez is studying physics", poignancy=5)
        other.add_event("Isabella Rodriguez is baking bread", poignancy=5)
        report = GenerativeAgentsRetriever(stream=reader).retrieve_with_report("physics")
        assert report.accessed_ids == [node.node_id]
        assert [d.page_content for d in report.documents] == ["Maria Lopez is studying physics"]
        isabella = GenerativeAgentsRetriever(stream=other).invoke("Maria Lopez is studying physics")
        assert [d.page_content for d in isabella] == ["Isabella Rodriguez is baking bread"]
        assert GenerativeAgentsRetriever(stream=writer).invoke("bread")[0].metadata["persona"] == (
            "Maria Lopez")
