"""``GenerativeAgentsRetriever(score_in="database")``: the ranking runs in PostgreSQL.

One SQL query scores every candidate (:mod:`langchain_genmem.backends.postgres_scoring`)
and returns the top k with their rows, so the caller needs no vector of the persona: the
Documents are built from the returned rows. The ids, their order and the scores equal the
in-process ranking's (to 1e-6). Access times are stored at once by one
``UPDATE ... = ANY(...)`` with ``GREATEST``; pending in-process access times of the stream
are flushed first, so both ways of scoring see the same history.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from langchain_genmem.documents import memory_document
from langchain_genmem.errors import ValidationError
from langchain_genmem.timeutil import naive, to_epoch

if TYPE_CHECKING:
    from langchain_genmem.candidate_filter import CandidateFilter
    from langchain_genmem.retrievers import GenerativeAgentsRetriever, RetrievalReport


def retrieve_in_database(
    retriever: GenerativeAgentsRetriever, query: str, k: int, flt: CandidateFilter
) -> RetrievalReport:
    """Rank in the database and report as the in-process path does.

    Args:
        retriever: the retriever (its stream must be stored in PostgreSQL).
        query: the focal point.
        k: how many.
        flt: the candidate filter (its SQL picks the candidates in the query).

    Returns:
        The report, with the documents.

    Raises:
        ValidationError: the stream's backend cannot rank (not PostgreSQL).
    """
    from langchain_genmem.backends.postgres import PostgresBackend, node_from_row
    from langchain_genmem.retrievers import RetrievalReport

    stream = retriever.memory_stream
    backend = stream.backend
    if not isinstance(backend, PostgresBackend):
        msg = (
            "score_in: 'database' needs a stream stored in PostgreSQL "
            "(MemoryStream(..., dsn='postgresql://...')); use score_in='process'"
        )
        raise ValidationError(msg, field="score_in")
    stream.flush()
    stream.refresh()
    now = naive(stream.clock())
    vector = np.asarray(stream.embeddings.embed_query(query), dtype=np.float64)
    state = stream._state
    ranking = backend.rank(
        stream.persona, vector, k=k, mode=retriever.recency_mode,
        decay=state.recency_decay if retriever.recency_decay is None else retriever.recency_decay,
        weights=retriever.effective_weights(), now=now,
        include_expired=retriever.include_expired, where=flt.sql(),
    )
    cache = stream._cache
    static = cache.candidates(chats=flt.chats)
    skipped = retriever.pick_candidates(static, cache, to_epoch(now), flt)[3]
    if not ranking.rows:
        status = "ok" if ranking.candidate_count or k <= 0 else "no_candidates"
        return RetrievalReport(query=query, status=status, **skipped)
    nodes = [node_from_row(r.row) for r in ranking.rows]
    if retriever.update_access:
        backend.write_access(stream.persona, {n.node_id: to_epoch(now) for n in nodes})
        stream._cache.merge_access({n.node_count: to_epoch(now) for n in nodes})
        for n in nodes:
            n.last_accessed = max(n.last_accessed, now)
    docs = [
        memory_document(stream.persona, n, score=r.score, recency=r.recency,
                        relevance=r.relevance, importance=r.importance, cosine=r.cosine,
                        rank=place, candidates=ranking.candidate_count, dense=r.relevance,
                        lexical=None, bm25=None, lexical_share=0.0, **skipped)
        for place, (n, r) in enumerate(zip(nodes, ranking.rows, strict=True))
    ]
    return RetrievalReport(
        query=query,
        status="ok",
        documents=docs,
        accessed_ids=[n.node_id for n in nodes] if retriever.update_access else [],
        candidate_count=ranking.candidate_count,
        min_score=ranking.min_score,
        max_score=ranking.rows[0].score,
        lexical_share=0.0,
        **skipped,
    )
