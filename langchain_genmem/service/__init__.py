"""Memory as a service: HTTP (importable as a Dify tool) and MCP, over any store the CLI opens.

``genmem serve`` runs :func:`create_app` (FastAPI, :mod:`langchain_genmem.service.http`);
``genmem mcp`` runs :func:`create_mcp_server` (:mod:`langchain_genmem.service.mcp`). Both are
thin front ends over one :class:`MemoryService` (:mod:`langchain_genmem.service.operations`),
which shares one stream per persona between all requests
(:mod:`langchain_genmem.service.streams`). Requests, replies and input limits are in
:mod:`langchain_genmem.service.schemas`; keys, persona scopes and the loopback rule in
:mod:`langchain_genmem.service.security`. Needs the ``service`` extra
(``pip install 'langchain-genmem[service]'``).
"""

from __future__ import annotations

from typing import Any

from langchain_genmem.service.operations import MemoryService, create_service
from langchain_genmem.service.security import ApiKey, KeyRing, check_listen
from langchain_genmem.service.streams import StreamPool

__all__ = [
    "ApiKey",
    "KeyRing",
    "MemoryService",
    "StreamPool",
    "check_listen",
    "create_app",
    "create_mcp_server",
    "create_service",
]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from langchain_genmem.service.http import create_app  # lazy: optional extra

        return create_app
    if name == "create_mcp_server":
        from langchain_genmem.service.mcp import create_mcp_server  # lazy: optional extra

        return create_mcp_server
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
