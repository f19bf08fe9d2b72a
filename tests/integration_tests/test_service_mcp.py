"""`genmem mcp` driven by a real MCP client (langchain-mcp-adapters): over stdio, the client
spawns it; over streamable HTTP, with keys and persona scopes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools

from langchain_genmem.cli import Store
from tests.support.genmem_server import GenmemServer

PERSONA = "伊莎贝拉"
TOOLS = {"remember", "recall", "recall_keywords", "reflect", "persona_stats", "forget"}
ADMIN = "admin-key-0123456789abcdef"
KLAUS_KEY = "klaus-key-0123456789abcdef"


def payload(result: Any) -> Any:
    """The JSON a tool returned (the adapter gives content blocks)."""
    blocks = result if isinstance(result, list) else [{"type": "text", "text": result}]
    text = "".join(b["text"] for b in blocks if b.get("type") == "text")
    try:
        return json.loads(text)
    except ValueError:
        return text


def leaves(error: BaseException) -> list[BaseException]:
    """The errors inside (nested) exception groups."""
    inner = getattr(error, "exceptions", None)
    return [x for e in inner for x in leaves(e)] if inner else [error]


async def tools_of(session) -> dict[str, Any]:
    return {t.name: t for t in await load_mcp_tools(session)}


def stdio_client(store: Path, *options: str) -> MultiServerMCPClient:
    """A client that starts `genmem --path STORE --persona PERSONA mcp --create [OPTIONS]`."""
    return MultiServerMCPClient({"genmem": {
        "transport": "stdio", "command": sys.executable,
        "args": ["-m", "langchain_genmem.cli", "--path", str(store), "--persona", PERSONA,
                 "mcp", "--create", *options],
    }})


@pytest.mark.slow
async def test_remember_then_recall_over_stdio(tmp_path):
    store = tmp_path / "store"
    async with stdio_client(store).session("genmem") as session:
        tools = await tools_of(session)
        assert set(tools) == TOOLS
        assert all(len(t.description) > 80 for t in tools.values())  # something to act on
        stored = payload(await tools["remember"].ainvoke(
            {"description": "伊莎贝拉正在筹备情人节派对", "poignancy": 8, "predicate": "筹备",
             "object": "情人节派对"}))
        assert stored["node_id"] == "node_1" and stored["subject"] == PERSONA
        payload(await tools["remember"].ainvoke(
            {"description": "Isabella waters the plants", "poignancy": 1,
             "persona": PERSONA}))
        found = payload(await tools["recall"].ainvoke({"query": "派对", "k": 1}))
        assert found["status"] == "ok"
        top = [n["description"] for n in found["retrieved_nodes"]]
        assert top == ["伊莎贝拉正在筹备情人节派对"]
        assert found["accessed_ids"] == ["node_1"]
        # memories are stamped with the server's clock (now): a window before it holds none
        period = payload(await tools["recall"].ainvoke(
            {"query": "派对", "k": 5, "since": "2000-01-01", "until": "2999-01-01"}))
        assert len(period["retrieved_nodes"]) == 2
        before = payload(await tools["recall"].ainvoke({"query": "派对", "until": "2000-01-01"}))
        assert before["status"] == "no_candidates"
        assert "2 left out by the filter" in before["message"]
        bad_time = payload(await tools["recall"].ainvoke({"query": "派对", "since": "last week"}))
        assert "recall: since: 'last week' is not an ISO date" in bad_time
        keywords = payload(await tools["recall_keywords"].ainvoke({"subject": "情人节派对"}))
        assert keywords["event_count"] == 1
        stats = payload(await tools["persona_stats"].ainvoke({}))
        assert stats["memories"] == 2
        bad = payload(await tools["recall"].ainvoke({"query": "派对", "k": 999}))
        assert "recall: k: Input should be less than or equal to 200" in bad
        assert "validation error for" not in bad and "recallArguments" not in bad
        blank = payload(await tools["recall"].ainvoke({"query": "   "}))
        assert "query: " in blank and "focal_text" not in blank
        cited = payload(await tools["remember"].ainvoke(
            {"description": "伊莎贝拉的想法", "type": "thought", "poignancy": 3,
             "evidence": "node_99"}))
        assert "remember: evidence: no memory" in cited and "items[" not in cited, cited
        words = payload(await tools["recall"].ainvoke(
            {"query": "情人节派对", "relevance": "hybrid", "lexical_weight": 1, "k": 2}))
        top = words["retrieved_nodes"][0]
        assert top["description"] == "伊莎贝拉正在筹备情人节派对"
        assert top["relevance"] == pytest.approx(top["lexical"]) and top["bm25"] > 0
        bad_weight = payload(await tools["recall"].ainvoke({"query": "派对", "lexical_weight": 2}))
        assert "lexical_weight" in bad_weight and "less than or equal to 1" in bad_weight
        bad_mode = payload(await tools["recall"].ainvoke({"query": "派对", "relevance": "bm25"}))
        assert "relevance" in bad_mode and "'hybrid'" in bad_mode
        no_model = payload(await tools["reflect"].ainvoke({"force": True}))
        assert "OPENAI_API_KEY" in no_model
    assert len(Store(store).open(PERSONA)) == 2


@pytest.mark.slow
async def test_streamable_http_checks_keys_and_scopes(tmp_path):
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"keys": [{"key": ADMIN},
                                         {"key": KLAUS_KEY, "personas": ["Klaus Mueller"]}]}),
                    encoding="utf-8")
    store = tmp_path / "store"
    with GenmemServer(store, "--keys-file", str(keys), "--create",
                      global_args=["--persona", PERSONA],
                      command=("mcp", "--transport", "http")) as srv:
        url = f"{srv.url}/mcp"

        def client(key: str | None) -> MultiServerMCPClient:
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            return MultiServerMCPClient({"genmem": {"transport": "streamable_http",
                                                    "url": url, "headers": headers}})

        async with client(ADMIN).session("genmem") as session:
            tools = await tools_of(session)
            assert set(tools) == TOOLS
            payload(await tools["remember"].ainvoke({"description": "伊莎贝拉煮了咖啡",
                                                     "poignancy": 2}))
            found = payload(await tools["recall"].ainvoke({"query": "咖啡"}))
            assert found["retrieved_nodes"][0]["description"] == "伊莎贝拉煮了咖啡"
        async with client(KLAUS_KEY).session("genmem") as session:
            tools = await tools_of(session)
            denied = payload(await tools["recall"].ainvoke({"query": "咖啡"}))
            assert f"may not use persona {PERSONA!r}" in denied
        with pytest.raises(Exception) as e:  # noqa: PT011 - a task group wraps the 401
            async with client(None).session("genmem") as session:
                await tools_of(session)
        assert any(isinstance(x, httpx.HTTPStatusError) and x.response.status_code == 401
                   for x in leaves(e.value))
        r = httpx.post(url, json={}, headers={"Authorization": "Bearer wrong-key-0123456789"})
        assert r.status_code == 401 and r.json()["message"] == "missing or unknown API key"
    assert "access times flushed" in srv.last_output
    assert len(Store(Path(store)).open(PERSONA)) == 1


def discover(url: str, headers: dict[str, str]) -> httpx.Response:
    """A raw `server/discover` request inside a session, as some clients send first."""
    accept = {**headers, "Accept": "application/json, text/event-stream"}
    with httpx.Client(headers=accept, timeout=30) as http:
        init = http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                    "params": {"protocolVersion": "2025-06-18",
                                               "capabilities": {},
                                               "clientInfo": {"name": "探测", "version": "1"}}})
        assert init.status_code == 200, init.text
        session = {"mcp-session-id": init.headers["mcp-session-id"]}
        http.post(url, headers=session,
                  json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        reply = http.post(url, headers=session,
                          json={"jsonrpc": "2.0", "id": 2, "method": "server/discover",
                                "params": {}})
        http.delete(url, headers=session)
        return reply


@pytest.mark.slow
async def test_sessions_come_and_go_quietly_and_the_streams_close_once(tmp_path):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    store = tmp_path / "store"
    with GenmemServer(store, "--api-key", ADMIN, "--create", global_args=["--persona", PERSONA],
                      command=("mcp", "--transport", "http")) as srv:
        url = f"{srv.url}/mcp"
        headers = {"Authorization": f"Bearer {ADMIN}"}
        for i in range(3):  # each session starts and ends while the server keeps serving
            async with httpx.AsyncClient(headers=headers) as http, \
                    streamable_http_client(url, http_client=http) as (read, write, _), \
                    ClientSession(read, write) as session:
                await session.initialize()
                out = await session.call_tool("remember", {"description": f"第{i}次会话",
                                                           "poignancy": 2})
                assert not out.isError, out.content
        reply = discover(url, headers)
        assert reply.status_code == 200 and '"error"' in reply.text  # an error reply, quietly
    log = srv.last_output
    assert log.count("stopped:") == 1, log
    assert "stopped: 1 persona stream(s) closed" in log
    for noise in ("ERROR", "WARNING", "Traceback", "ClosedResourceError", "validation error"):
        assert noise not in log, log
    assert len(Store(Path(store)).open(PERSONA)) == 3
