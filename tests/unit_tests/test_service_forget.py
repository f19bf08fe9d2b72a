"""Forgetting through `genmem serve`'s app in process (FastAPI's TestClient, no sockets): by id,
by selector and a whole persona; afterwards retrieval, keyword lookups, stats and exports no
longer hold the text; idempotence, bounds and key scopes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from langchain_genmem.cli import Store
from langchain_genmem.interop.generative_agents import dump_associative_memory
from langchain_genmem.service import ApiKey, KeyRing, create_app, create_service
from langchain_genmem.service.schemas import MAX_FORGET_IDS, MAX_TEXT_CHARS
from tests.unit_tests.test_service_http import ADMIN, ISABELLA_ONLY, NOW, PERSONA, bearer

OTHER = "克劳斯"
SECRET = "伊莎贝拉的银行卡密码是四七一一"
SCOPES = KeyRing([ApiKey(ADMIN), ApiKey(ISABELLA_ONLY, frozenset({PERSONA}))])


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store", now=NOW)


@pytest.fixture
def client(store: Store) -> Iterator[TestClient]:
    with TestClient(create_app(create_service(store), keys=SCOPES)) as c:
        yield c


def add(client: TestClient, persona: str, memories: list[dict]) -> list[str]:
    r = client.post("/memories/batch", headers=bearer(ADMIN),
                    json={"persona_name": persona, "memories": memories})
    assert r.status_code == 200, r.text
    return [m["node_id"] for m in r.json()["memories"]]


def retrieved(client: TestClient, persona: str, focal: str, key: str = ADMIN) -> list[str]:
    r = client.post("/retrieve", headers=bearer(key), json={
        "persona_name": persona, "focal_text": focal, "top_k": 50, "types": "event,thought,chat",
        "preset": "conversation"})
    assert r.status_code == 200, r.text
    return [n["description"] for n in r.json()["retrieved_nodes"]]


def exported(store: Store, persona: str, folder: Path) -> str:
    """The text of the persona's export in the original format (nodes.json)."""
    with store.open(persona) as stream:
        dump_associative_memory(stream, folder)
    return (folder / "nodes.json").read_text(encoding="utf-8")


def fill(client: TestClient) -> list[str]:
    return add(client, PERSONA, [
        {"description": SECRET, "poignancy": 9, "subject": PERSONA, "predicate": "记得",
         "object": "银行卡密码", "created": "2023-02-13 08:00:00"},
        {"description": "伊莎贝拉在霍布斯咖啡馆筹备情人节派对", "poignancy": 8,
         "created": "2023-02-13 10:00:00"},
        {"description": "克劳斯说他喜欢伊莎贝拉的咖啡", "poignancy": 4, "type": "chat",
         "conversation": "会话一", "speaker": "克劳斯", "created": "2023-02-13 12:00:00"},
        {"description": "伊莎贝拉说谢谢你，克劳斯", "poignancy": 3, "type": "chat",
         "conversation": "会话一", "speaker": PERSONA, "created": "2023-02-13 12:01:00"},
        {"description": "伊莎贝拉记得自己的密码很重要", "poignancy": 6, "type": "thought",
         "evidence": "node_1", "created": "2023-02-13 13:00:00"},
    ])


def test_forgetting_one_memory_by_id_removes_it_everywhere_and_is_idempotent(
    client, store, tmp_path
):
    fill(client)
    assert SECRET in retrieved(client, PERSONA, "银行卡密码")
    r = client.delete(f"/personas/{PERSONA}/memories/node_1", headers=bearer(ADMIN))
    assert r.status_code == 200, r.text
    out = r.json()
    # the thought citing it as evidence goes with it
    assert (out["forgotten"], out["derived"], out["count"]) == (["node_1", "node_5"],
                                                                 ["node_5"], 2)
    assert (out["already_forgotten"], out["remaining"], out["dry_run"]) == ([], 3, False)
    found = retrieved(client, PERSONA, "银行卡密码")
    assert SECRET not in found and "伊莎贝拉记得自己的密码很重要" not in found
    assert len(found) == 3
    keywords = client.post("/keyword-retrieve", headers=bearer(ADMIN),
                           json={"persona_name": PERSONA, "subject": "银行卡密码"}).json()
    assert keywords["event_count"] == 0
    stats = client.get(f"/personas/{PERSONA}", headers=bearer(ADMIN)).json()
    assert stats["memories"] == 3 and stats["types"].get("thought", 0) == 0
    assert "银行卡密码" not in json.dumps(stats["keyword_strength"], ensure_ascii=False)

    again = client.delete(f"/personas/{PERSONA}/memories/node_1", headers=bearer(ADMIN))
    assert again.status_code == 200, again.text
    assert (again.json()["forgotten"], again.json()["already_forgotten"]) == ([], ["node_1"])
    assert again.json()["remaining"] == 3

    never = client.delete(f"/personas/{PERSONA}/memories/node_99", headers=bearer(ADMIN))
    assert never.status_code == 404
    assert never.json()["message"].startswith("node_ids: 'node_99' was never stored")
    mixed = client.post("/forget", headers=bearer(ADMIN), json={
        "persona_name": PERSONA, "node_ids": "node_2, node_99"})
    assert mixed.status_code == 404  # all or nothing: node_2 stays
    assert "伊莎贝拉在霍布斯咖啡馆筹备情人节派对" in retrieved(client, PERSONA, "派对")
    client.close()  # the lifespan closes the streams
    text = exported(store, PERSONA, tmp_path / "export" / "associative_memory")
    assert SECRET not in text and "密码很重要" not in text and "情人节派对" in text


def test_a_filtered_forget_takes_the_librarys_selectors(client):
    fill(client)
    dry = client.post("/forget", headers=bearer(ADMIN), json={
        "persona_name": PERSONA, "conversation": "会话一", "dry_run": True})
    assert dry.status_code == 200, dry.text
    assert (dry.json()["forgotten"], dry.json()["dry_run"]) == (["node_3", "node_4"], True)
    assert len(retrieved(client, PERSONA, "克劳斯")) == 5  # a dry run forgets nothing

    said = client.post("/forget", headers=bearer(ADMIN), json={
        "persona_name": PERSONA, "conversation": "会话一", "speaker": "克劳斯"}).json()
    assert said["forgotten"] == ["node_3"]
    assert "克劳斯说他喜欢伊莎贝拉的咖啡" not in retrieved(client, PERSONA, "咖啡")

    kept = client.post("/forget", headers=bearer(ADMIN), json={
        "persona_name": PERSONA, "text": "银行卡", "keep_derived": True}).json()
    assert (kept["forgotten"], kept["kept"], kept["derived"]) == (["node_1"], ["node_5"], [])
    assert "伊莎贝拉记得自己的密码很重要" in retrieved(client, PERSONA, "密码")

    period = client.post("/forget", headers=bearer(ADMIN), json={
        "persona_name": PERSONA, "created_after": "2023-02-13 09:00:00",
        "created_before": "2023-02-13 12:30:00", "types": "event,chat"}).json()
    assert period["forgotten"] == ["node_2", "node_4"] and period["remaining"] == 1
    assert retrieved(client, PERSONA, "派对") == ["伊莎贝拉记得自己的密码很重要"]

    none = client.post("/forget", headers=bearer(ADMIN), json={
        "persona_name": PERSONA, "text": "从未说过的话"})
    assert none.status_code == 200 and none.json()["forgotten"] == []


def test_forgetting_a_whole_persona_leaves_the_others(client, store, tmp_path):
    fill(client)
    add(client, OTHER, [{"description": "克劳斯在图书馆写论文", "poignancy": 5}])
    dry = client.delete(f"/personas/{PERSONA}", params={"dry_run": "true"},
                        headers=bearer(ADMIN))
    assert dry.status_code == 200 and len(dry.json()["forgotten"]) == 5
    assert len(retrieved(client, PERSONA, "咖啡")) == 5
    r = client.delete(f"/personas/{PERSONA}", headers=bearer(ADMIN))
    assert r.status_code == 200, r.text
    assert r.json()["forgotten"] == [f"node_{i}" for i in range(1, 6)]
    assert r.json()["remaining"] == 0
    gone = client.post("/retrieve", headers=bearer(ADMIN), json={
        "persona_name": PERSONA, "focal_text": "咖啡"}).json()
    assert gone["status"] == "no_candidates"
    assert client.get(f"/personas/{PERSONA}", headers=bearer(ADMIN)).json()["memories"] == 0
    again = client.delete(f"/personas/{PERSONA}", headers=bearer(ADMIN))
    assert again.status_code == 200 and again.json()["forgotten"] == []
    assert retrieved(client, OTHER, "论文") == ["克劳斯在图书馆写论文"]
    unknown = client.delete("/personas/从未有过的人", headers=bearer(ADMIN))
    assert unknown.status_code == 404
    assert unknown.json()["message"] == "persona_name: no memories for persona '从未有过的人'"
    # a memory added after the forget is numbered after every number used before
    assert add(client, PERSONA, [{"description": "伊莎贝拉重新开始", "poignancy": 2}]) == [
        "node_6"]
    client.close()
    text = exported(store, PERSONA, tmp_path / "export" / "associative_memory")
    assert SECRET not in text and "重新开始" in text


def test_deleting_one_memory_may_keep_the_thoughts_citing_it(client):
    fill(client)
    r = client.delete(f"/personas/{PERSONA}/memories/node_1", headers=bearer(ADMIN),
                      params={"keep_derived": "true"})
    assert r.status_code == 200, r.text
    assert (r.json()["forgotten"], r.json()["kept"]) == (["node_1"], ["node_5"])
    thought = client.post("/keyword-retrieve", headers=bearer(ADMIN), json={
        "persona_name": PERSONA, "subject": PERSONA}).json()["thoughts"]
    assert [(t["node_id"], t["evidence"]) for t in thought] == [("node_5", [])]


def test_a_scoped_key_forgets_only_in_its_personas(client):
    fill(client)
    add(client, OTHER, [{"description": "克劳斯在图书馆写论文", "poignancy": 5}])
    for call in (
        lambda: client.delete(f"/personas/{OTHER}/memories/node_1",
                              headers=bearer(ISABELLA_ONLY)),
        lambda: client.delete(f"/personas/{OTHER}", headers=bearer(ISABELLA_ONLY)),
        lambda: client.post("/forget", headers=bearer(ISABELLA_ONLY),
                            json={"persona_name": OTHER, "text": "论文"}),
    ):
        r = call()
        assert r.status_code == 403, r.text
        assert r.json()["message"] == f"persona_name: this API key may not use persona {OTHER!r}"
    assert client.delete(f"/personas/{OTHER}").status_code == 401
    assert retrieved(client, OTHER, "论文") == ["克劳斯在图书馆写论文"]
    own = client.post("/forget", headers=bearer(ISABELLA_ONLY),
                      json={"persona_name": PERSONA, "node_ids": "node_2"})
    assert own.status_code == 200 and own.json()["forgotten"] == ["node_2"]


@pytest.mark.parametrize(("change", "field"), [
    ({}, "node_ids"),  # nothing selected
    ({"node_ids": "node_1, 第二条"}, "node_ids"),
    ({"node_ids": ",".join(f"node_{i}" for i in range(1, MAX_FORGET_IDS + 2))}, "node_ids"),
    ({"text": "密" * (MAX_TEXT_CHARS + 1)}, "text"),
    ({"text": "   "}, "text"),
    ({"types": "event,dream"}, "types"),
    ({"conversation": "会" * 201}, "conversation"),
    ({"created_after": "上周"}, "created_after"),
    ({"created_after": "2023-02-14", "created_before": "2023-02-13"}, "created_before"),
    ({"text": "x", "everything": True}, "everything"),
])
def test_bad_forget_input_is_422_naming_the_field_and_forgets_nothing(client, change, field):
    fill(client)
    r = client.post("/forget", headers=bearer(ADMIN), json={"persona_name": PERSONA, **change})
    assert r.status_code == 422, r.text
    assert r.json()["message"].startswith(f"{field}: "), r.json()
    assert len(retrieved(client, PERSONA, "咖啡")) == 5
    bad_id = client.delete(f"/personas/{PERSONA}/memories/第一条", headers=bearer(ADMIN))
    assert bad_id.status_code == 422 and bad_id.json()["message"].startswith("node_id: ")


def test_forget_is_declared_in_the_schema_dify_imports(client):
    schema = client.get("/openapi.json").json()
    forget = schema["paths"]["/forget"]["post"]
    assert forget["operationId"] == "forget" and "404" in forget["responses"]
    assert schema["paths"]["/personas/{name}"]["delete"]["operationId"] == "forget_persona"
    one = schema["paths"]["/personas/{name}/memories/{node_id}"]["delete"]
    assert one["operationId"] == "forget_memory"
    body = schema["components"]["schemas"]["ForgetRequest"]["properties"]
    assert body["node_ids"]["maxLength"] == 10_000
    assert json.dumps(client.get("/healthz").json()["limits"]).count("forget") == 1


def test_forgetting_a_turn_lists_the_later_turn_embedded_again_without_it(client, store):
    ids = add(client, PERSONA, [
        {"description": said, "poignancy": 3, "conversation": "电话", "speaker": who,
         "created": f"2023-02-13 12:0{i}:00"}
        for i, (who, said) in enumerate([("克劳斯", "我明天去上海出差"), (PERSONA, "一路顺风")])])
    dry = client.post("/forget", headers=bearer(ADMIN), json={
        "persona_name": PERSONA, "node_ids": ids[0], "dry_run": True})
    assert dry.status_code == 200, dry.text
    assert (dry.json()["forgotten"], dry.json()["rekeyed"]) == ([ids[0]], [ids[1]])
    with store.open(PERSONA) as stream:
        assert "上海出差" in stream.get(ids[1]).embedding_key  # the dry run changed nothing
    r = client.post("/forget", headers=bearer(ADMIN),
                    json={"persona_name": PERSONA, "node_ids": ids[0]})
    assert r.status_code == 200, r.text
    assert (r.json()["forgotten"], r.json()["rekeyed"]) == ([ids[0]], [ids[1]])
    with store.open(PERSONA) as stream:
        assert stream.get(ids[1]).embedding_key == f"{PERSONA}: 一路顺风"
    again = client.post("/forget", headers=bearer(ADMIN),
                        json={"persona_name": PERSONA, "node_ids": ids[0]})
    assert (again.json()["already_forgotten"], again.json()["rekeyed"]) == ([ids[0]], [])
