"""``GenerativeAgentsRetriever(score_in="database")``: the ranking runs in PostgreSQL.

One scan in PostgreSQL hands on a few numbers per candidate, the in-process ranking runs on
them and the few rows it needs exactly are read by primary key
(:mod:`langchain_genmem.backends.postgres_scoring`), so the caller needs no vector of the
persona: the Documents are built from the rows read. The ids, their order and the scores equal the
in-process ranking's (to 1e-6). Access times are stored at once by one
``UPDATE ... = ANY(...)`` with ``GREATEST``; pending in-process access times of the stream
are flushed first, so both ways of scoring see the same history.

A lazy stream (``MemoryStream(..., lazy=True)``) is ranked without loading it: nothing of
the persona but its state row is read besides the ranking's, so a stateless worker keeps
nothing of the persona between retrievals (during one, the candidates' columns: about 110
bytes each). It reports no ``skipped_*`` counts (they would need
every row); a loaded stream counts them from its cache as the in-process path does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_genmem.backends.base import ranking_of
from langchain_genmem.core.errors import ValidationError
from langchain_genmem.core.state import StreamState
from langchain_genmem.core.timeutil import naive, to_epoch
from langchain_genmem.memory.cache import NodeCache
from langchain_genmem.memory.corrections import current_sql
from langchain_genmem.memory.query_cache import embed_query
from langchain_genmem.retrieval.documents import memory_document
from langchain_genmem.retrieval.plan import RankingPlan, pick_candidates
from langchain_genmem.retrieval.report import RetrievalReport, Skipped

if TYPE_CHECKING:
    from langchain_genmem.memory.stream import MemoryStream

Read = tuple[NodeCache | None, StreamState]
"""What a ranking in the database reads of the stream: its columns (None for a lazy stream)
and its committed state."""


def database_read(stream: MemoryStream) -> Read:
    """The stream caught up with the store, and the moment of it the ranking reads.

    Pending access times are flushed first, so both ways of scoring see the same history.

    Args:
        stream: the stream (stored in PostgreSQL).

    Returns:
        Its columns (None for a lazy stream, which loads none) and its committed state.
    """
    stream.flush()
    stream.refresh()
    return (None, stream.committed) if stream.lazy else stream.view()


def retrieve_in_database(
    stream: MemoryStream, query: str, plan: RankingPlan, read: Read
) -> RetrievalReport:
    """Rank by ``plan`` in the database and report as the in-process path does.

    Args:
        stream: the stream (stored in PostgreSQL).
        query: the focal point.
        plan: the ranking plan (its filter's SQL picks the candidates in the query).
        read: what :func:`database_read` read of the stream.

    Returns:
        The report, with the documents.

    Raises:
        ValidationError: the stream's backend cannot rank (not PostgreSQL).
    """
    ranker = ranking_of(stream.backend)
    if ranker is None:
        msg = (
            "score_in: 'database' needs a store that ranks (PostgreSQL) "
            "(MemoryStream(..., dsn='postgresql://...')); use score_in='process'"
        )
        raise ValidationError(msg, field="score_in")
    cache, state = read
    now = naive(stream.clock())
    vector = embed_query(stream.embeddings, query)
    flt = plan.filter
    where = current_sql(flt.sql(), state) if plan.leaves_out_superseded else flt.sql()
    ranking = ranker.rank(
        stream.persona, vector, k=plan.k, mode=plan.recency_mode, decay=plan.decay,
        weights=plan.weights, now=now, include_expired=plan.include_expired, where=where,
    )
    skipped: Skipped = {"skipped_idle": 0, "skipped_expired": 0, "skipped_filtered": 0}
    if cache is not None:
        static = cache.candidates(plan.idle_filter, chats=flt.chats)
        skipped = pick_candidates(static, cache, to_epoch(now), plan, state)[3]
    if not ranking.rows:
        status = "ok" if ranking.candidate_count or plan.k <= 0 else "no_candidates"
        return RetrievalReport(query=query, status=status, **skipped)
    nodes = [r.node for r in ranking.rows]
    if plan.record_access:
        stream.store_access(nodes, now)
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
        accessed_ids=[n.node_id for n in nodes] if plan.record_access else [],
        candidate_count=ranking.candidate_count,
        min_score=ranking.min_score,
        max_score=ranking.rows[0].score,
        lexical_share=0.0,
        **skipped,
    )
