"""One retrieval's ranking plan, frozen: what both rankers (in process, in the database) take.

:meth:`~langchain_genmem.retrieval.weighted.WeightedRetrieval.plan` resolves a retriever's
fields against the persona's committed state of one read (its weights, decay, relevance
signal) into a :class:`RankingPlan`. The in-process ranking
(:meth:`~langchain_genmem.retrieval.weighted.WeightedRetrieval.retrieve_with_report`) and
the database's (:func:`~langchain_genmem.retrieval.database.retrieve_in_database`) read the
plan only, never the retriever; :func:`pick_candidates` is the candidate selection both use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from langchain_genmem.core.modes import RecencyMode, RelevanceMode
from langchain_genmem.core.state import StreamState
from langchain_genmem.memory.cache import NodeCache
from langchain_genmem.memory.corrections import current
from langchain_genmem.numerics.candidate_filter import CandidateFilter
from langchain_genmem.numerics.scoring import Scale, Weights
from langchain_genmem.retrieval.report import Skipped

__all__ = ["RankingPlan", "pick_candidates"]


@dataclass(frozen=True)
class RankingPlan:
    """How one retrieval ranks, resolved: nothing left to look up on the retriever.

    Attributes:
        k: how many memories to return.
        recency_mode: ``"hours"``, ``"rank"`` or ``"reverie"``.
        decay: the recency decay (the retriever's, or the persona's).
        weights: the weights and gains (the retriever's, or the persona's where None).
        relevance: the relevance signal (the retriever's, or the persona's).
        lexical_share: the lexical share of a hybrid relevance.
        filter: the candidate filter of the call.
        include_expired: score memories whose expiration passed too.
        leaves_out_superseded: leave out memories a newer memory supersedes.
        idle_filter: leave out memories whose embedding key says ``idle``.
        record_access: record the returned memories' access time.
        scale: how the components are scaled (``"candidates"`` or ``"absolute"``).
    """

    k: int
    recency_mode: RecencyMode
    decay: float
    weights: Weights
    relevance: RelevanceMode
    lexical_share: float
    filter: CandidateFilter
    include_expired: bool
    leaves_out_superseded: bool
    idle_filter: bool
    record_access: bool
    scale: Scale


def pick_candidates(
    static: Any, cache: NodeCache, now: float, plan: RankingPlan, state: StreamState,
) -> tuple[np.ndarray, np.ndarray | None, tuple[np.ndarray, ...], Skipped]:
    """The rows a plan scores, and how many memories were left out and why.

    Args:
        static: the cache's candidate columns (``cache.candidates(plan.idle_filter,
            chats=plan.filter.chats)``).
        cache: the columns of the read.
        now: the stream's clock, as an epoch.
        plan: the ranking plan.
        state: the committed state read with ``cache``.

    Returns:
        The candidate rows, their normalised importance (None when it must be
        recomputed), their (type code, node count, poignancy) columns, and the counts
        ``skipped_idle``, ``skipped_expired`` and ``skipped_filtered`` (a memory both
        expired and filtered out counts as expired).
    """
    rows, importance = static.rows, static.importance
    cands_static = (static.type_code, static.node_count, static.poignancy)
    skipped: Skipped = {"skipped_idle": static.idle, "skipped_expired": 0,
                        "skipped_filtered": 0}

    def narrow(keep: np.ndarray, reason: Literal["skipped_expired", "skipped_filtered"]
               ) -> None:
        """Keep the rows ``keep`` marks; count the others as skipped for ``reason``."""
        nonlocal rows, importance, cands_static
        if keep.all():
            return
        skipped[reason] += int(rows.size - keep.sum())
        rows, importance = rows[keep], None
        cands_static = tuple(col[keep] for col in cands_static)

    if static.any_expiration and not plan.include_expired and plan.recency_mode != "reverie":
        narrow(cache.expiration[rows] > now, "skipped_expired")
    if plan.leaves_out_superseded:
        narrow(current(cands_static[1], state), "skipped_filtered")
    flt = plan.filter
    if flt.active:
        type_code, node_count, poignancy = cands_static
        narrow(flt.mask(cache.created[rows], type_code, poignancy, node_count),
               "skipped_filtered")
    return rows, importance, cands_static, skipped
