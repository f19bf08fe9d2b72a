"""The service's pool of persona streams: at most N open, least recently used closed first,
never a stream a request is using, and a closed persona's memory really let go."""

from __future__ import annotations

import gc
import weakref
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from langchain_genmem.cli import Store
from langchain_genmem.memory.shutdown import OPEN_STREAMS
from langchain_genmem.service import create_app, create_service
from langchain_genmem.service.schemas import MemoryItem, RetrieveRequest

NOW = datetime(2023, 2, 14, 9, 0, 0)
PERSONAS = ["伊莎贝拉", "Klaus Mueller", "玛丽亚 洛佩兹", "山本 优子", "Tom"]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store", now=NOW)


def memory(text: str) -> MemoryItem:
    return MemoryItem(description=text, poignancy=3, created="2023-02-13 08:00:00")


def test_over_the_limit_the_least_recently_used_persona_is_closed_and_answers_again(store):
    service = create_service(store, max_open_personas=2)
    with TestClient(create_app(service)) as c:
        for name in PERSONAS:
            r = c.post("/memories/batch", json={"persona_name": name, "memories": [
                {"description": f"{name} 在咖啡馆喝茶", "poignancy": 4},
                {"description": f"{name} is reading", "poignancy": 2}]})
            assert r.status_code == 200, r.text
            health = c.get("/healthz").json()
            assert health["open_personas"] <= 2 and health["max_open_personas"] == 2
        assert c.get("/healthz").json()["open_personas"] == 2
        # the first persona was closed long ago: it opens again with all it had
        out = c.post("/retrieve", json={"persona_name": PERSONAS[0], "focal_text": "喝茶",
                                        "top_k": 1}).json()
        assert out["status"] == "ok" and out["debug"]["total_candidates"] == 2
        assert out["retrieved_nodes"][0]["description"] == f"{PERSONAS[0]} 在咖啡馆喝茶"
        assert c.get("/healthz").json()["open_personas"] == 2
        assert c.get("/personas").json()["personas"] == sorted(PERSONAS)


def test_a_closed_persona_is_flushed_and_its_stream_freed(store):
    service = create_service(store, max_open_personas=1)
    service.add(PERSONAS[0], [memory("伊莎贝拉记得这件事")])
    with service.streams.reading(PERSONAS[0]) as stream:
        stream.flush_interval = 3600  # only a close writes the access time
        first = weakref.ref(stream)
    del stream
    out = service.retrieve(RetrieveRequest(persona_name=PERSONAS[0], focal_text="这件事"))
    assert out.accessed_ids == ["node_1"]
    before = Store(store.path).backend().read_nodes(PERSONAS[0], 1, 1)[0].node
    assert before.last_accessed == datetime(2023, 2, 13, 8)  # deferred, not written yet
    service.add(PERSONAS[1], [memory("Klaus reads")])  # makes room: the first is closed
    after = Store(store.path).backend().read_nodes(PERSONAS[0], 1, 1)[0].node
    assert after.last_accessed == NOW
    gc.collect()
    assert first() is None  # nothing (the pool, the store) keeps the closed stream
    assert service.close() == 1


def test_a_stream_in_use_is_never_closed(store):
    service = create_service(store, max_open_personas=1)
    service.add(PERSONAS[0], [memory("一")])
    with service.streams.reading(PERSONAS[0]) as held:
        for name in PERSONAS[1:3]:  # each is closed after its write, not the one in use
            service.add(name, [memory(f"{name} 二")])
        assert held in OPEN_STREAMS and service.streams.open_count == 1
        assert len(held) == 1 and held.get("node_1").description == "一"
        with service.streams.reading(PERSONAS[1]) as other:
            assert service.streams.open_count == 2  # over the limit while both are used
        assert other not in OPEN_STREAMS and service.streams.open_count == 1
    assert held in OPEN_STREAMS and service.streams.open_count == 1


def test_threads_over_more_personas_than_the_limit_lose_nothing(store):
    service = create_service(store, max_open_personas=2)
    writes = 8

    def work(i: int) -> None:
        name = PERSONAS[i % len(PERSONAS)]
        service.add(name, [memory(f"{name} 第{i}件事")])
        out = service.retrieve(RetrieveRequest(persona_name=name, focal_text="事", top_k=3))
        assert out.status == "ok"
        assert service.streams.open_count <= 4  # at most the limit plus those in use

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(work, range(writes * len(PERSONAS))))
    assert service.close() <= 2
    for name in PERSONAS:
        assert len(Store(store.path).open(name)) == writes


def test_the_pool_keeps_at_least_one_persona(store):
    with pytest.raises(ValueError, match="at least one"):
        create_service(store, max_open_personas=0)


def test_closed_personas_memory_is_handed_back_every_few_closes(store, monkeypatch):
    from langchain_genmem.service import streams

    released = []
    monkeypatch.setattr(streams, "release_freed_memory", lambda: released.append(1) or True)
    monkeypatch.setattr(streams, "TRIM_EVERY", 3)
    service = create_service(store, max_open_personas=1)
    for i in range(7):  # six personas closed to make room: two returns of freed memory
        service.add(f"角色 {i}", [memory(f"第{i}件事")])
    assert len(released) == 2



@pytest.mark.parametrize("body", [
    {"description": "玛丽亚 读书", "poignancy": 3, "supersedes": "node_7"},
    {"description": "玛丽亚 读书", "poignancy": 3, "evidence": ["node_7"], "type": "thought"},
])
def test_a_refused_write_leaves_no_persona_behind(store, body):
    service = create_service(store)
    with TestClient(create_app(service)) as c:
        r = c.post("/memories", json={"persona_name": "玛丽亚 新", **body})
        assert r.status_code == 422, r.text
        assert "玛丽亚 新" not in c.get("/personas").json()["personas"]
        assert c.get("/personas/玛丽亚 新").status_code == 404
        assert c.delete("/personas/玛丽亚 新").status_code == 404
        assert c.get("/healthz").json()["open_personas"] == 0
        ok = c.post("/memories", json={"persona_name": "玛丽亚 新",
                                       "description": "玛丽亚 读书", "poignancy": 3})
        assert ok.status_code == 200, ok.text  # and the persona can still begin
        assert c.get("/personas").json()["personas"] == ["玛丽亚 新"]
