"""A retrieved memory as a LangChain Document: the one metadata layout both scoring places use."""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document

from langchain_genmem.core.nodes import MemoryNode


def memory_document(
    persona: str,
    node: MemoryNode,
    *,
    score: float,
    recency: float,
    relevance: float,
    importance: float,
    cosine: float | None,
    rank: int,
    **extra: Any,
) -> Document:
    """The Document of one retrieved memory.

    Args:
        persona: the persona.
        node: the memory.
        score: its weighted score.
        recency: normalised recency.
        relevance: normalised relevance.
        importance: normalised importance.
        cosine: raw cosine similarity to the query (None: the relevance had no dense part).
        rank: its place in the result, from 0.
        **extra: more metadata.

    Returns:
        ``page_content`` = description, ``id`` = node id, metadata: the node's fields and scores
        (``conversation`` and ``speaker`` only when set).
    """
    meta: dict[str, Any] = {
        "persona": persona,
        "node_id": node.node_id,
        "type": node.type,
        "created": node.created,
        "last_accessed": node.last_accessed,
        "expiration": node.expiration,
        "poignancy": node.poignancy,
        "score": score,
        "recency": recency,
        "relevance": relevance,
        "importance": importance,
        "cosine": cosine,
        "rank": rank,
        "depth": node.depth,
        "subject": node.subject,
        "predicate": node.predicate,
        "object": node.object,
        "keywords": list(node.keywords),
        "filling": node.filling,
        "embedding_key": node.embedding_key,
        **{name: getattr(node, name) for name in ("conversation", "speaker")
           if getattr(node, name, None) is not None},
        **extra,
    }
    return Document(page_content=node.description, metadata=meta, id=node.node_id)
