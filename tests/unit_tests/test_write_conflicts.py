"""A write the store ends in a conflict is run again from the start, a bounded number of times.

A PostgreSQL deadlock or serialization failure inside a write's transaction surfaces as
`StorageConflictError` (nothing committed); the stream catches up and writes again, at most
`CONFLICT_ATTEMPTS` times in all, and reports what the attempt that committed did.
"""

from __future__ import annotations

from datetime import datetime

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import MemoryStream, StorageConflictError
from langchain_genmem.backends import base

P = "玛丽亚"
NOW = datetime(2024, 3, 2, 9)


def stream_with(flaky: int, method: str, monkeypatch: pytest.MonkeyPatch) -> tuple:
    stream = MemoryStream(P, embeddings=DeterministicFakeEmbedding(size=8), clock=lambda: NOW)
    stream.add_many([{"type": "event", "description": f"玛丽亚 记忆 {i}", "poignancy": 3}
                     for i in range(5)])
    monkeypatch.setattr(base, "CONFLICT_BACKOFF", 0.0)
    real = getattr(stream.backend, method)
    calls = []

    def sometimes(*args, **kwargs):
        calls.append(args)
        if len(calls) <= flaky:
            raise StorageConflictError("could not store the write: a deadlock (SQLSTATE 40P01)")
        return real(*args, **kwargs)

    monkeypatch.setattr(stream.backend, method, sometimes)
    return stream, calls


def test_a_forget_ended_in_a_conflict_is_made_again_and_reported_once(monkeypatch) -> None:
    stream, calls = stream_with(2, "forget", monkeypatch)
    report = stream.forget(["node_2"])
    assert len(calls) == 3 and report.forgotten == ("node_2",)
    assert len(stream) == 4 and "node_2" not in stream
    assert stream.committed.forgotten_numbers() == frozenset({2})


def test_an_add_ended_in_a_conflict_is_made_again_with_the_same_numbers(monkeypatch) -> None:
    stream, calls = stream_with(1, "commit", monkeypatch)
    node = stream.add_event("玛丽亚 又记得一件事", poignancy=4)
    assert len(calls) == 2 and node.node_id == "node_6"
    assert [n.node_id for n in stream.nodes()][0] == "node_6" and len(stream) == 6


def test_a_conflict_that_lasts_is_raised_and_nothing_changed(monkeypatch) -> None:
    stream, calls = stream_with(99, "forget", monkeypatch)
    with pytest.raises(StorageConflictError, match="SQLSTATE 40P01"):
        stream.forget(["node_2"])
    assert len(calls) == base.CONFLICT_ATTEMPTS
    assert "node_2" in stream and len(stream) == 5
