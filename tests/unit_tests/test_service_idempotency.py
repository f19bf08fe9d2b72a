"""Retried writes through the service: the `Idempotency-Key` header and MCP's `idempotency_key`.

In process (FastAPI's TestClient, MCP over in-memory streams): no sockets. Two apps over one
store stand for two replicas.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp.shared.memory import create_connected_server_and_client_session

from langchain_genmem.cli import Store
from langchain_genmem.service import create_app, create_service
from langchain_genmem.service.mcp import create_mcp_server

NOW = datetime(2023, 2, 14, 9, 0, 0)
ADMIN = "admin-key-0123456789abcdef"
PERSONA = "伊莎贝拉"
AUTH = {"Authorization": f"Bearer {ADMIN}"}
ONE = {"persona_name": PERSONA, "description": "伊莎贝拉在霍布斯咖啡馆煮咖啡", "poignancy": 3}
BATCH = {"persona_name": PERSONA, "memories": [
    {"description": "克劳斯来喝咖啡", "poignancy": 2},
    {"type": "thought", "description": "克劳斯喜欢这里", "poignancy": 4, "evidence": "node_1"},
]}


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store", now=NOW)


@pytest.fixture
def clients(store: Store) -> Iterator[tuple[TestClient, TestClient]]:
    """Two apps, each with its own service and streams, over one store."""
    with TestClient(create_app(create_service(store), api_keys=[ADMIN])) as a, \
            TestClient(create_app(create_service(Store(store.path, now=NOW)),
                                  api_keys=[ADMIN])) as b:
        yield a, b


def post(client: TestClient, path: str, body: dict, key: str | None) -> tuple[int, dict]:
    headers = {**AUTH, **({"Idempotency-Key": key} if key is not None else {})}
    r = client.post(path, json=body, headers=headers)
    return r.status_code, r.json()


def count(client: TestClient) -> int:
    r = client.get(f"/personas/{PERSONA}", headers=AUTH)
    return r.json()["memories"] if r.status_code == 200 else 0


def test_a_repeated_key_through_either_replica_stores_once(
    clients: tuple[TestClient, TestClient]
) -> None:
    a, b = clients
    first = post(a, "/memories/batch", BATCH, "batch-1")
    assert first[0] == 200 and first[1]["count"] == 2
    assert post(a, "/memories/batch", BATCH, "batch-1") == first
    assert post(b, "/memories/batch", BATCH, "batch-1") == first  # the other replica
    single = post(b, "/memories", ONE, "one-1")
    assert single[0] == 200 and single[1]["memories"][0]["node_id"] == "node_3"
    assert post(a, "/memories", ONE, "one-1") == single
    assert count(a) == 3 and count(b) == 3
    assert post(a, "/memories", ONE, None)[1]["memories"][0]["node_id"] == "node_4"  # no key


def test_the_same_key_with_another_body_is_422_and_writes_nothing(
    clients: tuple[TestClient, TestClient]
) -> None:
    a, b = clients
    post(a, "/memories", ONE, "k")
    status, body = post(b, "/memories", {**ONE, "poignancy": 9}, "k")
    assert status == 422 and body["field"] == "idempotency_key"
    assert "'k' was used by an earlier write" in body["message"]
    assert post(b, "/memories/batch", BATCH, "k")[0] == 422
    assert count(a) == 1


@pytest.mark.parametrize("key", ["", "x" * 129, "a b"])
def test_a_bad_key_is_422_naming_it(clients: tuple[TestClient, TestClient], key: str) -> None:
    status, body = post(clients[0], "/memories", ONE, key)
    assert status == 422 and body["field"] == "idempotency_key", body
    assert count(clients[0]) == 0


def test_the_header_is_in_the_schema_as_a_plain_string(
    clients: tuple[TestClient, TestClient]
) -> None:
    schema = clients[0].get("/openapi.json").json()
    for path in ("/memories", "/memories/batch"):
        (param,) = schema["paths"][path]["post"]["parameters"]
        assert (param["name"], param["in"], param["required"]) == (
            "Idempotency-Key", "header", False)
        assert param["schema"]["type"] == "string"


def test_mcp_remember_with_the_same_key_stores_once(store: Store) -> None:
    mcp = create_mcp_server(create_service(store), default_persona=PERSONA)

    async def run() -> list[tuple[bool, str]]:
        out = []
        async with create_connected_server_and_client_session(mcp._mcp_server) as session:
            for args in ({"description": "伊莎贝拉浇花", "poignancy": 2, "idempotency_key": "m"},
                         {"description": "伊莎贝拉浇花", "poignancy": 2, "idempotency_key": "m"},
                         {"description": "伊莎贝拉睡觉", "poignancy": 2, "idempotency_key": "m"}):
                result = await session.call_tool("remember", args)
                out.append((result.isError, result.content[0].text))
        return out

    (ok1, first), (ok2, again), (refused, message) = anyio.run(run)
    assert not ok1 and not ok2 and json.loads(again) == json.loads(first)
    assert json.loads(first)["node_id"] == "node_1"
    assert refused and "idempotency_key: 'm' was used by an earlier write" in message
    assert len(Store(store.path, now=NOW).open(PERSONA)) == 1
