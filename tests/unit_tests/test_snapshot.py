"""The open snapshot beside an embedded folder: used only when it is exactly the store.

A stream that closes saves its committed nodes; the next open reads them from the snapshot
instead of Chroma's node records. A commit, an access-time write or a corrupt or foreign file
makes the snapshot unusable: the stream then opens from Chroma, as before, and saves a new one.
"""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import MemoryStream
from langchain_genmem.backends import snapshot
from langchain_genmem.backends.chroma import ChromaBackend

PERSONA = "玛丽亚 Lopez"
T0 = datetime(2024, 3, 1, 9)
EMB = DeterministicFakeEmbedding(size=8)


def open_stream(path, persona: str = PERSONA) -> MemoryStream:
    return MemoryStream(persona, path=str(path), embeddings=EMB, clock=lambda: T0)


def filled(path, n: int = 12, persona: str = PERSONA) -> MemoryStream:
    stream = open_stream(path, persona)
    stream.add_many([
        {"type": "thought" if i % 4 == 3 else "event", "description": f"玛丽亚 记忆 {i}",
         "subject": "玛丽亚", "object": f"书 {i % 3}", "poignancy": 1 + i % 9,
         "created": T0 + timedelta(minutes=i), "embedding": np.arange(8.0) + i}
        for i in range(n)
    ])
    stream.add_event("one more", poignancy=2, embedding=np.ones(8))  # a self-committing add
    return stream


def view(stream: MemoryStream) -> tuple:
    return (stream.state, [n.model_dump() for n in stream.nodes()],
            stream.columns.vectors[: len(stream)].tolist(),
            stream.columns.last_accessed[: len(stream)].tolist(), stream.keyword_index)


def snapshot_file(path, persona: str = PERSONA):
    return snapshot.path_of(str(path.resolve()), "genmem", persona)


def test_a_closed_stream_reopens_from_its_snapshot(tmp_path, monkeypatch):
    writer = filled(tmp_path)
    writer.mark_accessed(["node_2"], when=T0 + timedelta(days=1))
    expected = view(writer)
    writer.close()
    assert snapshot_file(tmp_path).exists()
    monkeypatch.setattr(ChromaBackend, "read_nodes", lambda *a, **k: pytest.fail("read Chroma"))
    again = open_stream(tmp_path)
    assert view(again) == expected


def test_a_commit_after_the_snapshot_makes_it_stale(tmp_path):
    filled(tmp_path).close()
    other = open_stream(tmp_path)
    other.add_event("新的记忆", poignancy=5, embedding=np.full(8, 3.0))
    expected = view(other)
    other.flush()  # left without close(): no new snapshot, as after a crash
    again = open_stream(tmp_path)
    assert view(again) == expected
    assert again.get("node_14").description == "新的记忆"


def test_access_times_written_after_the_snapshot_make_it_stale(tmp_path):
    filled(tmp_path).close()
    other = open_stream(tmp_path)
    other.mark_accessed(["node_5"], when=T0 + timedelta(days=2))
    other.flush()  # stored in Chroma, the snapshot not rewritten
    again = open_stream(tmp_path)
    assert again.get("node_5").last_accessed == T0 + timedelta(days=2)
    assert view(again) == view(other)


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage"])
def test_a_corrupt_snapshot_is_ignored_and_rebuilt(tmp_path, damage, caplog):
    writer = filled(tmp_path)
    expected = view(writer)
    writer.close()
    path = snapshot_file(tmp_path)
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0xFF
    elif damage == "truncate":
        data = data[: len(data) // 3]
    else:
        data = bytearray(b"not a snapshot at all")
    path.write_bytes(bytes(data))
    again = open_stream(tmp_path)
    assert view(again) == expected
    assert "snapshot" in caplog.text
    key = again.backend.snapshot_key(PERSONA)
    assert snapshot.read(path, key) is not None  # written again, whole


def test_another_personas_snapshot_is_never_used(tmp_path):
    filled(tmp_path, 12, "Klaus").close()
    writer = filled(tmp_path, 12)
    expected = view(writer)
    writer.close()
    shutil.copyfile(snapshot_file(tmp_path, "Klaus"), snapshot_file(tmp_path))
    again = open_stream(tmp_path)
    assert view(again) == expected


def test_servers_and_in_memory_stores_keep_no_snapshot(tmp_path):
    stream = MemoryStream(PERSONA, embeddings=EMB)
    stream.add_event("x", poignancy=1, embedding=np.ones(8))
    assert stream.backend.snapshot_key(PERSONA) is None
    stream.close()
