"""MemoryStream's public views for readers, and that readers outside memory/ use only them."""

from __future__ import annotations

import ast
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from langchain_genmem import MemoryStream
from langchain_genmem.core.errors import UnknownNodeError
from langchain_genmem.core.timeutil import to_epoch
from langchain_genmem.memory.cache import NodeCache

PACKAGE = Path(__file__).resolve().parents[2] / "langchain_genmem"
T0 = datetime(2024, 5, 1, 8)
# What a stream kept in private fields before it was divided into parts, and the parts.
STREAM_PRIVATES = {"_cache", "_state", "_touch_rows", "_row", "_row_or_raise", "_known",
                   "_lazy", "_keywords", "_node_cache", "_pending", "_load_everything",
                   "_mirror", "_loader", "_writer", "_access"}


def stream_of(tmp_path: Path, n: int = 3) -> MemoryStream:
    stream = MemoryStream("玛丽亚", path=tmp_path / "store", clock=lambda: T0 + timedelta(days=1))
    stream.add_many([{"type": "event", "description": f"玛丽亚在学习物理 {i}", "poignancy": 3,
                      "created": T0 + timedelta(minutes=i), "embedding": [1.0, float(i), 0.5]}
                     for i in range(n)])
    return stream


def test_committed_is_the_live_state_and_state_a_copy(tmp_path):
    stream = stream_of(tmp_path)
    held = stream.committed
    assert stream.committed is held  # no copy per read: retrieval reads it every query
    assert stream.state is not held and stream.state == held
    stream.update_settings(recency_w=0.5)
    assert stream.committed is not held  # a write replaces the state whole...
    assert held.recency_w == 1.0 and stream.committed.recency_w == 0.5  # ...never in place
    assert stream.committed.rev == held.rev + 1


def test_columns_are_the_nodes_columns(tmp_path):
    stream = stream_of(tmp_path)
    cache = stream.columns
    assert isinstance(cache, NodeCache) and cache is stream.columns
    assert cache.n == len(stream) == 3
    assert [n.description for n in cache.nodes] == [f"玛丽亚在学习物理 {i}" for i in range(3)]
    assert cache.vectors[1].tolist() == [1.0, 1.0, 0.5]


def test_columns_of_a_lazy_stream_load_it(tmp_path):
    stream_of(tmp_path).close()
    lazy = MemoryStream("玛丽亚", path=tmp_path / "store", lazy=True)
    assert lazy.lazy
    assert lazy.columns.n == 3
    assert not lazy.lazy


def test_row_of(tmp_path):
    stream = stream_of(tmp_path)
    assert stream.row_of("node_1") == 0
    assert stream.row_of("node_3") == 2
    assert stream.row_of("node_4") is None
    assert stream.row_of("记忆") is None


def test_record_access_moves_times_forward_and_reaches_the_store(tmp_path):
    stream = stream_of(tmp_path)
    stream.flush_interval = 3600  # only a flush writes them
    later = T0 + timedelta(hours=5)
    stream.record_access(np.array([0, 2], dtype=np.int64), to_epoch(later))
    stream.record_access(np.array([2], dtype=np.int64), to_epoch(T0))  # older: ignored
    assert [stream.get(f"node_{i}").last_accessed for i in (1, 2, 3)] == [
        later, T0 + timedelta(minutes=1), later]
    assert stream.flush() == 2
    stream.close()
    again = MemoryStream("玛丽亚", path=tmp_path / "store")
    assert again.get("node_1").last_accessed == later
    assert again.get("node_2").last_accessed == T0 + timedelta(minutes=1)


def test_mark_accessed_still_names_an_unknown_node(tmp_path):
    stream = stream_of(tmp_path)
    with pytest.raises(UnknownNodeError, match="node_9"):
        stream.mark_accessed(["node_1", "node_9"])
    assert stream.flush() == 0  # nothing was recorded


def test_readers_outside_memory_use_the_public_views():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent.name == "memory":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            own = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (
                node.value.id in {"self", "cls"})
            if isinstance(node, ast.Attribute) and node.attr in STREAM_PRIVATES and not own:
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} .{node.attr}")
    assert found == []
