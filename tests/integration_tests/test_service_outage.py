"""The service while its PostgreSQL is down: one answer on every read path, and readiness.

A real PostgreSQL of this test alone is killed and started again under an app (in process);
one persona is open in the app when it goes down, the other is not. Every request that needs
the store is 503 with the one error shape and `Retry-After`, MCP's recall a tool error saying
when to retry; `/readyz` is 503 until the server is back, `/healthz` stays 200. With a small
store timeout each of those answers comes well before the connect timeout each used to
wait, the outage and the return are logged one line each, and closing is quiet.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp.shared.memory import create_connected_server_and_client_session

from langchain_genmem.backends.postgres import DEFAULT_CONNECT_TIMEOUT
from langchain_genmem.cli import Store
from langchain_genmem.service import create_app, create_service
from langchain_genmem.service.mcp import create_mcp_server
from langchain_genmem.service.readiness import RETRY_AFTER_SECONDS
from tests.support.postgres_server import RestartablePostgres

NOW = datetime(2023, 2, 14, 9, 0, 0)
ADMIN = "admin-key-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {ADMIN}"}
OPENED, CLOSED = "伊莎贝拉", "克劳斯"  # open in the app when the server dies / never opened


def reads(persona: str) -> list[tuple[str, str, dict | None]]:
    """Every read path of the HTTP service for a persona: (method, path, body)."""
    return [
        ("POST", "/retrieve", {"persona_name": persona, "focal_text": "咖啡"}),
        ("POST", "/keyword-retrieve", {"persona_name": persona, "subject": persona}),
        ("GET", f"/personas/{persona}", None),
        ("GET", "/personas", None),
    ]


def recall(service: object, persona: str) -> tuple[bool, str]:
    mcp = create_mcp_server(service, default_persona=persona)  # type: ignore[arg-type]

    async def run() -> tuple[bool, str]:
        async with create_connected_server_and_client_session(mcp._mcp_server) as session:
            result = await session.call_tool("recall", {"query": "咖啡"})
            return result.isError, result.content[0].text

    return anyio.run(run)


@pytest.mark.slow
def test_every_read_is_503_with_retry_after_while_postgres_is_down_and_ready_again_after():
    with RestartablePostgres() as server:
        dsn = server.dsn() + "&connect_timeout=1"
        with TestClient(create_app(create_service(Store(dsn=dsn, now=NOW)),
                                   api_keys=[ADMIN])) as other:  # another replica writes
            for persona in (CLOSED, OPENED):
                r = other.post("/memories", headers=AUTH, json={
                    "persona_name": persona, "description": f"{persona}在煮咖啡", "poignancy": 3})
                assert r.status_code == 200, r.text
        service = create_service(Store(dsn=dsn, now=NOW))
        with TestClient(create_app(service, api_keys=[ADMIN])) as client:
            assert client.post("/retrieve", headers=AUTH, json={  # opens OPENED only
                "persona_name": OPENED, "focal_text": "咖啡"}).json()["status"] == "ok"
            assert service.streams.open_count == 1
            assert client.get("/readyz").status_code == 200

            server.kill()
            for persona in (OPENED, CLOSED):
                for method, path, body in reads(persona):
                    r = client.request(method, path, json=body, headers=AUTH)
                    assert r.status_code == 503, (persona, path, r.text)
                    assert r.headers["Retry-After"] == str(RETRY_AFTER_SECONDS)
                    assert set(r.json()) == {"status", "message", "field"}
                    assert r.json()["status"] == "error" and r.json()["message"]
                failed, text = recall(service, persona)
                assert failed and f"retry in {RETRY_AFTER_SECONDS} s" in text, text
            r = client.post("/memories", headers=AUTH, json={
                "persona_name": OPENED, "description": "lost", "poignancy": 1})
            assert r.status_code == 503 and r.headers["Retry-After"]
            ready = client.get("/readyz")
            assert ready.status_code == 503 and ready.headers["Retry-After"]
            assert ready.json()["status"] == "error"
            assert client.get("/healthz").status_code == 200  # liveness: the process is fine

            server.start_again()
            deadline = time.monotonic() + 30
            while client.get("/readyz").status_code != 200:
                assert time.monotonic() < deadline, "not ready after the server came back"
                time.sleep(0.2)
            for persona in (OPENED, CLOSED):
                out = client.post("/retrieve", headers=AUTH, json={
                    "persona_name": persona, "focal_text": "咖啡"}).json()
                assert out["status"] == "ok" and out["retrieved_nodes"][0]["description"] == (
                    f"{persona}在煮咖啡")


STORE_TIMEOUT = 0.5  # seconds a request may wait for the store, configured small
OLD_WAIT = DEFAULT_CONNECT_TIMEOUT  # what each request waited before: the connect timeout


@pytest.mark.slow
def test_while_postgres_is_down_requests_and_readyz_answer_503_quickly_and_log_one_line(
    caplog,
):
    caplog.set_level(logging.DEBUG)
    with RestartablePostgres() as server:  # the default 10 s connect timeout
        service = create_service(Store(dsn=server.dsn(), now=NOW, request_timeout=STORE_TIMEOUT))
        with TestClient(create_app(service, api_keys=[ADMIN])) as client:
            r = client.post("/memories", headers=AUTH, json={
                "persona_name": OPENED, "description": f"{OPENED}在煮咖啡", "poignancy": 3})
            assert r.status_code == 200, r.text
            assert client.get("/readyz").status_code == 200
            server.kill()
            requests = [*reads(OPENED), *reads(CLOSED), ("GET", "/readyz", None),
                        ("POST", "/memories", {"persona_name": OPENED, "description": "lost",
                                               "poignancy": 1})]
            took = []
            for method, path, body in requests:
                start = time.monotonic()
                r = client.request(method, path, json=body, headers=AUTH)
                took.append(time.monotonic() - start)
                assert r.status_code == 503, (path, r.text)
                assert r.json()["status"] == "error" and r.headers["Retry-After"]
                assert "\n" not in r.json()["message"] and "DETAIL" not in r.json()["message"]
            # each came well before the old wait (a timing bound with room for a busy machine);
            # all of them together too, where each used to wait the connect timeout
            assert max(took) < OLD_WAIT / 2, took
            assert sum(took) < OLD_WAIT, took

            server.start_again()
            deadline = time.monotonic() + 30
            while client.get("/readyz").status_code != 200:
                assert time.monotonic() < deadline, "not ready after the server came back"
                time.sleep(0.2)
            out = client.post("/retrieve", headers=AUTH, json={
                "persona_name": OPENED, "focal_text": "咖啡"}).json()
            assert out["status"] == "ok"
    # the service closed its streams and the store on the way out: quietly
    shown = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    assert not [r for r in shown if "couldn't stop" in r.getMessage()]
    ours = [r.getMessage() for r in shown if r.name.startswith("langchain_genmem")]
    assert len(ours) == 2 and "cannot be reached" in ours[0], ours  # one line each
    assert ours[1].endswith("answers again"), ours
