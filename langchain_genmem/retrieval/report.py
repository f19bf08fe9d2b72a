"""What one retrieval did: :class:`RetrievalReport`, made in process or in the database."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypedDict

from langchain_core.documents import Document

from langchain_genmem.retrieval.time_window import TimeWindow

__all__ = ["RetrievalReport", "Skipped", "TimeUse"]

TimeUse = Literal["narrowed", "weighted", "no_memory_in_window"]


class Skipped(TypedDict):
    """How many memories a retrieval left out, and why: the report's counts of that name.

    Each of the retrieval's Documents carries them too.
    """

    skipped_idle: int
    skipped_expired: int
    skipped_filtered: int


@dataclass
class RetrievalReport:
    """What one retrieval did, in the spirit of the Dify workflow's debug output.

    Attributes:
        query: the focal point.
        status: ``"ok"`` or ``"no_candidates"``.
        documents: the returned documents, best first.
        accessed_ids: node ids whose ``last_accessed`` was set.
        candidate_count: how many memories were scored.
        min_score: lowest final score among candidates (None without candidates).
        max_score: highest final score among candidates.
        skipped_expired: events and thoughts left out because their ``expiration`` is at or
            before the stream's clock (``include_expired=True`` scores them; a stream whose
            clock is far past a simulation's time skips every thought).
        skipped_idle: memories left out because their embedding_key holds ``"idle"``, as in
            the original.
        skipped_filtered: memories left out by the retrieval's filter (time window, types,
            ``min_poignancy``, ``node_ids``; see :mod:`langchain_genmem.numerics.candidate_filter`).
        lexical_share: the weight of the lexical part in the relevance used (0 for dense,
            1 for lexical; for hybrid the lexical weight, or 0 when every candidate has the
            same BM25 and 1 when every one has the same cosine:
            :func:`~langchain_genmem.numerics.scoring.lexical_share`); None without candidates.
        time_window: the period the query names, as the retriever's ``time_in_query`` read
            it (:mod:`langchain_genmem.retrieval.time_window`); None when it is off or the
            query names no time.
        time_use: what the window did: ``"narrowed"`` (only memories created in it were
            scored), ``"weighted"`` (they gained a bonus) or ``"no_memory_in_window"`` (none
            was created in it, so all were scored); None without a window.
    """

    query: str
    status: str
    documents: list[Document] = field(default_factory=list)
    accessed_ids: list[str] = field(default_factory=list)
    candidate_count: int = 0
    min_score: float | None = None
    max_score: float | None = None
    skipped_expired: int = 0
    skipped_idle: int = 0
    skipped_filtered: int = 0
    lexical_share: float | None = None
    time_window: TimeWindow | None = None
    time_use: TimeUse | None = None
