"""Forgetting in the backends: records deleted for good, numbers never reused, gaps read back.

Every test runs on an embedded Chroma folder and on a real PostgreSQL (the `store` fixture);
what the store holds is checked in the store itself (the Chroma collection, the SQL tables),
not only through the backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from langchain_genmem.backends.base import MemoryBackend
from langchain_genmem.backends.chroma import FORGETTING_KEY, ChromaBackend, persistent_client
from langchain_genmem.backends.postgres import PostgresBackend
from langchain_genmem.core.errors import StorageError, ValidationError
from langchain_genmem.core.state import StreamState
from tests.support.fixtures import Store
from tests.support.forgetting import commit_nodes, forget, random_vectors, text_of

P = "玛丽亚"
DIM = 8


def backend_of(store: Store) -> MemoryBackend:
    """A new backend object on the store (another process's view of it, as far as it can)."""
    kwargs = store.kwargs()
    if "dsn" in kwargs:
        return PostgresBackend(kwargs["dsn"])
    return ChromaBackend(persistent_client(kwargs["path"]))


def stored_texts(backend: MemoryBackend, persona: str) -> dict[int, str]:
    """``{number: every stored text of the record}``, read from the store itself."""
    if isinstance(backend, PostgresBackend):
        with backend.pool.connection() as conn:
            rows = conn.execute(
                "SELECT node_count, description || embedding_key || array_to_string(keywords, ' ')"
                " FROM memory_nodes WHERE persona_name = %s", (persona,)).fetchall()
        return {int(n): text for n, text in rows}
    assert isinstance(backend, ChromaBackend)
    got = backend.nodes.get(where={"persona": persona}, include=["metadatas", "documents"])
    return {int(m["node_count"]): f"{m}{d}"
            for m, d in zip(got["metadatas"], got["documents"], strict=True)}


def numbers(backend: MemoryBackend, persona: str, first: int, last: int) -> list[int]:
    return [s.node.node_count for s in backend.read_nodes(persona, first, last)]


def test_forgotten_records_are_deleted_and_numbers_are_never_reused(store: Store) -> None:
    writer = backend_of(store)
    commit_nodes(writer, P, random_vectors(12, DIM))
    other = backend_of(store)  # another reader, caught up before the forget
    before = other.read_state(P)
    assert before is not None and before.rev == 1
    state = forget(writer, P, [3, 4, 9])
    texts = stored_texts(writer, P)
    assert sorted(texts) == [1, 2, 5, 6, 7, 8, 10, 11, 12]
    assert not any(text_of(n) in t for t in texts.values() for n in (3, 4, 9))
    seen = other.read_state(P)
    assert seen is not None and seen.rev == state.rev == 2
    assert (seen.node_count, seen.live_count) == (12, 9)
    assert seen.forgotten_since(before.rev) == [(3, 4), (9, 9)]
    assert seen.forgotten_since(seen.rev) == []
    assert numbers(other, P, 1, 12) == [1, 2, 5, 6, 7, 8, 10, 11, 12]
    assert numbers(other, P, 3, 4) == []
    assert [s.node.description for s in other.read_nodes(P, 8, 10)] == [text_of(8), text_of(10)]
    added = commit_nodes(other, P, random_vectors(2, DIM, seed=1))  # numbering goes on
    assert (added.node_count, added.live_count, added.forgotten) == (14, 11, seen.forgotten)
    again = backend_of(store).read_state(P)
    assert again is not None and again.forgotten == [(3, 4, 2), (9, 9, 2)]
    assert numbers(writer, P, 1, 14)[-3:] == [12, 13, 14]


def test_a_single_add_after_a_forget_keeps_the_forgotten_numbers(store: Store) -> None:
    backend = backend_of(store)
    commit_nodes(backend, P, random_vectors(5, DIM))
    forget(backend, P, [2])
    for seed in range(3):  # Chroma commits these through the node records themselves
        commit_nodes(backend, P, random_vectors(1, DIM, seed=seed))
    state = backend_of(store).read_state(P)
    assert state is not None and (state.node_count, state.rev, state.live_count) == (8, 5, 7)
    assert state.forgotten == [(2, 2, 2)]
    assert numbers(backend_of(store), P, 1, 8) == [1, 3, 4, 5, 6, 7, 8]


def test_a_forget_must_commit_a_state_that_lists_exactly_its_numbers(store: Store) -> None:
    backend = backend_of(store)
    commit_nodes(backend, P, random_vectors(4, DIM))
    with backend.write_lock(P):
        backend.read_head(P)
        state = backend.read_state(P)
        assert state is not None
        with pytest.raises(ValidationError, match="must list the 2 numbers"):
            backend.forget(P, [1, 2], state.forgetting([1]))
        with pytest.raises(ValidationError, match="not a stored memory"):
            state.forgetting([5])
    assert sorted(stored_texts(backend, P)) == [1, 2, 3, 4]
    forget(backend, P, [1])
    with pytest.raises(ValidationError, match="node_1 is not a stored memory"):
        forget(backend, P, [1, 2])
    assert sorted(stored_texts(backend, P)) == [2, 3, 4]


def test_a_range_that_misses_a_number_never_forgotten_is_refused(store: Store) -> None:
    backend = backend_of(store)
    commit_nodes(backend, P, random_vectors(4, DIM))
    forget(backend, P, [2])
    if isinstance(backend, PostgresBackend):
        with backend.pool.connection() as conn:
            conn.execute("DELETE FROM memory_nodes WHERE persona_name = %s AND node_count = 3",
                         (P,))
    else:
        assert isinstance(backend, ChromaBackend)
        backend.nodes.delete(ids=[f"{P}::node_3"])
    with pytest.raises(StorageError, match="committed nodes missing"):
        backend_of(store).read_nodes(P, 1, 4)


def test_drop_deletes_every_row_of_the_persona_and_only_its(store: Store) -> None:
    stream = store.open(P, embeddings=_Embeddings())
    stream.add_event("玛丽亚在图书馆学物理", poignancy=4, keywords=["物理"])
    stream.mark_accessed(["node_1"])
    stream.close()  # access times flushed, a snapshot written (a folder)
    backend = backend_of(store)
    commit_nodes(backend, "Klaus", random_vectors(2, DIM))
    backend.drop(P)
    assert stored_texts(backend, P) == {}
    assert backend.read_state(P) is None and backend.personas() == ["Klaus"]
    assert sorted(stored_texts(backend, "Klaus")) == [1, 2]
    if isinstance(backend, PostgresBackend):
        with backend.pool.connection() as conn:
            for table in ("memory_nodes", "kw_strength", "genmem_personas"):
                count = conn.execute(f"SELECT count(*) FROM {table} WHERE persona_name = %s",
                                     (P,)).fetchone()
                assert count == (0,), table
    else:
        assert _snapshot_files(store) == []


def _snapshot_files(store: Store) -> list[Path]:
    folder = Path(store.kwargs()["path"]) / "genmem-snapshots"
    return sorted(folder.glob("*")) if folder.exists() else []


class _Embeddings:
    """Fixed 8-d vectors from the text's hash (what the stream embeds with here)."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        seed = int.from_bytes(text.encode()[:8].ljust(8, b"\0"), "little")
        return random_vectors(1, DIM, seed=seed)[0].tolist()


def _crash(*args: Any, **kwargs: Any) -> None:
    raise KeyboardInterrupt  # the process stops right after the state record was written


def _states(backend: ChromaBackend) -> dict[str, Any]:
    return backend.states.get(ids=[f"{P}::state"], include=["metadatas"])["metadatas"][0]


@pytest.mark.parametrize("store", ["chroma"], indirect=True)
def test_a_chroma_forget_interrupted_after_its_commit_point_is_finished_by_the_next_write(
    store: Store, monkeypatch: pytest.MonkeyPatch,
) -> None:
    writer = backend_of(store)
    assert isinstance(writer, ChromaBackend)
    commit_nodes(writer, P, random_vectors(6, DIM))

    with monkeypatch.context() as patch:
        patch.setattr(ChromaBackend, "_finish_forget", _crash)
        with pytest.raises(KeyboardInterrupt):
            forget(writer, P, [2, 5])
    assert _states(writer)[FORGETTING_KEY] == 2  # committed, records not deleted yet
    assert text_of(2) in stored_texts(writer, P)[2]
    reader = backend_of(store)
    head = reader.read_head(P)
    assert head is not None and head.rev == 2
    assert numbers(reader, P, 1, 6) == [1, 3, 4, 6]  # the gap: forgotten, though still there
    state = commit_nodes(reader, P, random_vectors(1, DIM, seed=2))  # the next write
    assert sorted(stored_texts(writer, P)) == [1, 3, 4, 6, 7]
    assert FORGETTING_KEY not in _states(writer)
    assert (state.node_count, state.forgotten) == (7, [(2, 2, 2), (5, 5, 2)])


@pytest.mark.parametrize("store", ["chroma"], indirect=True)
def test_a_chroma_forget_interrupted_before_its_commit_point_changes_nothing(
    store: Store, monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend = backend_of(store)
    assert isinstance(backend, ChromaBackend)
    commit_nodes(backend, P, random_vectors(3, DIM))

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("disk full")

    with monkeypatch.context() as patch:
        patch.setattr(type(backend.states), "upsert", refuse)
        with pytest.raises(StorageError, match="nothing was forgotten"):
            forget(backend, P, [1])
    state = backend_of(store).read_state(P)
    assert state is not None and (state.rev, state.forgotten) == (1, [])
    assert sorted(stored_texts(backend, P)) == [1, 2, 3]


@pytest.mark.parametrize("store", ["chroma"], indirect=True)
def test_a_snapshot_from_before_a_forget_is_deleted_and_never_used(
    store: Store, monkeypatch: pytest.MonkeyPatch,
) -> None:
    stream = store.open(P, embeddings=_Embeddings())
    stream.add_many([{"type": "event", "description": f"玛丽亚第{i}次散步", "poignancy": 3}
                     for i in range(4)])
    stream.close()
    [snap] = _snapshot_files(store)
    assert "玛丽亚第1次散步".encode() in snap.read_bytes()
    backend = backend_of(store)
    assert isinstance(backend, ChromaBackend)
    stale = backend.read_snapshot(P)
    assert stale is not None
    with monkeypatch.context() as patch:  # stopped after its commit point: records still there
        patch.setattr(ChromaBackend, "_finish_forget", _crash)
        with pytest.raises(KeyboardInterrupt):
            forget(backend, P, [2])
    assert _snapshot_files(store) == []  # the snapshot went before the commit point
    assert backend.read_snapshot(P) is None
    key = backend.begin_load(P)
    # a cache that still holds node_2 (no row numbers) cannot be saved under the new state
    assert not backend.write_snapshot(P, key, stale[1])
    assert _snapshot_files(store) == []
    content = stale[1]
    keep = np.array([0, 2, 3])
    content.rows = {name: rows[keep] for name, rows in content.rows.items()}
    content.rows["node_number"] = np.array([1, 3, 4], dtype=np.int64)
    content.meta["n"] = 3
    assert backend.write_snapshot(P, key, content)
    state, back = backend.read_snapshot(P) or (None, None)
    assert state is not None and state.forgotten == [(2, 2, 2)]
    assert back is not None and back.rows["node_number"][:3].tolist() == [1, 3, 4]


def test_a_state_that_forgot_nothing_is_stored_as_before() -> None:
    state = StreamState(node_count=3, rev=4)
    assert "forgotten" not in state.model_dump_json()  # snapshot hashes and exports unchanged
    later = state.forgetting([1, 3])
    assert later.model_dump()["forgotten"] == [(1, 1, 5), (3, 3, 5)]
    assert StreamState.model_validate_json(later.model_dump_json()) == later
    assert later.live_numbers(0, 9).tolist() == [2]
    assert later.forgetting([2]).forgotten_since(5) == [(2, 2)]


@pytest.mark.parametrize("store", ["postgres"], indirect=True)
def test_the_database_ranking_never_ranks_a_forgotten_memory(store: Store) -> None:
    from datetime import datetime

    from langchain_genmem.numerics.scoring import Weights

    backend = backend_of(store)
    assert isinstance(backend, PostgresBackend)
    vectors = random_vectors(40, DIM, seed=3)
    commit_nodes(backend, P, vectors)

    def ranked() -> tuple[list[int], int]:
        got = backend.rank(P, vectors[6], k=40, mode="hours", decay=0.99, weights=Weights(),
                           now=datetime(2024, 5, 2))
        return [r.node.node_count for r in got.rows], got.candidate_count

    best, count = ranked()
    assert best[0] == 7 and count == 40  # node_7 is the query itself: first before the forget
    forget(backend, P, [7, 8, 30])
    best, count = ranked()
    assert count == 37 and not {7, 8, 30} & set(best)
    assert backend.retrieve_relevant(P, "event", ["谈话"])[0].node_count == 40
    assert 30 not in [n.node_count for n in backend.retrieve_relevant(P, "event", ["谈话"])]
