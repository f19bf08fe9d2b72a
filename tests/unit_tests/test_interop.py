"""Load and dump of the original Generative Agents storage format, on the two real fixtures."""

from __future__ import annotations

import json
import math
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

from langchain_genmem.core.errors import InteropError
from langchain_genmem.interop import (
    FixedClock,
    dump_associative_memory,
    import_storage,
    load_associative_memory,
    persona_of,
)
from langchain_genmem.interop import generative_agents as ga
from langchain_genmem.memory.stream import MemoryStream

DATA = Path(__file__).resolve().parents[2] / "data" / "generative_agents"
MARIA = DATA / "July1_the_ville_isabella_maria_klaus-step-3-12/personas/Maria Lopez"
ISABELLA = DATA / "July1_the_ville_isabella_maria_klaus-step-3-2/personas/Isabella Rodriguez"
FIXTURES = {"Maria Lopez": MARIA, "Isabella Rodriguez": ISABELLA}
ASSOC = Path("bootstrap_memory/associative_memory")
FAKE = DeterministicFakeEmbedding(size=8)


class LookupEmbeddings(Embeddings):
    """The original's own 1536-d vectors: texts are looked up in embeddings.json files."""

    def __init__(self, *persona_folders: Path) -> None:
        self.table: dict[str, list[float]] = {}
        for folder in persona_folders:
            self.table.update(json.loads((folder / ASSOC / "embeddings.json").read_text("utf-8")))
        self.fallback = DeterministicFakeEmbedding(size=1536)
        self.document_calls = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.document_calls += 1
        return [self.table.get(t) or self.fallback.embed_query(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.table.get(text) or self.fallback.embed_query(text)


def content(stream: MemoryStream) -> dict[str, Any]:
    """Everything a round trip must keep."""
    return {
        "nodes": [n.model_dump() for n in stream.nodes()],
        "kw_strength": stream.kw_strength,
        "state": stream.state.model_dump(exclude={"rev"}),
        "vectors": {k: v.tolist() for k, v in stream.embeddings_by_key().items()},
    }


def saved(folder: Path, name: str) -> Any:
    return json.loads((folder / name).read_text("utf-8"))


def load(folder: Path, persona: str = "x", **kwargs: Any) -> MemoryStream:
    """Load quietly, with a fake 8-d model unless another is given."""
    kwargs.setdefault("embeddings", FAKE)
    kwargs.setdefault("progress", False)
    return load_associative_memory(folder, persona=persona, **kwargs)


@pytest.fixture
def isabella(tmp_path: Path) -> Path:
    """A writable copy of Isabella's bootstrap_memory; returns its associative_memory folder."""
    target = tmp_path / "sim" / "personas" / "Isabella Rodriguez" / "bootstrap_memory"
    shutil.copytree(ISABELLA / "bootstrap_memory", target)
    return target / "associative_memory"


def edit(path: Path, change: Any) -> None:
    data = json.loads(path.read_text("utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")


# ---------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("persona", sorted(FIXTURES))
def test_round_trip_keeps_every_field_with_the_stored_vectors(persona: str, tmp_path: Path) -> None:
    source = FIXTURES[persona]
    emb = LookupEmbeddings(source)
    first = load(source / ASSOC, persona, embeddings=emb)
    assert emb.document_calls == 0  # the 1536-d vectors fit: nothing re-embedded
    raw_nodes = saved(source / ASSOC, "nodes.json")
    raw_vectors = saved(source / ASSOC, "embeddings.json")
    assert len(first) == len(raw_nodes)
    for node in first.nodes():
        raw = raw_nodes[node.node_id]
        assert ga.node_record(node) == raw
        assert node.last_accessed == node.created
        np.testing.assert_allclose(
            first.vector(node.node_id), raw_vectors[raw["embedding_key"]], rtol=1e-6
        )

    out = tmp_path / "out" / persona / ASSOC
    dump_associative_memory(first, out)
    assert saved(out, "nodes.json") == raw_nodes
    assert list(saved(out, "nodes.json")) == list(raw_nodes)  # newest first, as the original
    assert saved(out, "kw_strength.json") == saved(source / ASSOC, "kw_strength.json")
    assert set(saved(out, "embeddings.json")) == set(raw_vectors)

    second = load(out, persona, embeddings=emb)
    assert content(second) == content(first)
    assert second.clock() == first.clock()


def test_loaded_state_follows_scratch_json() -> None:
    stream = load(MARIA / ASSOC, "Maria Lopez", embeddings=LookupEmbeddings(MARIA))
    scratch = saved(MARIA / "bootstrap_memory", "scratch.json")
    state = stream.state
    for name in ("recency_w", "relevance_w", "importance_w", "recency_decay",
                 "importance_trigger_max", "importance_trigger_curr", "importance_ele_n"):
        assert getattr(state, name) == scratch[name], name
    assert state.extra["curr_time"] == "February 13, 2023, 15:17:40"
    assert state.extra["thought_count"] == 5
    assert "daily_req" not in state.extra  # lists are not scalar scratch values
    strength = saved(MARIA / ASSOC, "kw_strength.json")
    assert stream.kw_strength == {
        "event": strength["kw_strength_event"], "thought": strength["kw_strength_thought"]
    }
    assert stream.state.type_count == {"event": 222, "thought": 42, "chat": 3}
    assert max(n.depth for n in stream.nodes()) == 3
    assert stream.clock() == datetime(2023, 2, 13, 15, 17, 40)


def test_default_model_reembeds_the_1536d_vectors() -> None:
    stream = load(ISABELLA / ASSOC, "Isabella Rodriguez", embeddings=None)
    assert stream.state.dim == 384
    node = stream.get("node_3")
    expected = stream.embeddings.embed_documents([node.embedding_key])[0]
    np.testing.assert_allclose(stream.vector("node_3"), expected, atol=1e-6)


@pytest.mark.parametrize(
    ("size", "reembed", "kept"),
    [(1536, None, True), (1536, True, False), (8, None, False), (8, False, True)],
)
def test_vectors_are_kept_when_they_fit_unless_forced(
    size: int, reembed: bool | None, kept: bool
) -> None:
    emb = DeterministicFakeEmbedding(size=size)
    stream = load(ISABELLA / ASSOC, embeddings=emb, reembed=reembed)
    node = stream.get("node_1")
    stored = saved(ISABELLA / ASSOC, "embeddings.json")[node.embedding_key]
    got = stream.vector("node_1")
    if kept:
        np.testing.assert_allclose(got, stored, rtol=1e-6)
    else:
        np.testing.assert_allclose(got, emb.embed_documents([node.embedding_key])[0], rtol=1e-6)


def test_progress_bar_draws_on_stderr_only(capsys: pytest.CaptureFixture[str]) -> None:
    load(ISABELLA / ASSOC, "Isabella Rodriguez", progress=True)
    out, err = capsys.readouterr()
    assert out == ""
    assert "Embedding Isabella Rodriguez" in err and "14/14" in err
    load(ISABELLA / ASSOC, "I2")
    assert capsys.readouterr().err == ""


def test_clock_is_the_simulation_time_unless_given(isabella: Path) -> None:
    given = FixedClock(datetime(2024, 1, 1))
    assert load(isabella, "a", clock=given).clock is given
    (isabella.parent / "scratch.json").unlink()
    stream = load(isabella, "b")
    assert stream.clock() == max(n.created for n in stream.nodes())  # no scratch: newest memory
    assert stream.state.recency_decay == 0.99  # the stream's default


def test_saved_strength_replaces_the_replayed_one_unless_empty(isabella: Path) -> None:
    edit(isabella / "kw_strength.json",
         lambda d: d.update(kw_strength_event={}, kw_strength_thought={"plan": 99}))
    stream = load(isabella)
    # events: replayed (idle events do not count), as the original keeps them for an empty map
    assert stream.kw_strength == {
        "event": {"sleep": 1, "isabella rodriguez": 1, "bed": 1, "used": 1},
        "thought": {"plan": 99},
    }


def test_bare_string_evidence_id_loads_and_dumps_as_is(isabella: Path, tmp_path: Path) -> None:
    edit(isabella / "nodes.json", lambda d: d["node_14"].update(filling="node_2"))
    stream = load(isabella)
    assert stream.get("node_14").filling == "node_2"
    assert stream.get("node_13").filling is None
    out = tmp_path / "out" / "associative_memory"
    dump_associative_memory(stream, out)
    assert saved(out, "nodes.json")["node_14"]["filling"] == "node_2"


def test_bare_text_filling_loads(isabella: Path) -> None:
    edit(isabella / "nodes.json", lambda d: d["node_14"].update(filling="a note"))
    edit(isabella / "nodes.json", lambda d: d["node_12"].update(filling=["node_9", "a note"]))
    stream = load(isabella)
    assert stream.get("node_14").filling == "a note" and stream.get("node_14").depth == 1
    assert stream.get("node_12").filling == ["node_9", "a note"]
    assert stream.get("node_12").depth == 1


def test_chinese_persona_round_trip_through_a_storage_folder(tmp_path: Path) -> None:
    emb = DeterministicFakeEmbedding(size=16)
    stream = MemoryStream("玛丽亚", embeddings=emb, clock=FixedClock(datetime(2023, 2, 13, 9)))
    e = stream.add_event("玛丽亚在咖啡馆学习物理", subject="玛丽亚", predicate="学习",
                         object="物理", poignancy=4)
    lines = [["玛丽亚", "你好，克劳斯！"], ["克劳斯", "论文写得怎么样？"]]
    c = stream.add_chat("玛丽亚和克劳斯聊论文", poignancy=6, filling=lines)
    stream.add_thought("玛丽亚喜欢物理", poignancy=7.5, evidence=[e.node_id, c.node_id],
                       keywords=["玛丽亚", "物理"])
    stream.set_extra(curr_time="February 13, 2023, 09:00:00", name="玛丽亚")
    folder = tmp_path / "sim" / "personas" / "玛丽亚" / ASSOC
    dump_associative_memory(stream, folder)
    text = (folder / "nodes.json").read_text("utf-8")
    assert "玛丽亚在咖啡馆学习物理" in text and "\\u" not in text
    assert saved(folder, "nodes.json")["node_3"]["poignancy"] == 7.5
    assert saved(folder, "nodes.json")["node_1"]["poignancy"] == 4
    assert persona_of(folder) == "玛丽亚"

    loaded = import_storage(tmp_path / "sim", embeddings=emb, progress=False)
    assert list(loaded) == ["玛丽亚"]
    assert content(loaded["玛丽亚"]) == content(stream)
    assert loaded["玛丽亚"].get("node_3").depth == 1


def test_import_storage_loads_every_persona(tmp_path: Path) -> None:
    sim = tmp_path / "sim"
    for name, folder in FIXTURES.items():
        shutil.copytree(folder, sim / "personas" / name)
    emb = LookupEmbeddings(*FIXTURES.values())
    streams = import_storage(sim, embeddings=emb, progress=False)
    assert {n: len(s) for n, s in streams.items()} == {"Isabella Rodriguez": 14, "Maria Lopez": 267}
    only = import_storage(sim / "personas", personas=["Isabella Rodriguez"], embeddings=emb,
                          progress=False)
    assert list(only) == ["Isabella Rodriguez"]
    with pytest.raises(InteropError, match="no persona 'Klaus Mueller'"):
        import_storage(sim, personas=["Klaus Mueller"], embeddings=emb, progress=False)
    with pytest.raises(InteropError, match="no personas/<name>"):
        import_storage(tmp_path / "sim" / "personas" / "Maria Lopez", progress=False)


def test_import_storage_checks_every_persona_before_storing_any(tmp_path: Path) -> None:
    sim = tmp_path / "sim"
    for name, folder in FIXTURES.items():
        shutil.copytree(folder, sim / "personas" / name)
    (sim / "personas" / "Maria Lopez" / ASSOC / "kw_strength.json").write_text("{", "utf-8")
    store = tmp_path / "store"
    with pytest.raises(InteropError, match="kw_strength.json"):
        import_storage(sim, embeddings=FAKE, progress=False, path=store)
    assert len(MemoryStream("Isabella Rodriguez", path=store, embeddings=FAKE)) == 0


def test_dump_updates_our_keys_of_an_existing_scratch_and_keeps_the_rest(isabella: Path) -> None:
    stream = load(isabella)
    stream.update_settings(recency_w=2.5, importance_trigger_curr=-3)
    before = saved(isabella.parent, "scratch.json")
    dump_associative_memory(stream, isabella)
    after = saved(isabella.parent, "scratch.json")
    assert after["recency_w"] == 2.5 and after["importance_trigger_curr"] == -3
    assert isinstance(after["importance_trigger_max"], int)
    ours = ("recency_w", "importance_trigger_curr")
    assert {k: v for k, v in after.items() if k not in ours} == {
        k: v for k, v in before.items() if k not in ours
    }
    assert list(after) == list(before)  # keys stay where they were


def test_an_original_scratch_exports_unchanged_until_the_relevance_is_set(
    isabella: Path,
) -> None:
    before = saved(isabella.parent, "scratch.json")
    stream = load(isabella)
    dump_associative_memory(stream, isabella)
    after = saved(isabella.parent, "scratch.json")
    assert after == before and list(after) == list(before)  # no relevance keys added
    stream.update_settings(relevance_mode="hybrid", lexical_weight=0.3)
    dump_associative_memory(stream, isabella)
    after = saved(isabella.parent, "scratch.json")
    assert (after["relevance_mode"], after["lexical_weight"]) == ("hybrid", 0.3)
    again = load(isabella)
    assert (again.state.relevance_mode, again.state.lexical_weight) == ("hybrid", 0.3)


def test_dump_creates_scratch_with_our_keys(tmp_path: Path) -> None:
    stream = MemoryStream("p", embeddings=DeterministicFakeEmbedding(size=4))
    stream.add_event("p wakes up", poignancy=1, created=datetime(2023, 2, 13, 7, 0, 0, 123456))
    folder = tmp_path / "p" / ASSOC
    dump_associative_memory(stream, folder)
    scratch = saved(folder.parent, "scratch.json")
    assert scratch["recency_decay"] == 0.99 and scratch["importance_trigger_max"] == 150
    node = saved(folder, "nodes.json")["node_1"]
    assert node["created"] == "2023-02-13 07:00:00" and node["depth"] == 0
    assert node["keywords"] == ["p"] and node["filling"] == []
    assert oct((folder / "nodes.json").stat().st_mode & 0o777) == "0o644"


def test_writes_are_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "nodes.json"
    target.write_text('{"old": 1}', "utf-8")

    def broken(*args: Any, **kwargs: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(ga.json, "dump", broken)
    with pytest.raises(InteropError, match="disk full"):
        ga.write_json_atomic(target, {"new": 2})
    assert target.read_text("utf-8") == '{"old": 1}'
    assert [p.name for p in tmp_path.iterdir()] == ["nodes.json"]


# ---------------------------------------------------------------------------- malformed input


def _drop_field(d: dict[str, Any]) -> None:
    del d["node_3"]["created"]


def _gap(d: dict[str, Any]) -> None:
    del d["node_5"]


def _bad_time(d: dict[str, Any]) -> None:
    d["node_2"]["created"] = "2023-13-45 25:00:00"


def _bad_type(d: dict[str, Any]) -> None:
    d["node_4"]["type"] = "dream"


def _future_evidence(d: dict[str, Any]) -> None:
    d["node_10"]["filling"] = ["node_12"]


def _key_of(folder: Path, node: str) -> str:
    return saved(folder, "nodes.json")[node]["embedding_key"]


def _unlink(name: str) -> Any:
    return lambda f: (f / name).unlink()


def _write(name: str, text: str) -> Any:
    return lambda f: (f.parent / name if name == "scratch.json" else f / name).write_text(text)


def _vector(node: str, value: Any) -> Any:
    def change(f: Path) -> None:
        key = _key_of(f, node)
        def apply(d: dict[str, Any]) -> None:
            if value is None:
                del d[key]
            else:
                d[key] = value

        edit(f / "embeddings.json", apply)

    return change


def _every_number(node: str, value: float) -> Any:
    def change(f: Path) -> None:
        key = _key_of(f, node)
        edit(f / "embeddings.json", lambda d: d.update({key: [value] * len(d[key])}))

    return change


def _nodes(change: Any) -> Any:
    return lambda f: edit(f / "nodes.json", change)


def _scratch(change: Any) -> Any:
    return lambda f: edit(f.parent / "scratch.json", change)


# case: (file named, node named or None, how to break the folder)
MALFORMED = {
    "missing nodes.json": ("nodes.json", None, _unlink("nodes.json")),
    "missing embeddings.json": ("embeddings.json", None, _unlink("embeddings.json")),
    "missing kw_strength.json": ("kw_strength.json", None, _unlink("kw_strength.json")),
    "invalid JSON": ("nodes.json", None, _write("nodes.json", '{"node_1": ')),
    "invalid scratch JSON": ("scratch.json", None, _write("scratch.json", "[")),
    "missing field": ("nodes.json", "node_3", _nodes(_drop_field)),
    "gap in ids": ("nodes.json", "node_5", _nodes(_gap)),
    "bad datetime": ("nodes.json", "node_2", _nodes(_bad_time)),
    "bad type": ("nodes.json", "node_4", _nodes(_bad_type)),
    "evidence not earlier": ("nodes.json", "node_10", _nodes(_future_evidence)),
    "vector of wrong size": ("embeddings.json", "node_4", _vector("node_4", [0.1] * 7)),
    "key without vector": ("embeddings.json", "node_6", _vector("node_6", None)),
    "bad relevance_mode": ("scratch.json", None, _scratch(lambda d: d.update(
        relevance_mode="bm25"))),
    "lexical_weight out of range": ("scratch.json", None, _scratch(lambda d: d.update(
        lexical_weight=1.5))),
    "bad curr_time": ("scratch.json", None, _scratch(lambda d: d.update(curr_time="yesterday"))),
    "deeply nested JSON": (
        "kw_strength.json", None, _write("kw_strength.json", "[" * 100_000 + "]" * 100_000)
    ),
    "100,000-digit number": (
        "scratch.json", None, _write("scratch.json", '{"recency_w": ' + "9" * 100_000 + "}")
    ),
    "null embedding_key": ("nodes.json", "node_3", _nodes(lambda d: d["node_3"].update(
        embedding_key=None))),
    "vector of 1e308": ("embeddings.json", "node_4", _every_number("node_4", 1e308)),
    "vector of NaN": ("embeddings.json", "node_5", _every_number("node_5", math.nan)),
    "description over the limit": ("nodes.json", "node_2", _nodes(lambda d: d["node_2"].update(
        description="玛丽亚" * 10_000))),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_input_names_file_and_node_and_stores_nothing(
    case: str, isabella: Path, tmp_path: Path
) -> None:
    file, node, breaks = MALFORMED[case]
    breaks(isabella)
    store = tmp_path / "store"
    with pytest.raises(InteropError) as info:
        load(isabella, "Isabella Rodriguez", path=store)
    message = str(info.value)
    assert file in message and info.value.path is not None and info.value.path.endswith(file)
    if node is not None:
        assert info.value.node_id == node and node in message
    assert len(MemoryStream("Isabella Rodriguez", path=store, embeddings=FAKE)) == 0


def test_a_persona_with_memories_is_not_imported_twice(isabella: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    load(isabella, "Isabella Rodriguez", path=store)
    with pytest.raises(InteropError, match="already has 14 memories"):
        load(isabella, "Isabella Rodriguez", path=store)
    assert len(MemoryStream("Isabella Rodriguez", path=store, embeddings=FAKE)) == 14


def test_one_add_many_carries_nodes_and_state(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, dict[str, Any]]] = []
    original = MemoryStream.add_many

    def spy(self: MemoryStream, items: Any, *, state: Any = None) -> Any:
        calls.append((len(items), dict(state or {})))
        return original(self, items, state=state)

    monkeypatch.setattr(MemoryStream, "add_many", spy)
    load(ISABELLA / ASSOC)
    assert len(calls) == 1
    count, state = calls[0]
    assert count == 14
    assert state["recency_decay"] == 0.995 and state["extra"]["curr_time"]
    assert set(state["kw_strength"]) == {"event", "thought"}


def test_not_a_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(InteropError, match="no such folder"):
        load(tmp_path / "nope")
