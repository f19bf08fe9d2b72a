"""Storage backends behind MemoryStream (see :mod:`langchain_genmem.backends.base`)."""

from langchain_genmem.backends.base import Head, MemoryBackend, StoredNode

__all__ = ["Head", "MemoryBackend", "StoredNode"]
