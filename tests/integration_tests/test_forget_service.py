"""Forgetting through running servers: two `genmem serve` replicas over one PostgreSQL database
(forget through one, search through the other), and `genmem mcp` over streamable HTTP (forget
then recall, with persona scopes)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import psycopg
import pytest
from langchain_mcp_adapters.client import MultiServerMCPClient

from langchain_genmem.cli import Store
from tests.integration_tests.test_replicas import replica
from tests.integration_tests.test_service_mcp import payload, tools_of
from tests.support.genmem_server import GenmemServer

ADMIN = "admin-key-0123456789abcdef"
KLAUS_KEY = "klaus-key-0123456789abcdef"
PERSONA = "伊莎贝拉"
KLAUS = "克劳斯"
SECRET = "伊莎贝拉的银行卡密码是四七一一"
PARTY = "伊莎贝拉在霍布斯咖啡馆筹备情人节派对"


def http(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=120)


def found(url: str, focal: str) -> list[str]:
    with http(url) as client:
        r = client.post("/retrieve", json={"persona_name": PERSONA, "focal_text": focal,
                                           "top_k": 20, "types": "event,thought,chat"})
        assert r.status_code == 200, r.text
        return [n["description"] for n in r.json()["retrieved_nodes"]]


@pytest.mark.slow
@pytest.mark.parametrize("score_in", ["process", "database"])
def test_a_forget_through_one_replica_is_gone_through_the_other(
    tmp_path, postgres_server, score_in
):
    dsn = postgres_server.create_database(f"forget_{score_in}_{tmp_path.name}"[:60])
    with replica(tmp_path / "a", dsn, score_in) as a, replica(tmp_path / "b", dsn, score_in) as b:
        with http(a.url) as client:
            r = client.post("/memories/batch", json={"persona_name": PERSONA, "memories": [
                {"description": SECRET, "poignancy": 9},
                {"description": PARTY, "poignancy": 8},
                {"description": "伊莎贝拉说她的密码不能告诉别人", "poignancy": 5, "type": "chat",
                 "conversation": "会话一", "speaker": PERSONA}]})
            assert r.status_code == 200, r.text
        assert SECRET in found(b.url, "银行卡密码")  # b has the persona open and cached
        with http(a.url) as client:
            out = client.delete(f"/personas/{PERSONA}/memories/node_1").json()
        assert out["forgotten"] == ["node_1"] and out["remaining"] == 2
        assert SECRET not in found(b.url, "银行卡密码")
        with http(b.url) as client:
            again = client.delete(f"/personas/{PERSONA}/memories/node_1")
            assert again.status_code == 200, again.text
            assert again.json()["already_forgotten"] == ["node_1"]
            assert client.get(f"/personas/{PERSONA}").json()["memories"] == 2
            said = client.post("/forget", json={"persona_name": PERSONA, "text": "密码"}).json()
            assert said["forgotten"] == ["node_3"]
        assert found(a.url, "密码") == [PARTY]
        with http(a.url) as client:
            assert client.delete(f"/personas/{PERSONA}").json()["forgotten"] == ["node_2"]
        with http(b.url) as client:
            gone = client.post("/retrieve", json={"persona_name": PERSONA, "focal_text": "派对"})
            assert gone.json()["status"] == "no_candidates"
            assert client.get(f"/personas/{PERSONA}").json()["memories"] == 0
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT count(*) FROM memory_nodes WHERE persona_name = %s",
                            (PERSONA,)).fetchone()
    assert rows == (0,)  # the rows are deleted, not hidden


@pytest.mark.slow
async def test_mcp_forget_then_recall_within_the_keys_scope(tmp_path):
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"keys": [{"key": ADMIN},
                                         {"key": KLAUS_KEY, "personas": [KLAUS]}]}),
                    encoding="utf-8")
    store = tmp_path / "store"
    with GenmemServer(store, "--keys-file", str(keys), "--create",
                      command=("mcp", "--transport", "http")) as srv:

        def client(key: str) -> MultiServerMCPClient:
            return MultiServerMCPClient({"genmem": {
                "transport": "streamable_http", "url": f"{srv.url}/mcp",
                "headers": {"Authorization": f"Bearer {key}"}}})

        async with client(ADMIN).session("genmem") as session:
            tools = await tools_of(session)
            assert "forget" in tools and len(tools["forget"].description) > 80
            for text, persona in ((SECRET, PERSONA), (PARTY, PERSONA), ("克劳斯写论文", KLAUS)):
                payload(await tools["remember"].ainvoke(
                    {"description": text, "poignancy": 5, "persona": persona}))
            dry = payload(await tools["forget"].ainvoke(
                {"persona": PERSONA, "text": "密码", "dry_run": True}))
            assert dry["forgotten"] == ["node_1"] and dry["dry_run"] is True
            out = payload(await tools["forget"].ainvoke({"persona": PERSONA, "text": "密码"}))
            assert out["forgotten"] == ["node_1"] and out["remaining"] == 1
            recalled = payload(await tools["recall"].ainvoke(
                {"persona": PERSONA, "query": "银行卡密码", "k": 10}))
            assert [n["description"] for n in recalled["retrieved_nodes"]] == [PARTY]
            again = payload(await tools["forget"].ainvoke(
                {"persona": PERSONA, "node_ids": "node_1"}))
            assert again["forgotten"] == [] and again["already_forgotten"] == ["node_1"]
            never = payload(await tools["forget"].ainvoke(
                {"persona": PERSONA, "node_ids": "node_9"}))
            assert "node_ids: 'node_9' was never stored" in never
            nothing = payload(await tools["forget"].ainvoke({"persona": PERSONA}))
            assert "node_ids: nothing selected" in nothing
            bad = payload(await tools["forget"].ainvoke({"persona": PERSONA, "since": "上周"}))
            assert "since: '上周' is not an ISO date" in bad
        async with client(KLAUS_KEY).session("genmem") as session:
            tools = await tools_of(session)
            denied = payload(await tools["forget"].ainvoke({"persona": PERSONA, "text": "派对"}))
            assert f"may not use persona {PERSONA!r}" in denied
            own = payload(await tools["forget"].ainvoke({"persona": KLAUS, "text": "论文"}))
            assert own["forgotten"] == ["node_1"]
    with Store(Path(store)).open(PERSONA) as stream:
        assert [n.description for n in stream.nodes()] == [PARTY]  # Klaus's key forgot none
