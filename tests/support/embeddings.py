"""Embeddings for tests: a table from text to a fixed vector.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from langchain_core.embeddings import Embeddings


class TableEmbeddings(Embeddings):
    """Looks every text up in a table: stored texts and queries alike (unknown text: KeyError)."""

    def __init__(self, table: Mapping[str, Sequence[float]]) -> None:
        self.table = table

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(map(float, self.table[t])) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return list(map(float, self.table[text]))
