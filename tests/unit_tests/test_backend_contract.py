"""Every backend keeps the contract backends/base.py declares; callers ask the declaration."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem.backends.base import (
    CAPABILITIES,
    PROTOCOLS,
    MemoryBackend,
    access_log_of,
    compaction_of,
    contract_problems,
    ranking_of,
    snapshots_of,
)
from langchain_genmem.core.timeutil import to_epoch
from langchain_genmem.memory.stream import MemoryStream

EMB = DeterministicFakeEmbedding(size=8)


def test_each_backend_provides_the_required_and_the_declared_methods(store):
    backend = store.open("p", embeddings=EMB).backend
    assert contract_problems(backend) == []
    assert isinstance(backend, MemoryBackend)
    assert backend.capabilities <= set(CAPABILITIES)
    for capability in backend.capabilities:
        assert isinstance(backend, PROTOCOLS[capability])


def test_what_each_backend_declares(store, tmp_path):
    backend = store.open("p", embeddings=EMB).backend
    expected = {"chroma": {"snapshots", "views", "compaction"},
                "postgres": {"access_log", "ranking"}}[store.backend]
    assert backend.capabilities == expected
    assert (snapshots_of(backend) is not None) == ("snapshots" in expected)
    assert (access_log_of(backend) is not None) == ("access_log" in expected)
    assert (ranking_of(backend) is not None) == ("ranking" in expected)
    assert (compaction_of(backend) is not None) == ("compaction" in expected)


class Plain:
    """A backend that declares no optional capability (its methods are still there)."""

    capabilities: frozenset[str] = frozenset()

    def __init__(self, inner: MemoryBackend) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name in ("begin_load", "read_snapshot", "write_snapshot", "read_access", "rank",
                    "read_view", "compact"):
            raise AssertionError(f"{name} called on a backend that does not declare it")
        return getattr(self._inner, name)


def test_a_stream_uses_only_what_its_backend_declares(store):
    first = store.open("p", embeddings=EMB)
    first.add_event("Maria studies physics", subject="Maria", predicate="study",
                    object="physics", poignancy=3)
    first.close()
    plain = Plain(store.open("p", embeddings=EMB).backend)
    again = MemoryStream("p", embeddings=EMB, backend=plain)
    assert [n.description for n in again.nodes()] == ["Maria studies physics"]
    again.refresh()
    again.close()


def test_a_stored_access_time_never_moves_backwards(store):
    stream = store.open("p", embeddings=EMB)
    node = stream.add_event("玛丽亚在图书馆学物理", poignancy=3, created=datetime(2024, 5, 1, 9))
    stream.close()
    backend = store.open("p", embeddings=EMB).backend
    later, earlier = datetime(2024, 5, 1, 15), datetime(2024, 5, 1, 11)
    backend.write_access("p", {node.node_id: to_epoch(later)})  # one process's access
    backend.write_access("p", {node.node_id: to_epoch(earlier)})  # a slower process's
    assert store.open("p", embeddings=EMB).get(node.node_id).last_accessed == later
