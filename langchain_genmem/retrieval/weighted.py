"""WeightedRetrieval: the ranking of Generative Agents, without LangChain's Runnable machinery.

:class:`~langchain_genmem.retrieval.retrievers.GenerativeAgentsRetriever` is this class made
a LangChain retriever: its fields, checks and ranking
(:meth:`WeightedRetrieval.retrieve_with_report`, which ``invoke`` and ``ainvoke`` both call)
are declared here once. A caller that ranks and reads the report only (the ``genmem``
command's ``search`` and ``explain``) builds this class and does not import LangChain's
retrievers, runnables and tracers (LangSmith), half a second of start-up. It takes the same
arguments as the retriever, which documents them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

import numpy as np
from langchain_core.documents import Document
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic import ValidationError as PydanticValidationError

from langchain_genmem.core import validation
from langchain_genmem.core.errors import EmbeddingDimensionError, ValidationError
from langchain_genmem.core.modes import (
    DATABASE_RELEVANCE_MODES,
    DEFAULT_RECENCY_MODE,
    DEFAULT_TIME_IN_QUERY,
    TIME_BOOST,
    TIME_IN_QUERY_MODES,
    RecencyMode,
    RelevanceMode,
    TimeInQuery,
)
from langchain_genmem.core.nodes import MemoryNode
from langchain_genmem.core.recall_sizes import RECALL_K
from langchain_genmem.core.state import StreamState
from langchain_genmem.core.timeutil import to_epoch
from langchain_genmem.memory.cache import NodeCache
from langchain_genmem.memory.query_cache import embed_query
from langchain_genmem.memory.stream import MemoryStream
from langchain_genmem.numerics.candidate_filter import (
    FILTER_FIELDS,
    CandidateFilter,
    make_filter,
    when,
)
from langchain_genmem.numerics.quantized import approximate_cosine
from langchain_genmem.numerics.scoring import (
    DEFAULT_GAINS,
    Candidates,
    Ranking,
    Scale,
    Weights,
    approximate_recency,
    exact_cosine,
    rank,
)
from langchain_genmem.retrieval.database import database_read, retrieve_in_database
from langchain_genmem.retrieval.documents import memory_document
from langchain_genmem.retrieval.plan import RankingPlan, pick_candidates
from langchain_genmem.retrieval.report import RetrievalReport, Skipped, TimeUse
from langchain_genmem.retrieval.time_window import TimeWindow, find_time_window

__all__ = ["WeightedRetrieval"]

_FIRST_PASS: dict[str, bool | None] = {"auto": None, "int8": True, "float32": False}


def _candidate_positions(ordered_rows: np.ndarray, rows: np.ndarray, size: int) -> np.ndarray:
    """Positions in ``rows`` (ascending) of the rows of ``ordered_rows`` that are in it."""
    where = np.full(size, -1, dtype=np.int64)
    where[rows] = np.arange(rows.size)
    found = where[ordered_rows]
    return found[found >= 0]


def _no_cosine(idx: np.ndarray) -> np.ndarray:
    """The exact rescoring of a ranking with no dense part (never called: its error is 0)."""
    return np.zeros(idx.shape[0])


class WeightedRetrieval(BaseModel):
    """The fields, checks and ranking of a :class:`GenerativeAgentsRetriever`.

    Takes the retriever's arguments (``stream``, ``k``, the weights, the filters...) with its
    checks; :meth:`retrieve_with_report` ranks. See
    :class:`~langchain_genmem.retrieval.retrievers.GenerativeAgentsRetriever` for each.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, populate_by_name=True, extra="forbid")

    memory_stream: MemoryStream = Field(alias="stream")
    k: int = RECALL_K
    recency_mode: RecencyMode = DEFAULT_RECENCY_MODE
    recency_decay: float | None = None
    recency_w: float | None = None
    relevance_w: float | None = None
    importance_w: float | None = None
    gains: tuple[float, float, float] = DEFAULT_GAINS
    include_expired: bool = False
    include_superseded: bool = False
    update_access: bool = True
    score_in: Literal["process", "database"] = "process"
    created_after: datetime | None = None
    created_before: datetime | None = None
    types: tuple[str, ...] | None = None
    min_poignancy: float | None = None
    first_pass: Literal["auto", "int8", "float32"] = "auto"
    relevance: RelevanceMode | None = None
    lexical_weight: float | None = None
    idle_filter: bool = True
    time_in_query: TimeInQuery = DEFAULT_TIME_IN_QUERY
    scale: Scale = "candidates"

    def __init__(self, **data: Any) -> None:
        """Build the retriever; unknown or bad arguments raise, naming the field.

        Raises:
            ValidationError: an argument this class does not take (with the closest known
                name), or a value out of range (weights finite and >= 0, decay in (0, 1],
                k >= 0), or a filter window that ends before it starts.
        """
        names = {"stream", *type(self).model_fields}
        validation.known_arguments(data, names, type(self).__name__)
        try:
            super().__init__(**data)
        except PydanticValidationError as e:
            raise validation.from_pydantic(e, type(self).__name__) from None
        make_filter(created_after=self.created_after, created_before=self.created_before)
        if self.score_in == "database":
            self._check_database(self.relevance or DATABASE_RELEVANCE_MODES[0])

    def _check_database(self, mode: str) -> None:
        """Options the SQL ranking does not compute raise, naming the option."""
        if mode not in DATABASE_RELEVANCE_MODES:
            names = " or ".join(DATABASE_RELEVANCE_MODES)
            allowed = " or ".join(f"relevance={m!r}" for m in DATABASE_RELEVANCE_MODES)
            msg = (
                f"relevance: {mode!r} is scored in process only; score_in='database' ranks by "
                f"{names} relevance (use {allowed} or score_in='process')"
            )
            raise ValidationError(msg, field="relevance")
        if not self.idle_filter:
            msg = ("idle_filter: False is scored in process only; score_in='database' always "
                   "leaves out idle memories (use score_in='process')")
            raise ValidationError(msg, field="idle_filter")
        if self.time_in_query == "weight":
            msg = ("time_in_query: 'weight' is scored in process only; score_in='database' "
                   "narrows to the period (use time_in_query='narrow' or score_in='process')")
            raise ValidationError(msg, field="time_in_query")
        if self.scale != "candidates":
            msg = (f"scale: {self.scale!r} is scored in process only; score_in='database' "
                   "normalises over the candidates (use scale='candidates' or "
                   "score_in='process')")
            raise ValidationError(msg, field="scale")

    @field_validator("relevance", mode="before")
    @classmethod
    def _relevance(cls, value: Any) -> str | None:
        return None if value is None else validation.relevance_mode(value, "relevance")

    @field_validator("lexical_weight", mode="before")
    @classmethod
    def _lexical_weight(cls, value: Any) -> float | None:
        return None if value is None else validation.lexical_weight(value, "lexical_weight")

    @field_validator("created_after", "created_before", mode="before")
    @classmethod
    def _time(cls, value: Any, info: Any) -> datetime | None:
        return when(value, info.field_name)

    @field_validator("types", mode="before")
    @classmethod
    def _types(cls, value: Any) -> tuple[str, ...] | None:
        return make_filter(types=value).types

    @field_validator("min_poignancy", mode="before")
    @classmethod
    def _min_poignancy(cls, value: Any) -> float | None:
        return make_filter(min_poignancy=value).min_poignancy

    @field_validator("recency_w", "relevance_w", "importance_w")
    @classmethod
    def _weight(cls, value: float | None, info: Any) -> float | None:
        return None if value is None else validation.weight(value, info.field_name)

    @field_validator("recency_decay")
    @classmethod
    def _decay(cls, value: float | None) -> float | None:
        return None if value is None else validation.decay(value, "recency_decay")

    @field_validator("k", mode="before")
    @classmethod
    def _k(cls, value: Any) -> int:
        return validation.top_k(value, "k")

    @field_validator("gains")
    @classmethod
    def _gains(cls, value: tuple[float, float, float]) -> tuple[float, float, float]:
        return tuple(validation.weight(g, f"gains[{i}]") for i, g in enumerate(value))  # type: ignore[return-value]
    def retrieve_many(
        self, focal_points: Sequence[str], k: int | None = None, **filters: Any
    ) -> dict[str, list[Document]]:
        """The original ``new_retrieve``: each focal point in order, access times carried over.

        Args:
            focal_points: the focal points.
            k: documents per focal point (default: the retriever's k).
            **filters: candidate filter fields for every focal point (see
                :meth:`retrieve_with_report`).

        Returns:
            ``{focal_point: documents}`` in the order given.
        """
        return {
            fp: self.retrieve_with_report(fp, k=k, **filters).documents for fp in focal_points
        }

    def nodes_for(self, query: str, k: int | None = None) -> list[MemoryNode]:
        """Like ``invoke`` but returns the MemoryNodes themselves.

        Args:
            query: the focal point.
            k: how many.

        Returns:
            The nodes, best first.
        """
        docs = self.retrieve_with_report(query, k=k).documents
        return [self.memory_stream.get(d.metadata["node_id"]) for d in docs]

    def retrieve_with_report(
        self, query: str, k: int | None = None, **filters: Any
    ) -> RetrievalReport:
        """Retrieve and say what happened (status, candidates, score range, accessed ids).

        Args:
            query: the focal point.
            k: how many (default: the retriever's k).
            **filters: ``created_after``, ``created_before``, ``types``,
                ``min_poignancy`` (each replacing the retriever's own) and ``node_ids``.

        Returns:
            The report, with the documents.

        Raises:
            ValidationError: an unknown argument or a bad filter value, naming it.
        """
        query = validation.query(query)
        k = self.k if k is None else validation.top_k(k)
        flt = self.candidate_filter(**filters)
        if self.score_in == "database":
            return self._in_database(query, k, flt)
        stream = self.memory_stream
        stream.refresh()
        # One moment of the persona for the whole read: the columns and the state are
        # taken once, and rows never move under the columns taken (a forget makes new
        # ones), so ranks, access times and documents all name the same memories.
        cache, state = stream.view()
        plan = self.plan(k, flt, state)
        mode, share = plan.relevance, plan.lexical_share
        window = self.query_window(query)
        now = to_epoch(stream.clock())
        static = cache.candidates(plan.idle_filter, chats=flt.chats)
        # Rows up to the candidates' size only: a write from another thread may append
        # nodes while this retrieval reads.
        n = static.n
        use: TimeUse | None = None
        if window is not None and self.time_in_query == "narrow":
            narrowed = dataclasses.replace(plan, filter=_within(flt, window))
            picked = pick_candidates(static, cache, now, narrowed, state)
            use = "narrowed" if picked[0].size else "no_memory_in_window"
        if use != "narrowed":
            picked = pick_candidates(static, cache, now, plan, state)
        rows, importance, cands_static, skipped = picked
        if rows.size == 0:
            return _timed(RetrievalReport(query=query, status="no_candidates", **skipped),
                          window, use)
        weights = plan.weights
        bonus = None
        if window is not None and self.time_in_query == "weight":
            bonus, use = self._time_bonus(window, cache.created[rows], weights), "weighted"
        bm25, ceiling = (None, 0.0) if mode == "dense" else (
            stream.lexical_index(cache).scores_and_ceiling(query, rows))
        if plan.scale == "absolute":  # poignancy / 10, not min-max over these candidates
            importance = None
        pick = slice(0, n) if rows.size == n else rows  # all rows candidates: no gathers
        if mode == "lexical":  # no dense part: no query embedding
            cosine, error = np.zeros(rows.size), 0.0
            exact = _no_cosine
        else:
            cosine, error, exact = self._first_pass(query, cache, n, pick, rows)
        cands = Candidates(
            last_accessed=cache.last_accessed[pick].copy(),  # this read's: others touch it
            type_code=cands_static[0],
            node_count=cands_static[1],
            poignancy=cands_static[2],
            cosine=cosine,
        )
        order = None
        if plan.recency_mode == "reverie":
            # the order of every memory, idle or not, chats too: one order kept for all
            everything = cache.access_order(cache.candidates(idle_filter=False, chats=True))
            order = _candidate_positions(everything, rows, cache.n)
        raw_recency, recency_error, exact_recency = approximate_recency(
            cands, plan.recency_mode, plan.decay, now, order)
        ranked = rank(cands, raw_recency, weights, k, exact, error, importance,
                      overwrite=True,  # both arrays are this call's own
                      relevance=mode, lexical_weight=share, bm25=bm25, bonus=bonus,
                      recency_error=recency_error, exact_recency=exact_recency,
                      scale=plan.scale, lexical_max=ceiling)
        best, scored = ranked.best, ranked.scored
        if plan.record_access and best.size:
            stream.record_access(rows[best], now, columns=cache)
        docs = [
            self._document(cache, rows[i], i, place, ranked, skipped,
                           with_dense=mode != "lexical")
            for place, i in enumerate(best)
        ]
        accessed = [d.metadata["node_id"] for d in docs]
        report = RetrievalReport(
            query=query,
            status="ok",
            documents=docs,
            accessed_ids=accessed if plan.record_access else [],
            candidate_count=int(rows.size),
            min_score=float(scored.score.min()),
            max_score=float(scored.score.max()),
            lexical_share=ranked.share,
            **skipped,
        )
        return _timed(report, window, use)

    def _in_database(self, query: str, k: int, flt: CandidateFilter) -> RetrievalReport:
        """Rank in the database (``score_in="database"``), narrowed to a named time first."""
        stream = self.memory_stream
        self._check_database(self.effective_relevance()[0])
        read = database_read(stream)
        plan = self.plan(k, flt, read[1])
        window = self.query_window(query)
        if window is None:
            return retrieve_in_database(stream, query, plan, read)
        narrowed = dataclasses.replace(plan, filter=_within(flt, window))
        report = retrieve_in_database(stream, query, narrowed, read)
        if report.candidate_count:
            return _timed(report, window, "narrowed")
        return _timed(retrieve_in_database(stream, query, plan, read), window,
                      "no_memory_in_window")

    def query_window(self, query: str) -> TimeWindow | None:
        """The period the query names, as this retriever reads it at the stream's clock.

        Args:
            query: the question.

        Returns:
            The window, or None: the option is off, the recency mode is ``"reverie"``, or
            the query names no time.
        """
        if self.time_in_query == "off" or self.recency_mode == "reverie":
            return None
        return find_time_window(query, self.memory_stream.clock())

    @staticmethod
    def _time_bonus(window: TimeWindow, created: np.ndarray, weights: Weights) -> np.ndarray:
        """What each candidate gains with ``time_in_query="weight"``: in the window or not."""
        start, end = to_epoch(window.start), to_epoch(window.end)
        inside = (created >= start) & (created < end)
        return inside * (TIME_BOOST * weights.relevance_w * weights.gains[1])

    def _first_pass(
        self, query: str, cache: Any, n: int, pick: slice | np.ndarray, rows: np.ndarray
    ) -> tuple[np.ndarray, float, Any]:
        """Approximate cosines of the candidates, their error bound and the exact rescoring."""
        query_vector = validation.finite_vector(
            embed_query(self.memory_stream.embeddings, query), "query embedding"
        )
        if cache.dim is not None and query_vector.shape[0] != cache.dim:
            raise EmbeddingDimensionError(cache.dim, query_vector.shape[0], where="query embedding")
        vectors, norms = cache.vectors[:n], cache.norms[:n]
        approx, error = approximate_cosine(
            cache, n, query_vector, int8=_FIRST_PASS[self.first_pass]
        )

        def exact(idx: np.ndarray) -> np.ndarray:
            return exact_cosine(vectors[rows[idx]], norms[rows[idx]], query_vector)

        return approx[pick], error, exact

    @field_validator("time_in_query", mode="before")
    @classmethod
    def _time_in_query(cls, value: Any) -> str:
        return validation.one_of(value, TIME_IN_QUERY_MODES, "time_in_query")

    def effective_relevance(self, state: StreamState | None = None) -> tuple[RelevanceMode, float]:
        """The relevance mode and lexical weight this retriever scores with.

        Args:
            state: the persona's committed state a read took (None: the stream's now).

        Returns:
            Its own, or the persona's (``relevance_mode``, ``lexical_weight``) where None.
        """
        state = self.memory_stream.committed if state is None else state
        mode = state.relevance_mode if self.relevance is None else self.relevance
        share = state.lexical_weight if self.lexical_weight is None else self.lexical_weight
        return mode, float(share)

    def candidate_filter(self, **filters: Any) -> CandidateFilter:
        """The filter of one call: the retriever's fields, replaced by those given.

        Args:
            **filters: ``created_after``, ``created_before``, ``types``, ``min_poignancy``,
                ``node_ids``.

        Returns:
            The validated filter.

        Raises:
            ValidationError: an unknown name or a bad value.
        """
        validation.known_arguments(filters, set(FILTER_FIELDS), "retrieval filter")
        own = CandidateFilter(
            created_after=self.created_after,
            created_before=self.created_before,
            types=self.types,
            min_poignancy=self.min_poignancy,
        )
        return own.merged(filters)

    def pick_candidates(
        self, static: Any, cache: Any, now: float, flt: CandidateFilter | None = None,
        state: StreamState | None = None,
    ) -> tuple[np.ndarray, np.ndarray | None, tuple[np.ndarray, ...], Skipped]:
        """The rows this retrieval scores, and how many memories were left out and why.

        :func:`~langchain_genmem.retrieval.plan.pick_candidates` with this retriever's plan.

        Args:
            static: the cache's candidate columns (``cache.candidates(idle_filter,
                chats=flt.chats)``).
            cache: the stream's node cache.
            now: the stream's clock, as an epoch.
            flt: the candidate filter (default: the retriever's own).
            state: the committed state read with ``cache`` (None: the stream's now).

        Returns:
            What :func:`~langchain_genmem.retrieval.plan.pick_candidates` returns.
        """
        state = self.memory_stream.committed if state is None else state
        plan = self.plan(self.k, self.candidate_filter() if flt is None else flt, state)
        return pick_candidates(static, cache, now, plan, state)

    def plan(self, k: int, flt: CandidateFilter, state: StreamState) -> RankingPlan:
        """This retriever's ranking plan for one call, resolved against ``state``.

        Args:
            k: how many memories.
            flt: the call's candidate filter.
            state: the persona's committed state the read took.

        Returns:
            The frozen plan both rankers take.
        """
        mode, share = self.effective_relevance(state)
        return RankingPlan(
            k=k, recency_mode=self.recency_mode,
            decay=state.recency_decay if self.recency_decay is None else self.recency_decay,
            weights=self.effective_weights(state), relevance=mode, lexical_share=share,
            filter=flt, include_expired=self.include_expired,
            leaves_out_superseded=self.leaves_out_superseded, idle_filter=self.idle_filter,
            record_access=self.update_access, scale=self.scale,
        )

    @property
    def leaves_out_superseded(self) -> bool:
        """Whether this retrieval leaves superseded memories out (not ``"reverie"``)."""
        return not self.include_superseded and self.recency_mode != "reverie"

    def effective_weights(self, state: StreamState | None = None) -> Weights:
        """The weights this retriever scores with: its own, or the persona's where None.

        Args:
            state: the persona's committed state a read took (None: the stream's now).

        Returns:
            The resolved weights and gains.
        """
        state = self.memory_stream.committed if state is None else state
        return Weights(
            recency_w=state.recency_w if self.recency_w is None else self.recency_w,
            relevance_w=state.relevance_w if self.relevance_w is None else self.relevance_w,
            importance_w=state.importance_w if self.importance_w is None else self.importance_w,
            gains=tuple(self.gains),  # type: ignore[arg-type]
        )

    def _document(
        self,
        cache: NodeCache,
        row: int,
        i: int,
        place: int,
        r: Ranking,
        skipped: Skipped,
        *,
        with_dense: bool = True,
    ) -> Document:
        dense = with_dense and r.dense is not None
        return memory_document(
            self.memory_stream.persona,
            cache.nodes[row],
            score=float(r.scored.score[i]),
            recency=float(r.scored.recency[i]),
            relevance=float(r.scored.relevance[i]),
            importance=float(r.scored.importance[i]),
            cosine=float(r.cosine[i]) if dense else None,
            rank=place,
            dense=float(r.dense[i]) if dense else None,  # type: ignore[index]
            lexical=None if r.lexical is None else float(r.lexical[i]),
            bm25=None if r.bm25 is None else float(r.bm25[i]),
            lexical_share=r.share,
            candidates=int(r.scored.score.size),
            **skipped,
        )


def _within(flt: CandidateFilter, window: TimeWindow) -> CandidateFilter:
    """The filter narrowed to the window (an empty intersection keeps no memory)."""
    start, end = when(window.start, "time_window"), when(window.end, "time_window")
    after = start if flt.created_after is None else max(flt.created_after, start)
    before = end if flt.created_before is None else min(flt.created_before, end)
    return dataclasses.replace(flt, created_after=after, created_before=before)


def _timed(report: RetrievalReport, window: TimeWindow | None,
           use: TimeUse | None) -> RetrievalReport:
    """The report, and each of its Documents, saying what time the question named."""
    report.time_window, report.time_use = window, use if window is not None else None
    if window is not None:
        text = f"{window.text()}, {(use or 'read').replace('_', ' ')}"
        for doc in report.documents:
            doc.metadata["time_window"] = text
    return report
