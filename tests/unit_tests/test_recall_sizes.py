"""Every front end takes "how many memories" from the one declaration (core/recall_sizes.py):
a default typed again somewhere drifts, and this test fails when one does."""

from __future__ import annotations

import inspect

from langchain_genmem import GenerativeAgentsRetriever
from langchain_genmem.agent import chat_retriever, create_memory_agent
from langchain_genmem.cli import commands
from langchain_genmem.core.recall_sizes import CHAT_RECALL_K, RECALL_K, SHOWN_RECALL_K
from langchain_genmem.operations.derive import parameters
from langchain_genmem.service import mcp
from langchain_genmem.service.schemas import KeywordRequest, RetrieveRequest


def default(function, name: str):
    return inspect.signature(function).parameters[name].default


def tool_default(tool: str, name: str):
    """The default of an MCP tool's argument, as the tool's signature gives it to FastMCP."""
    model, arguments = mcp.TOOL_ARGUMENTS[tool]
    return next(p.default for p in parameters(model, arguments) if p.name == name)


def test_the_library_and_http_return_the_originals_count():
    assert RECALL_K == 30
    assert GenerativeAgentsRetriever.model_fields["k"].default == RECALL_K
    assert RetrieveRequest.model_fields["top_k"].default == RECALL_K
    assert KeywordRequest.model_fields["limit"].default == RECALL_K


def test_models_and_terminals_are_shown_fewer():
    assert SHOWN_RECALL_K < RECALL_K
    assert tool_default("recall", "k") == SHOWN_RECALL_K
    assert tool_default("recall_keywords", "limit") == SHOWN_RECALL_K
    for command, name in ((commands.search, "k"), (commands.explain, "k"),
                          (commands.keywords, "limit")):
        assert default(command, name) == SHOWN_RECALL_K, command.__name__


def test_the_chat_agent_recalls_fewer_still():
    assert default(create_memory_agent, "k") == default(chat_retriever, "k") == CHAT_RECALL_K
    assert default(commands.demo, "k") == CHAT_RECALL_K
