"""Every MCP tool input is bounded as the HTTP service bounds it, by the same declarations.

In process (MCP over in-memory streams, FastAPI's TestClient): no sockets.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp.shared.memory import create_connected_server_and_client_session

from langchain_genmem.cli import Store
from langchain_genmem.service import create_app, create_service
from langchain_genmem.service.mcp import create_mcp_server
from langchain_genmem.service.schemas import MAX_DURATION_CHARS

NOW = datetime(2023, 2, 14, 9, 0, 0)
PERSONA = "伊莎贝拉"
TOO_LONG = "三十天" * 30  # 90 characters, none a duration's
LONG_DURATION = "1d" * 40  # a duration, but 80 characters


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store", now=NOW)


def calls(store: Store, *arguments: dict[str, Any]) -> tuple[list[Any], list[tuple[bool, str]]]:
    """The MCP tools' input schemas, then ``remember`` called with each of ``arguments``."""
    mcp = create_mcp_server(create_service(store), default_persona=PERSONA)

    async def run() -> tuple[list[Any], list[tuple[bool, str]]]:
        async with create_connected_server_and_client_session(mcp._mcp_server) as session:
            tools = (await session.list_tools()).tools
            out = []
            for args in arguments:
                result = await session.call_tool("remember", {"description": "伊莎贝拉的临时密码",
                                                              "poignancy": 4, **args})
                out.append((result.isError, result.content[0].text))
            return tools, out

    return anyio.run(run)


def kinds(prop: dict[str, Any]) -> list[dict[str, Any]]:
    """The alternatives of an input's schema (one for a plain type), null left out."""
    return [k for k in prop.get("anyOf", [prop]) if k.get("type") != "null"]


def test_remember_refuses_an_expires_in_beyond_the_bound_naming_it(store: Store) -> None:
    _, out = calls(store, {"expires_in": TOO_LONG}, {"expires_in": LONG_DURATION},
                   {"expires_in": True}, {"expires_in": "一周"}, {"expires_in": 3600},
                   {"expires_in": "1d12h"})
    (long_, long_duration, boolean, words, seconds, duration) = out
    bound = f"remember: expires_in: String should have at most {MAX_DURATION_CHARS} characters"
    assert long_ == (True, bound)
    assert long_duration == (True, bound)  # refused for its length, never read as a duration
    assert boolean[0] and boolean[1].startswith("remember: expires_in: ")
    assert "positive number of seconds or a duration" in boolean[1]
    assert words[0] and "expires_in: " in words[1] and "30d" in words[1]
    assert not seconds[0] and json.loads(seconds[1])["expiration"] == "2023-02-14T10:00:00Z"
    assert not duration[0] and json.loads(duration[1])["expiration"] == "2023-02-15T21:00:00Z"
    assert len(Store(store.path, now=NOW).open(PERSONA)) == 2  # the refused stored nothing


def test_remember_declares_the_bound_the_http_schema_declares(store: Store) -> None:
    tools, _ = calls(store)
    remember = next(t for t in tools if t.name == "remember").inputSchema["properties"]
    (text,) = kinds(remember["expires_in"])  # seconds are taken too, as over HTTP
    assert text["type"] == "string" and text["maxLength"] == MAX_DURATION_CHARS
    with TestClient(create_app(create_service(store))) as client:
        schema = client.get("/openapi.json").json()["components"]["schemas"]
        assert schema["MemoryItem"]["properties"]["expires_in"]["maxLength"] == MAX_DURATION_CHARS
        refused = client.post("/memories", json={"persona_name": PERSONA, "description": "x",
                                                 "poignancy": 1, "expires_in": LONG_DURATION})
        assert refused.status_code == 422 and "expires_in" in refused.text
        limits = client.get("/healthz").json()["limits"]
        assert limits["expires_in characters"] == MAX_DURATION_CHARS


def test_every_mcp_tool_input_is_bounded(store: Store) -> None:
    tools, _ = calls(store)
    unbounded = []
    for tool in tools:
        for name, prop in tool.inputSchema["properties"].items():
            alternatives = kinds(prop)
            text = [k for k in alternatives if k.get("type") == "string"]
            numbers = [k for k in alternatives if k.get("type") in ("integer", "number")]
            bounded = (all("maxLength" in k or "enum" in k or k.get("format") == "date-time"
                           for k in text)
                       and all("minimum" in k and "maximum" in k for k in numbers)
                       and all(k.get("type") in ("string", "integer", "number", "boolean")
                               for k in alternatives))
            seconds_or_text = bool(text) and all("maxLength" in k for k in text)  # expires_in
            if not (bounded or (seconds_or_text and all("type" in k for k in alternatives))):
                unbounded.append(f"{tool.name}.{name}")
    assert unbounded == []
    assert {t.name for t in tools} == {"remember", "recall", "recall_keywords", "reflect",
                                       "persona_stats", "forget"}


@pytest.fixture
def client(store: Store) -> Iterator[TestClient]:
    with TestClient(create_app(create_service(store))) as c:
        yield c


def test_http_refuses_a_boolean_lifetime_naming_the_field(client: TestClient) -> None:
    r = client.post("/memories", json={"persona_name": PERSONA, "description": "伊莎贝拉的密码",
                                       "poignancy": 2, "expires_in": True})
    assert r.status_code == 422
    assert r.json()["field"] == "expires_in"
    assert "positive number of seconds or a duration" in r.json()["message"]
