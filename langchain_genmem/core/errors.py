"""Exceptions raised by langchain-genmem.

Every error the package raises on purpose derives from one root, so callers can catch
``GenMemError`` alone::

    GenMemError
    ├── ValidationError            bad input: names the field and the value (also a ValueError)
    │   ├── UnknownNodeError       a node id that the stream does not hold (also a KeyError)
    │   ├── EmbeddingDimensionError a vector whose size does not fit the collection
    │   └── IdempotencyKeyReusedError an idempotency key sent again with other memories
    ├── StorageError               the backing store refused or failed a call; nothing was committed
    │   ├── ConcurrentWriterError  another process holds the right to write this persona (names it)
    │   └── StorageConflictError   the database ended the transaction in a conflict; run it again
    ├── InteropError               a Generative Agents folder could not be read (names file, node)
    ├── ParseError                 an LLM reply had nothing usable (e.g. no rating in it)
    └── ConfigurationError         something to install or set before this can run (says what)
        └── ChatModelError         no chat model, or it cannot be reached or refused the call
"""

from __future__ import annotations


class GenMemError(Exception):
    """Root of every error raised by langchain-genmem."""


class ValidationError(GenMemError, ValueError):
    """Bad input: the message names the field and the offending value.

    Attributes:
        field: name of the field that was wrong, when there is one.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class UnknownNodeError(ValidationError, KeyError):
    """A node id that the stream does not hold."""

    def __init__(self, node_id: str, *, field: str = "node_id", persona: str | None = None) -> None:
        where = f" of persona {persona!r}" if persona is not None else ""
        super().__init__(f"{field}: no memory {node_id!r} in the stream{where}", field=field)
        self.node_id = node_id

    def __str__(self) -> str:
        return str(self.args[0])


class EmbeddingDimensionError(ValidationError):
    """A vector whose size does not match the vectors already stored."""

    def __init__(self, expected: int, got: int, *, where: str = "embedding") -> None:
        super().__init__(
            f"{where}: expected vectors of size {expected}, got {got}; "
            "the store was made with another embedding model (pass the same embeddings, "
            "or use another path/collection for this model)",
            field="embedding",
        )
        self.expected = expected
        self.got = got


class IdempotencyKeyReusedError(ValidationError):
    """An idempotency key already used by a write of other memories; nothing was written.

    Attributes:
        key: the key.
    """

    def __init__(self, key: str, *, persona: str) -> None:
        super().__init__(
            f"idempotency_key: {key!r} was used by an earlier write of persona {persona!r} "
            "with other memories; nothing was written (use a new key for a new write)",
            field="idempotency_key",
        )
        self.key = key


class StorageError(GenMemError):
    """The backing store refused or failed a call; nothing of the call was committed."""


class ConcurrentWriterError(StorageError):
    """Another writer holds the right to write this persona; nothing was written.

    Raised by a backend that cannot serialise a second writer (an embedded Chroma folder
    written by another process) or that waited longer than its lock timeout.

    Attributes:
        persona: the persona whose write was refused.
        holder: who holds the right, as far as the backend knows (host, pid, since when).
    """

    def __init__(self, message: str, *, persona: str, holder: str = "") -> None:
        super().__init__(message)
        self.persona = persona
        self.holder = holder


class StorageConflictError(StorageError):
    """The database ended the transaction to resolve a conflict with another one; run it again.

    A deadlock or a serialization failure: nothing of the transaction was committed, and
    running the whole transaction again, from its start, is safe. A backend retries the calls
    that run in a transaction of their own a few times before raising this; a write made under
    a caller's write lock raises it at once, since only the caller can run the write again.
    """


class InteropError(GenMemError):
    """A Generative Agents storage folder could not be read or written.

    Attributes:
        path: the file concerned.
        node_id: the node concerned, when there is one.
    """

    def __init__(
        self, message: str, *, path: str | None = None, node_id: str | None = None
    ) -> None:
        where = ", ".join(x for x in (path, node_id) if x)
        super().__init__(f"{where}: {message}" if where else message)
        self.path = path
        self.node_id = node_id


class ParseError(GenMemError, ValueError):
    """An LLM reply held nothing usable; the reply is kept on the error.

    Attributes:
        reply: the text that could not be parsed.
    """

    def __init__(self, message: str, *, reply: str = "") -> None:
        shown = reply if len(reply) <= 200 else reply[:200] + "…"
        super().__init__(f"{message} (reply: {shown!r})")
        self.reply = reply


class ConfigurationError(GenMemError):
    """Something must be installed or set first; the message says what."""


class ChatModelError(ConfigurationError, RuntimeError):
    """No chat model is configured, or it cannot be reached, refused the key or failed.

    The message is one line naming what to set or check (``OPENAI_API_KEY``,
    ``OPENAI_BASE_URL``, ``OPENAI_MODEL``). It is also a ``RuntimeError`` so that servers
    that pass only the messages of standard error types to their callers (the LangGraph
    API server does) show this hint rather than a generic "internal error".
    """


def error_line(message: object) -> str:
    """An error as the command line and scripts print it: ``error: ...`` on one line.

    Args:
        message: the error (or its text); runs of white space, newlines included, become one
            space, so another library's multi-line text stays one line.

    Returns:
        The line, without its newline.
    """
    return f"error: {' '.join(str(message).split())}"
