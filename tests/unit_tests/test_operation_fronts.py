"""Every front end follows the one declaration of each operation (remember, recall, forget).

The declarations are :mod:`langchain_genmem.operations`' models. The HTTP service takes them
as its bodies; the MCP tools derive their arguments from them; the command line maps its
options onto their fields. Each test fails when a front end drifts: a declared field it
neither offers nor leaves out by name, or a type, bound, pattern or default that differs
from the declaration (beyond the defaults declared beside it, for a model or a terminal).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
import typer.main
from fastapi.testclient import TestClient
from mcp.shared.memory import create_connected_server_and_client_session
from pydantic import BaseModel

import langchain_genmem.cli.commands  # noqa: F401 - registers the commands
from langchain_genmem.cli import Store
from langchain_genmem.cli.app import app
from langchain_genmem.core.recall_sizes import SHOWN_RECALL_K
from langchain_genmem.operations import (
    ForgetRequest,
    KeywordRequest,
    MemoryBatchRequest,
    MemoryItem,
    MemoryRequest,
    RetrieveRequest,
)
from langchain_genmem.retrieval.presets import MODEL_FACING_PRESET
from langchain_genmem.service import create_app, create_service
from langchain_genmem.service import mcp as mcp_front
from langchain_genmem.service.mcp import create_mcp_server

NOW = datetime(2023, 2, 14, 9, 0, 0)

MCP_LEAVES_OUT = {
    # A model does not choose keywords or stamp times: the server's clock does.
    "remember": {"keywords", "created", "expiration"},
    # A model asks what it needs; the scoring knobs stay with the persona's settings.
    "recall": {"persona_name", "recency_w", "relevance_w", "importance_w", "recency_decay",
               "recency_mode", "time_in_query", "types", "min_poignancy"},
    "recall_keywords": {"persona_name"},
    "forget": {"persona_name"},
}
"""The declared fields each MCP tool does not offer (``persona_name`` is its ``persona``)."""

MCP_DEFAULTS = {("recall", "k"): SHOWN_RECALL_K, ("recall_keywords", "limit"): SHOWN_RECALL_K,
                ("recall", "preset"): MODEL_FACING_PRESET}
"""The defaults a tool declares beside the declaration's (a model reads fewer memories and
recalls what was said): every other default is the declaration's."""

# The command line's option (or argument) for each declared field, by command.
CLI = {
    "add": (MemoryItem, {
        "type": "kind", "description": "description", "poignancy": "poignancy",
        "subject": "subject", "predicate": "predicate", "object": "object_",
        "keywords": "keyword", "evidence": "evidence", "created": "created",
        "expiration": "expiration", "expires_in": "expires_in", "supersedes": "supersedes",
    }),
    "search": (RetrieveRequest, {
        "focal_text": "query", "top_k": "k", "recency_w": "recency_w",
        "relevance_w": "relevance_w", "importance_w": "importance_w", "recency_decay": "decay",
        "recency_mode": "mode", "relevance": "relevance", "lexical_weight": "lexical_weight",
        "idle_filter": "keep_idle", "time_in_query": "time_in_query",
        "created_after": "since", "created_before": "until", "types": "types",
        "min_poignancy": "min_poignancy", "include_superseded": "include_superseded",
    }),
    "keywords": (KeywordRequest, {"subject": "subject", "predicate": "predicate",
                                  "object": "object_", "limit": "limit"}),
    "forget": (ForgetRequest, {
        "node_ids": "node_ids", "created_after": "since", "created_before": "until",
        "types": "types", "conversation": "conversation", "speaker": "speaker",
        "text": "text", "expired": "expired", "keep_derived": "keep_derived",
        "dry_run": "dry_run",
    }),
}
CLI_LEAVES_OUT = {
    # The persona is the global --persona option; a preset is what search's options set.
    "add": {"conversation", "speaker"},  # turns come through `genmem import` and the API
    "search": {"persona_name", "preset"},
    "keywords": {"persona_name"},
    "forget": {"persona_name"},
}
CLI_DEFAULTS = {("search", "top_k"): SHOWN_RECALL_K, ("keywords", "limit"): SHOWN_RECALL_K}
"""A terminal shows fewer memories: every other default is the declaration's (or, for an
option that is a list or a flag, its empty form)."""


def _declared(model: type[BaseModel]) -> dict[str, dict[str, Any]]:
    return model.model_json_schema()["properties"]


def _rules(schema: dict[str, Any]) -> dict[str, Any]:
    """What a property accepts: its schema without its words and its default."""
    return {k: v for k, v in schema.items() if k not in ("description", "title", "default")}


@pytest.fixture(scope="module")
def tool_schemas(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    store = Store(tmp_path_factory.mktemp("fronts") / "store", now=NOW)
    server = create_mcp_server(create_service(store), default_persona="伊莎贝拉")

    async def listed() -> dict[str, dict[str, Any]]:
        async with create_connected_server_and_client_session(server._mcp_server) as session:
            return {t.name: t.inputSchema for t in (await session.list_tools()).tools}

    return anyio.run(listed)


@pytest.mark.parametrize("tool", sorted(mcp_front.TOOL_ARGUMENTS))
def test_an_mcp_tool_offers_each_declared_field_or_leaves_it_out_by_name(tool: str) -> None:
    model, arguments = mcp_front.TOOL_ARGUMENTS[tool]
    offered = {a.field for a in arguments.values()}
    assert offered.isdisjoint(MCP_LEAVES_OUT[tool])
    assert offered | MCP_LEAVES_OUT[tool] == set(model.model_fields)


@pytest.mark.parametrize("tool", sorted(mcp_front.TOOL_ARGUMENTS))
def test_an_mcp_tool_takes_what_the_declaration_takes(
    tool: str, tool_schemas: dict[str, dict[str, Any]]
) -> None:
    model, arguments = mcp_front.TOOL_ARGUMENTS[tool]
    declared = _declared(model)
    schema = tool_schemas[tool]
    required = set(schema.get("required", []))
    for name, argument in arguments.items():
        prop = schema["properties"][name]
        assert _rules(prop) == _rules(declared[argument.field]), f"{tool}.{name}"
        expected = MCP_DEFAULTS.get((tool, name), model.model_fields[argument.field].default)
        if model.model_fields[argument.field].is_required():
            assert name in required, f"{tool}.{name}"
        else:
            assert prop.get("default") == expected, f"{tool}.{name}"


def test_the_http_bodies_are_the_declarations(tmp_path: Path) -> None:
    store = Store(tmp_path / "store", now=NOW)
    with TestClient(create_app(create_service(store))) as client:
        spec = client.get("/openapi.json").json()
    bodies = {path: op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
              for path, item in spec["paths"].items() for method, op in item.items()
              if method == "post" and "requestBody" in op}
    named = {name: ref.rsplit("/", 1)[1] for name, ref in bodies.items()}
    assert named["/retrieve"] == "RetrieveRequest"
    assert named["/keyword-retrieve"] == "KeywordRequest"
    assert named["/memories"] == "MemoryRequest"
    assert named["/memories/batch"] == "MemoryBatchRequest"
    assert named["/forget"] == "ForgetRequest"
    components = spec["components"]["schemas"]
    for model in (RetrieveRequest, KeywordRequest, MemoryRequest, ForgetRequest):
        served = components[model.__name__]["properties"]
        assert {k: _rules(v) for k, v in served.items()} == \
            {k: _rules(v) for k, v in _declared(model).items()}, model.__name__
    assert set(components["MemoryBatchRequest"]["properties"]) == \
        set(MemoryBatchRequest.model_fields)


def _cli_params(command: str) -> dict[str, Any]:
    group: Any = typer.main.get_command(app)  # typer's own click: its Group is not click's
    return {p.name: p for p in group.commands[command].params if p.name}


@pytest.mark.parametrize("command", sorted(CLI))
def test_a_command_offers_each_declared_field_or_leaves_it_out_by_name(command: str) -> None:
    model, options = CLI[command]
    params = _cli_params(command)
    assert set(options.values()) <= set(params), command
    assert set(options).isdisjoint(CLI_LEAVES_OUT[command])
    assert set(options) | CLI_LEAVES_OUT[command] == set(model.model_fields)


@pytest.mark.parametrize("command", sorted(CLI))
def test_a_command_defaults_and_bounds_follow_the_declaration(command: str) -> None:
    model, options = CLI[command]
    params = _cli_params(command)
    declared = _declared(model)
    for field, option in options.items():
        param = params[option]
        info = model.model_fields[field]
        if (command, field) in CLI_DEFAULTS:
            assert param.default == CLI_DEFAULTS[(command, field)], f"{command} {option}"
        elif isinstance(info.default, (bool, int, float)) and not info.is_required():
            shown = param.default.value if hasattr(param.default, "value") else param.default
            flag = getattr(param, "is_flag", False)
            assert shown == info.default or (flag and not shown), f"{command} {option}"
        minimum = getattr(getattr(param, "type", None), "min", None)
        if minimum is not None:
            assert minimum == declared[field].get("minimum"), f"{command} {option}"
