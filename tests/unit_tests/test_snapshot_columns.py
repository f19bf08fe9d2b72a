"""The columnar snapshot: the cache's columns read back whole, node objects made on demand.

A stream opened from a snapshot must answer exactly as one opened from Chroma (same nodes,
vectors, access times, keyword index, embedding keys), hand out one object per node, and
never trust a snapshot the store has moved past, whoever moved it, or a damaged file.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from datetime import datetime, timedelta
from pathlib import Path

import chromadb
import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream
from langchain_genmem.backends import snapshot
from langchain_genmem.backends.chroma import ChromaBackend
from langchain_genmem.core.timeutil import from_epoch
from langchain_genmem.memory.cache import LazyNodes, from_epochs
from tests.support.writers import run_python

PERSONA = "玛丽亚 Lopez"
T0 = datetime(2024, 3, 1, 9)
EMB = DeterministicFakeEmbedding(size=8)


def open_stream(path: Path) -> MemoryStream:
    return MemoryStream(PERSONA, path=str(path), embeddings=EMB, clock=lambda: T0)


def items(n: int, start: int = 0) -> list[dict]:
    return [
        {"type": ("event", "thought", "chat")[i % 3], "description": f"玛丽亚 记忆 {start + i}",
         "subject": "玛丽亚", "predicate": "读", "object": f"书 {i % 4}",
         "keywords": ["玛丽亚", f"书 {i % 4}", "Physics"], "poignancy": 1 + i % 9,
         "created": T0 + timedelta(minutes=start + i, microseconds=7 * i),
         "expiration": T0 + timedelta(days=3) if i % 5 == 0 else None,
         "filling": [["玛丽亚", "你好"]] if i % 3 == 2 else [],
         "embedding_key": "idle 空闲" if i % 7 == 6 else None,
         "embedding": np.arange(8.0) * (i + 1) - 3}
        for i in range(n)
    ]


def view(stream: MemoryStream) -> tuple:
    n = len(stream)
    cache = stream.columns
    columns = {name: getattr(cache, name)[:n].tolist() for name in (
        "vectors", "codes", "norms", "inv_norms", "unit_scale", "last_accessed", "created",
        "expiration", "poignancy", "type_code", "idle", "type_count", "depth")}
    return (stream.state, [x.model_dump() for x in stream.nodes()], columns, cache.key_row,
            cache.max_relative_residual, stream.keyword_index, stream.kw_strength)


def snapshot_file(path: Path) -> Path:
    return snapshot.path_of(str(path.resolve()), "genmem", PERSONA)


def from_chroma(path: Path) -> tuple:
    """The view of a stream opened with its snapshot moved away (then put back)."""
    file = snapshot_file(path)
    aside = file.with_suffix(".aside")
    file.rename(aside)
    try:
        return view(open_stream(path))
    finally:
        aside.replace(file)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder written once for the module: 41 memories and two access times, then closed."""
    folder = tmp_path_factory.mktemp("written")
    writer = open_stream(folder)
    writer.add_many(items(40))
    writer.add_thought("我想 玛丽亚 喜欢书", poignancy=7, evidence=["node_1", "node_2"],
                       embedding=np.ones(8))
    writer.mark_accessed(["node_3", "node_30"], when=T0 + timedelta(hours=5, microseconds=3))
    writer.close()
    return folder


@pytest.fixture
def closed(written: Path, tmp_path: Path) -> Path:
    """A copy of the written folder of the test's own (tests change it, snapshot included)."""
    folder = tmp_path / "closed"
    shutil.copytree(written, folder)
    return folder


def no_chroma_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ChromaBackend, "read_nodes", lambda *a, **k: pytest.fail("read Chroma"))


def test_a_snapshot_open_equals_a_chroma_open(closed, monkeypatch):
    expected = from_chroma(closed)
    no_chroma_reads(monkeypatch)
    again = open_stream(closed)
    assert isinstance(again.columns.nodes, LazyNodes)
    assert view(again) == expected
    assert again.retrieve_relevant_events("玛丽亚", "", "physics")[0].node_id == "node_40"


def test_nodes_are_made_on_demand_once_each(closed, monkeypatch):
    no_chroma_reads(monkeypatch)
    again = open_stream(closed)
    held = again.columns.nodes._held
    assert held.count(None) == len(again)  # nothing made by opening
    docs = GenerativeAgentsRetriever(stream=again, k=3, update_access=False).invoke("书")
    assert len(docs) == 3 and held.count(None) == len(again) - 3
    first = again.get("node_7")
    assert again.get("node_7") is first
    every = again.nodes()
    assert held.count(None) == 0
    assert every[-7] is first and list(again.columns.nodes)[6] is first


def test_access_times_reach_made_and_unmade_nodes(closed, monkeypatch):
    no_chroma_reads(monkeypatch)
    again = open_stream(closed)
    made = again.get("node_5")
    later = T0 + timedelta(days=1, microseconds=11)
    again.mark_accessed(["node_5", "node_6"], when=later)
    assert made.last_accessed == later
    assert again.get("node_6").last_accessed == later
    again.columns.merge_access({9: (later + timedelta(hours=1)).timestamp()})
    assert again.get("node_9").last_accessed == later + timedelta(hours=1)


def test_writes_after_a_snapshot_open_are_in_the_next_snapshot(closed, monkeypatch):
    again = open_stream(closed)
    again.get("node_2")  # one row made, the rest still texts of the snapshot
    again.add_many(items(5, start=100))
    again.add_event("新事件 idle", poignancy=3, embedding_key="idle 空闲")  # the held vector
    assert np.array_equal(again.vector("node_47"), again.vector("node_35"))  # newest "idle 空闲"
    again.mark_accessed(["node_1"], when=T0 + timedelta(days=9))
    expected = view(again)
    again.close()
    assert from_chroma(closed) == expected
    no_chroma_reads(monkeypatch)
    assert view(open_stream(closed)) == expected


def test_closing_an_unchanged_stream_keeps_its_snapshot(closed):
    file = snapshot_file(closed)
    before = file.stat()
    again = open_stream(closed)
    again.get("node_1")
    again.close()
    after = file.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


@pytest.mark.parametrize("where", [0.0, 0.001, 0.3, 0.6, 0.97, 0.999, 1.0])
def test_a_flipped_byte_anywhere_is_caught(closed, where, caplog):
    expected = from_chroma(closed)
    file = snapshot_file(closed)
    data = bytearray(file.read_bytes())
    at = min(len(data) - 1, int(len(data) * where))
    data[at] ^= 0x5A
    file.write_bytes(bytes(data))
    again = open_stream(closed)
    assert view(again) == expected
    assert "snapshot" in caplog.text  # reported, then written again whole
    assert snapshot.read(file, again.backend.snapshot_key(PERSONA)) is not None


@pytest.mark.parametrize("change", ["cut one byte", "one byte more", "empty"])
def test_a_resized_snapshot_is_rebuilt(closed, change, monkeypatch):
    expected = from_chroma(closed)
    file = snapshot_file(closed)
    data = file.read_bytes()
    file.write_bytes({"cut one byte": data[:-1], "one byte more": data + b"\0",
                      "empty": b""}[change])
    again = open_stream(closed)
    assert view(again) == expected
    assert snapshot.read(file, again.backend.snapshot_key(PERSONA)) is not None  # rebuilt


def test_a_damaged_snapshot_opens_from_chroma_and_is_rewritten(closed):
    expected = from_chroma(closed)
    file = snapshot_file(closed)
    data = bytearray(file.read_bytes())
    data[len(data) // 5] ^= 1  # inside the vectors
    file.write_bytes(bytes(data))
    again = open_stream(closed)
    assert view(again) == expected
    assert snapshot.read(file, again.backend.snapshot_key(PERSONA)) is not None


WRITE_IN_ANOTHER_PROCESS = """
import json, sys
from datetime import datetime
import numpy as np
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_genmem import MemoryStream
s = MemoryStream(sys.argv[2], path=sys.argv[1], embeddings=DeterministicFakeEmbedding(size=8),
                 clock=lambda: datetime(2024, 3, 2))
if sys.argv[3] == "add":
    s.add_event("另一个进程写的", poignancy=9, embedding=np.full(8, 2.0))
else:
    s.mark_accessed(["node_4"], when=datetime(2024, 4, 1, 12))
s.close()  # saves its own snapshot: the test puts the older one back
print(json.dumps({"nodes": len(s)}))
"""


@pytest.mark.parametrize("what", ["add", "access"])
def test_an_older_snapshot_loses_to_another_processes_write(closed, what):
    file = snapshot_file(closed)
    older = file.read_bytes()
    # this process forgets its Chroma view of the folder, which the other process changes
    chromadb.api.client.SharedSystemClient.clear_system_cache()
    run_python(WRITE_IN_ANOTHER_PROCESS, str(closed), PERSONA, what)
    file.write_bytes(older)  # intact, but taken before the other process wrote
    again = open_stream(closed)
    if what == "add":
        assert len(again) == 42 and again.get("node_42").description == "另一个进程写的"
    else:
        assert again.get("node_4").last_accessed == datetime(2024, 4, 1, 12)
    assert snapshot.read(file, again.backend.snapshot_key(PERSONA)) is not None  # rewritten
    assert file.read_bytes() != older


def test_a_snapshot_of_an_older_format_is_ignored_and_removed(closed):
    expected = from_chroma(closed)
    file = snapshot_file(closed)
    legacy = file.with_suffix(".npz")
    legacy.write_bytes(b"version 1 snapshot")
    file.unlink()
    again = open_stream(closed)
    assert view(again) == expected
    assert file.exists() and not legacy.exists()


def test_write_and_read_round_trip_with_spare_rows(tmp_path):
    key = snapshot.Key("c", "玛丽亚", 3, 4, "h" * 64, "")
    content = snapshot.Content(
        rows={"v": np.arange(12, dtype=np.float32).reshape(4, 3),
              "flag": np.array([True, False, True, True])},
        arrays={"blob": np.frombuffer("文字".encode(), dtype=np.uint8)},
        meta={"名字": "玛丽亚", "n": 4},
    )
    path = tmp_path / "s.snap"
    snapshot.write(path, key, content)
    got = snapshot.read(path, key, spare=5)
    assert got is not None and got.meta == {"名字": "玛丽亚", "n": 4}
    assert got.rows["v"].shape == (9, 3)
    assert got.rows["v"][:4].tolist() == content.rows["v"].tolist()
    assert got.rows["flag"][:4].tolist() == [True, False, True, True]
    assert got.arrays["blob"].tobytes().decode() == "文字"
    assert snapshot.matches(path, key)
    other = snapshot.Key("c", "玛丽亚", 4, 4, "h" * 64, "")
    assert snapshot.read(path, other) is None and not snapshot.matches(path, other)
    with pytest.raises(ValueError, match="rows"):
        snapshot.write(path, other, snapshot.Content(rows={"v": np.zeros((3, 3))}))
    assert snapshot.read(path, key) is not None  # the failed write replaced nothing
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_from_epochs_equals_from_epoch_value_by_value():
    rng = np.random.default_rng(3)
    seconds = np.concatenate([
        rng.uniform(-2e9, 4e9, 2000),  # before 1970 too
        np.floor(rng.uniform(0, 2e9, 500)) + 0.5e-6,  # exact half microseconds
        np.floor(rng.uniform(-1e9, 0, 500)) - 1.5e-6,
        [0.0, -0.0, 1e-7, -1e-7, T0.timestamp()],
    ])
    assert from_epochs(seconds) == [from_epoch(float(x)) for x in seconds]


def test_threads_asking_for_the_same_nodes_get_the_same_objects(closed):
    again = open_stream(closed)
    ids = [f"node_{i}" for i in range(1, len(again) + 1)]

    def ask(seed: int, seen: list) -> None:
        if seed % 2:
            order = np.random.default_rng(seed).permutation(len(ids))
            got = {int(i): again.get(ids[i]) for i in order}
            seen.append([got[row] for row in range(len(ids))])
        else:
            seen.append(again.nodes()[::-1])

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads interleave as often as they can
    try:
        for _ in range(8):
            again.columns.nodes._held = [None] * len(ids)  # every node to be made again
            seen: list[list] = []
            threads = [threading.Thread(target=ask, args=(s, seen)) for s in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert len(seen) == 8
            for row in range(len(ids)):
                assert len({id(got[row]) for got in seen}) == 1
    finally:
        sys.setswitchinterval(switch)


def test_an_intact_snapshot_that_does_not_fit_the_cache_is_not_used(closed, caplog):
    expected = from_chroma(closed)
    again = open_stream(closed)
    key = again.backend.snapshot_key(PERSONA)
    content = again.columns.snapshot_content()
    del content.rows["codes"]  # well formed and checksummed, but short of a column
    content.meta["keywords"] = {}
    snapshot.write(snapshot_file(closed), key, content)
    assert snapshot.read(snapshot_file(closed), key) is not None
    reopened = open_stream(closed)
    assert view(reopened) == expected
    assert "does not fit" in caplog.text
    assert "codes" in snapshot.read(snapshot_file(closed), key).rows  # written again, whole
