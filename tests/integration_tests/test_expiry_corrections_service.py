"""Expiry and corrections through running servers: two `genmem serve` replicas over one
PostgreSQL database (correct through one, retrieve through the other, in process and in the
database), `genmem serve --forget-expired-every` deleting what expired, and `genmem mcp`
over streamable HTTP (remember a correction and a lifetime, recall)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import psycopg
import pytest
from langchain_mcp_adapters.client import MultiServerMCPClient

from tests.integration_tests.test_forget_service import ADMIN, PERSONA, http
from tests.integration_tests.test_replicas import NOW, replica
from tests.integration_tests.test_service_mcp import payload, tools_of
from tests.support.genmem_server import GenmemServer

OLD_HOME = "伊莎贝拉住在北京"
NEW_HOME = "伊莎贝拉搬到了上海"
PASSWORD = "伊莎贝拉的临时密码是四七一一"


def found(url: str, focal: str, **fields: object) -> list[str]:
    with http(url) as client:
        r = client.post("/retrieve", json={"persona_name": PERSONA, "focal_text": focal,
                                           "top_k": 20, "types": "event,thought,chat",
                                           **fields})
        assert r.status_code == 200, r.text
        return [n["description"] for n in r.json()["retrieved_nodes"]]


def post(url: str, path: str, body: dict) -> dict:
    with http(url) as client:
        r = client.post(path, json={"persona_name": PERSONA, **body})
        assert r.status_code == 200, r.text
        return r.json()


@pytest.mark.slow
@pytest.mark.parametrize("score_in", ["process", "database"])
def test_a_correction_through_one_replica_holds_in_the_other(
    tmp_path, postgres_server, score_in
):
    dsn = postgres_server.create_database(f"correct_{score_in}_{tmp_path.name}"[:60])
    now = datetime.fromisoformat(NOW)
    with replica(tmp_path / "a", dsn, score_in) as a, replica(tmp_path / "b", dsn, score_in) as b:
        post(a.url, "/memories/batch", {"memories": [
            {"description": OLD_HOME, "poignancy": 5},
            {"description": PASSWORD, "poignancy": 6, "expires_in": "1h",
             "created": (now - timedelta(hours=2)).isoformat()},
            {"description": "伊莎贝拉喜欢咖啡", "poignancy": 3, "expires_in": "30d"}]})
        assert OLD_HOME in found(b.url, "伊莎贝拉住在哪里")  # b has the persona open
        assert PASSWORD not in found(b.url, "密码")  # expired an hour before the clock
        post(a.url, "/memories", {"description": NEW_HOME, "poignancy": 5,
                                  "supersedes": "node_1"})
        homes = found(b.url, "伊莎贝拉住在哪里")
        assert NEW_HOME in homes and OLD_HOME not in homes
        assert OLD_HOME in found(b.url, "伊莎贝拉住在哪里", include_superseded=True)
        out = post(b.url, "/forget", {"expired": True})
        assert out["forgotten"] == ["node_2"] and out["remaining"] == 3
        post(b.url, "/forget", {"node_ids": "node_4"})  # the correction goes: the old is back
        assert OLD_HOME in found(a.url, "伊莎贝拉住在哪里")
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT superseded FROM genmem_personas WHERE persona_name = %s",
                           (PERSONA,)).fetchone()
        left = conn.execute("SELECT node_count FROM memory_nodes WHERE persona_name = %s "
                            "ORDER BY node_count", (PERSONA,)).fetchall()
    assert row == ([[1, 4]],) and left == [(1,), (3,)]


@pytest.mark.slow
def test_serve_forgets_expired_memories_of_open_personas_periodically(tmp_path, postgres_server):
    dsn = postgres_server.create_database(f"sweep_{tmp_path.name}"[:60])
    with GenmemServer(tmp_path / "s", "--api-key", ADMIN, "--forget-expired-every", "0.2",
                      global_args=["--dsn", dsn]) as srv:
        post(srv.url, "/memories/batch", {"memories": [
            {"description": PASSWORD, "poignancy": 6, "expires_in": 1},
            {"description": OLD_HOME, "poignancy": 5}]})
        deadline = time.monotonic() + 60
        with http(srv.url) as client:
            while client.get(f"/personas/{PERSONA}").json()["memories"] != 1:
                assert time.monotonic() < deadline, "the expired memory was not forgotten"
                time.sleep(0.2)
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT description FROM memory_nodes WHERE persona_name = %s",
                            (PERSONA,)).fetchall()
    assert rows == [(OLD_HOME,)]  # deleted, not hidden
    assert "forgot 1 expired memories" in srv.last_output


@pytest.mark.slow
async def test_mcp_remember_corrects_and_recall_leaves_the_old_out(tmp_path):
    with GenmemServer(tmp_path / "store", "--api-key", ADMIN, "--create",
                      command=("mcp", "--transport", "http")) as srv:
        client = MultiServerMCPClient({"genmem": {
            "transport": "streamable_http", "url": f"{srv.url}/mcp",
            "headers": {"Authorization": f"Bearer {ADMIN}"}}})
        async with client.session("genmem") as session:
            tools = await tools_of(session)
            old = payload(await tools["remember"].ainvoke(
                {"description": OLD_HOME, "poignancy": 5, "persona": PERSONA}))
            new = payload(await tools["remember"].ainvoke(
                {"description": NEW_HOME, "poignancy": 5, "persona": PERSONA,
                 "supersedes": old["node_id"], "expires_in": "30d"}))
            assert new["expiration"] is not None
            recalled = payload(await tools["recall"].ainvoke(
                {"persona": PERSONA, "query": "伊莎贝拉住在哪里", "k": 10}))
            assert [n["description"] for n in recalled["retrieved_nodes"]] == [NEW_HOME]
            both = payload(await tools["recall"].ainvoke(
                {"persona": PERSONA, "query": "伊莎贝拉住在哪里", "k": 10,
                 "include_superseded": True}))
            assert {n["description"] for n in both["retrieved_nodes"]} == {OLD_HOME, NEW_HOME}
            bad = payload(await tools["remember"].ainvoke(
                {"description": "x", "poignancy": 1, "persona": PERSONA,
                 "supersedes": "node_9"}))
            assert "supersedes: no memory 'node_9'" in bad
