"""Weighted retrieval in one SQL query, equal to :mod:`langchain_genmem.numerics.scoring`.

The query restates :func:`langchain_genmem.numerics.scoring.rank` over every candidate of a persona
(events and thoughts whose ``embedding_key`` has no ``"idle"``, or the types a filter names,
chats included; expired ones dropped unless asked or in ``"reverie"`` mode):

1. one scan computes each candidate's approximate cosine, from pgvector's float32 inner
   product (``<#>``) divided by the stored float64 norms, beside its last access (epoch
   seconds), type code and poignancy: the only pass that reads vectors;
2. one aggregate over it gives the bounds of every component: the cosine's, the
   poignancy's, and the recency's from the last accesses (recency is monotone in the last
   access, or by position ``decay ** 1 .. decay ** n``), so no recency is computed for them;
3. the rows that could hold the minimum or maximum cosine get the exact float64 cosine,
   so the min-max normalisation is exact;
4. recency by mode (``decay ** hours``, or ``decay ** position`` by window function, the
   original's inverted order and tie order for ``"reverie"``), each component min-max
   normalised (0.5 when all equal) and combined term by term as in process;
5. every row whose approximate score could reach the k-th best gets its exact cosine and is
   re-scored; the top k of those, ties in the original's candidate order (last access
   ascending, events before thoughts, newest first), are returned.

The scan, the bounds and the positions are ``MATERIALIZED`` (computed once); the scores
of ``"hours"`` are recomputed from the scan in the two passes that need them, which is
cheaper than storing them. Powers that would underflow a float8 are 0, as numpy's are
(PostgreSQL raises instead). The error bound of step 1 is
:func:`~langchain_genmem.numerics.scoring.cosine_error` for float32, doubled for pgvector's own
summation order and the query's rounding to float32.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

import numpy as np

from langchain_genmem.core.modes import RecencyMode
from langchain_genmem.core.nodes import CANDIDATE_TYPES, NODE_TYPES
from langchain_genmem.core.timeutil import to_epoch
from langchain_genmem.numerics.scoring import (
    Weights,
    combine,
    cosine_error,
    exact_cosine,
    minmax,
)

# PostgreSQL raises "underflow" where a float8 exp, power, product or quotient of
# non-zero values rounds to 0 (numpy gives 0). So a recency below e ** UNDERFLOW (about
# 1e-300) is 0, which keeps every quotient of recencies out of the subnormals, and a
# normalised recency below TINY counts as 0 in the weighted sum; no score sees either.
UNDERFLOW = -690.0
TINY = "1e-200"

# decay ** hours since the last access {x} (accesses after now count as now)
HOURS = (
    f"CASE WHEN greatest(%(now)s - {{x}}, 0::float8) * %(ln_decay)s < {UNDERFLOW} "
    "THEN 0::float8 ELSE exp(greatest(%(now)s - {x}, 0::float8) * %(ln_decay)s) END"
)
# decay ** position {x}
POWER = (
    f"CASE WHEN ({{x}})::float8 * %(ln_decay_step)s < {UNDERFLOW} THEN 0::float8 "
    "ELSE power(%(decay)s, ({x})::float8) END"
)


class Recency(NamedTuple):
    """How the query computes one recency mode.

    Attributes:
        window: the order that numbers the candidates (``pos``), or None for recency by
            time.
        raw: the raw recency, of ``{x}``: a row's ``la`` (by time) or ``pos``.
        least: the ``{x}`` of the least recency, from the bounds ``lim``.
        greatest: the ``{x}`` of the greatest.
    """

    window: str | None
    raw: str
    least: str
    greatest: str


RECENCY: dict[str, Recency] = {
    "hours": Recency(None, HOURS, "lim.la_lo", "lim.la_hi"),
    "rank": Recency("ORDER BY la DESC, node_count DESC", POWER, "lim.n", "1"),
    "reverie": Recency("ORDER BY la ASC, type_code ASC, node_count DESC", POWER, "lim.n", "1"),
}

# The in-process type codes (event 0, thought 1, chat 2: the order of NODE_TYPES), which
# order ties.
TYPE_CODE = (
    "CASE m.type "
    + " ".join(f"WHEN '{t}' THEN {code}" for code, t in enumerate(NODE_TYPES))
    + " END"
)

# Set (transaction-local) before the query: its intermediate results stay in memory, and
# the scan runs in parallel workers although it hands every candidate row on, which the
# planner's default price of a row passed between processes would forbid (pgvector's
# distance operator is priced as cheap as an addition).
RANKING_SETTINGS = (
    "SELECT set_config('work_mem', '64MB', true), "
    "set_config('parallel_tuple_cost', '0.001', true)"
)

COMBINE = (
    f"((CASE WHEN {{r}} < {TINY} THEN 0::float8 ELSE {{r}} END * %(w0)s) * %(g0)s "
    "+ ({v} * %(w1)s) * %(g1)s) + ({i} * %(w2)s) * %(g2)s"
)

QUERY = """
WITH c AS MATERIALIZED (
    SELECT m.node_count, {type_code} AS type_code,
           date_part('epoch', m.last_accessed) AS la, m.poignancy AS poig,
           CASE WHEN m.embedding_norm = 0 OR %(qn)s = 0 THEN 0::float8
                ELSE -(m.embedding <#> %(qv)s::vector) / (m.embedding_norm * %(qn)s) END AS cos_a
    FROM memory_nodes m
    WHERE m.persona_name = %(persona)s AND m.type = ANY(%(kinds)s)
      AND m.embedding_key NOT LIKE '%%idle%%' {alive}{where}
), lim AS MATERIALIZED (
    SELECT min(cos_a) AS lo, max(cos_a) AS hi, min(poig) AS plo, max(poig) AS phi,
           min(la) AS la_lo, max(la) AS la_hi, count(*) AS n
    FROM c
), bounds AS MATERIALIZED (
    SELECT lim.*, {rec_lo} AS rlo, {rec_hi} AS rhi,
           2 * abs(%(w1)s * %(g1)s) * least(1, 4 * %(err)s / nullif(hi - lo, 0)) AS margin
    FROM lim
), p AS {positions}
), s AS NOT MATERIALIZED (
    SELECT p.node_count, p.type_code, p.la,
           p.cos_a <= b.lo + 2 * %(err)s OR p.cos_a >= b.hi - 2 * %(err)s AS edge,
           CASE WHEN b.rhi = b.rlo THEN 0.5::float8
                ELSE ({recency} - b.rlo) / (b.rhi - b.rlo) END AS r,
           CASE WHEN b.hi = b.lo THEN 0.5::float8
                ELSE (p.cos_a - b.lo) / (b.hi - b.lo) END AS v,
           CASE WHEN b.phi = b.plo THEN 0.5::float8
                ELSE (p.poig - b.plo) / (b.phi - b.plo) END AS i
    FROM p, bounds AS b
), kth AS MATERIALIZED (
    SELECT (SELECT min(score_a) FROM (SELECT {combine} AS score_a FROM s
                                      ORDER BY 1 DESC LIMIT %(k)s) AS best) AS kth,
           (SELECT min({combine}) FROM s) AS lowest
), picked AS MATERIALIZED (
    SELECT s.node_count, s.type_code, s.la, s.r, s.i, s.edge,
           {combine} >= kth.kth - b.margin AS near
    FROM s, kth, bounds AS b
    WHERE s.edge OR {combine} >= kth.kth - b.margin
)
SELECT m.node_count, m.type_count, m.type, m.depth, m.created_at, m.expiration,
       m.last_accessed, m.subject, m.predicate, m.object, m.description, m.embedding_key,
       m.poignancy, m.keywords, m.filling, m.conversation, m.speaker, m.embedding, m.embedding_norm,
       picked.r, picked.i, picked.edge, picked.near, picked.la, picked.type_code,
       b.n, kth.lowest, b.lo, b.hi
FROM memory_nodes m JOIN picked ON picked.node_count = m.node_count, kth, bounds AS b
WHERE m.persona_name = %(persona)s  -- by primary key: the few rows picked
  AND m.node_count = ANY((SELECT array_agg(node_count) FROM picked)::integer[])
"""


def ranking_query(mode: RecencyMode, include_expired: bool, where: str = "") -> str:
    """The SQL of one ranking.

    Args:
        mode: the recency mode.
        include_expired: keep expired candidates (``"reverie"`` always does).
        where: more candidate conditions (``" AND ..."`` over ``memory_nodes m``), from
            :meth:`~langchain_genmem.numerics.candidate_filter.CandidateFilter.sql`: the filter
            picks the candidates before normalisation, as in process (its parameters may replace
            ``kinds``, the types scored).

    Returns:
        The query, with ``%(name)s`` parameters from :func:`ranking_params`.
    """
    alive = ""
    if not include_expired and mode != "reverie":
        alive = (
            "AND (m.expiration IS NULL "
            "OR date_part('epoch', m.expiration) > %(now)s)"
        )
    rec = RECENCY[mode]
    if rec.window is None:  # recency by time: nothing to number, scores recomputed per pass
        positions = "NOT MATERIALIZED (\n    SELECT c.*, 0 AS pos FROM c"
    else:
        positions = (f"MATERIALIZED (\n    SELECT c.*, row_number() OVER ({rec.window}) AS pos "
                     "FROM c")
    return QUERY.format(
        type_code=TYPE_CODE,
        alive=alive,
        where=where,
        positions=positions,
        recency=rec.raw.format(x="p.la" if rec.window is None else "p.pos"),
        rec_lo=rec.raw.format(x=rec.least),
        rec_hi=rec.raw.format(x=rec.greatest),
        combine=COMBINE.format(r="s.r", v="s.v", i="s.i"),
    )


def ranking_params(
    persona: str,
    query: np.ndarray,
    *,
    k: int,
    decay: float,
    weights: Weights,
    now: datetime | float,
    dim: int,
) -> dict[str, object]:
    """The parameters of :func:`ranking_query`.

    Args:
        persona: the persona.
        query: the query vector.
        k: how many.
        decay: the recency decay.
        weights: the weights and gains.
        now: the current time (datetime or epoch seconds).
        dim: the vector size.

    Returns:
        The parameters; ``kinds`` are the original's candidate types (a filter's types
        replace them).
    """
    from pgvector import Vector


    q = np.asarray(query, dtype=np.float64)
    return {
        "persona": persona,
        "kinds": list(CANDIDATE_TYPES),
        "qv": Vector(q.astype(np.float32)),
        "qn": float(np.linalg.norm(q)),
        "k": int(k),
        "now": now if isinstance(now, float) else to_epoch(now),
        "decay": float(decay),
        "ln_decay": float(np.log(decay) / 3600.0),
        "ln_decay_step": float(np.log(decay)),
        "err": 2.0 * cosine_error(dim, np.dtype(np.float32)),
        "w0": float(weights.recency_w),
        "w1": float(weights.relevance_w),
        "w2": float(weights.importance_w),
        "g0": float(weights.gains[0]),
        "g1": float(weights.gains[1]),
        "g2": float(weights.gains[2]),
    }


# Where the query's columns are: the node's (``READ_COLUMNS``) come first.
NODE_END = 17  # the node's columns (READ_COLUMNS of the backend) come first
(AT_EMBEDDING, AT_NORM, AT_R, AT_I, AT_EDGE, AT_NEAR, AT_LA, AT_TYPE, AT_N,
 AT_LOWEST) = range(NODE_END, NODE_END + 10)


class Finished(NamedTuple):
    """The exact end of a ranking, over the rows the query returned.

    Attributes:
        best: indices of the top k rows, best first.
        score: each row's score.
        relevance: each row's normalised relevance.
        cosine: each row's exact cosine.
    """

    best: np.ndarray
    score: np.ndarray
    relevance: np.ndarray
    cosine: np.ndarray


def finish(rows: list[tuple], query: np.ndarray, k: int, weights: Weights) -> Finished:
    """Rank the rows the query picked exactly, with the in-process functions.

    The query returns the rows that could hold the least or greatest cosine (``edge``) and
    every row whose approximate score could reach the k-th best (``near``), with their
    vectors; here they get the exact float64 cosine
    (:func:`~langchain_genmem.numerics.scoring.exact_cosine`), the exact bounds of the
    cosine come from the edge rows, and the near rows are scored
    (:func:`~langchain_genmem.numerics.scoring.combine`) and sorted, ties in the original's
    candidate order (last access ascending, events before thoughts, newest first).

    Args:
        rows: the query's rows (at least one).
        query: the query vector.
        k: how many.
        weights: the weights and gains.

    Returns:
        The top k and each row's values.
    """
    vectors = np.vstack([_floats(r[AT_EMBEDDING]) for r in rows])
    norms = np.array([r[AT_NORM] for r in rows], dtype=np.float64)
    cos = exact_cosine(vectors, norms, query)
    edge = np.array([r[AT_EDGE] for r in rows], dtype=bool)
    bounds = (float(cos[edge].min()), float(cos[edge].max()))
    near = np.flatnonzero([r[AT_NEAR] for r in rows])
    v = minmax(cos, bounds)
    r_ = np.array([r[AT_R] for r in rows], dtype=np.float64)
    i = np.array([r[AT_I] for r in rows], dtype=np.float64)
    score = combine(r_, v, i, weights)
    la = np.array([r[AT_LA] for r in rows], dtype=np.float64)
    code = np.array([r[AT_TYPE] for r in rows], dtype=np.int64)
    count = np.array([r[0] for r in rows], dtype=np.int64)
    keys = (-count[near], code[near], la[near], -score[near])
    best = near[np.lexsort(keys)[:k]]
    return Finished(best, score, v, cos)


def _floats(value: object) -> np.ndarray:
    """A pgvector value (``Vector`` or array) as float32."""
    held = value.to_numpy() if hasattr(value, "to_numpy") else value
    return np.asarray(held, dtype=np.float32)
