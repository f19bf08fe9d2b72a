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


class LetterEmbeddings(Embeddings):
    """Counts of each letter (a-z, then every other character folded into 6 buckets).

    Texts sharing letters are close, an exact repeat has cosine 1: enough structure for
    tests that compare similarities, deterministic on every CPU.
    """

    dims = 32

    def _vector(self, text: str) -> list[float]:
        out = [0.0] * self.dims
        for char in text.lower():
            if "a" <= char <= "z":
                out[ord(char) - ord("a")] += 1.0
            elif not char.isspace():
                out[26 + ord(char) % 6] += 1.0
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)
