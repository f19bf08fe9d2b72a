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

from typing import TYPE_CHECKING

from langchain_genmem.core.exports import lazy_exports

if TYPE_CHECKING:
    from langchain_genmem.service.http import create_app
    from langchain_genmem.service.mcp import create_mcp_server
    from langchain_genmem.service.operations import MemoryService, create_service
    from langchain_genmem.service.security import ApiKey, KeyRing, check_listen
    from langchain_genmem.service.streams import StreamPool

# Loaded on first use: the HTTP app and the MCP server need optional extras, and a module of
# the package (the CLI imports the streams' defaults) should not load the whole service.
__getattr__, __dir__ = lazy_exports(__name__, {
    "langchain_genmem.service.http": ["create_app"],
    "langchain_genmem.service.mcp": ["create_mcp_server"],
    "langchain_genmem.service.operations": ["MemoryService", "create_service"],
    "langchain_genmem.service.security": ["ApiKey", "KeyRing", "check_listen"],
    "langchain_genmem.service.streams": ["StreamPool"],
})

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
