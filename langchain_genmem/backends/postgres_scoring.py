"""Weighted retrieval in one SQL query, equal to :mod:`langchain_genmem.numerics.scoring`.

The query restates :func:`langchain_genmem.numerics.scoring.rank` over every candidate of a persona
(events and thoughts whose ``embedding_key`` has no ``"idle"``, or the types a filter names,
chats included; expired ones dropped unless asked or in ``"reverie"`` mode):

1. an approximate cosine from pgvector's float32 inner product (``<#>``) divided by the
   stored float64 norms;
2. the rows that could hold the minimum or maximum cosine get the exact float64 cosine,
   so the min-max normalisation is exact;
3. recency by mode (``decay ** hours``, or ``decay ** position`` by window function, the
   original's inverted order and tie order for ``"reverie"``), each component min-max
   normalised (0.5 when all equal) and combined term by term as in process;
4. every row whose approximate score could reach the k-th best gets its exact cosine and is
   re-scored; the top k of those, ties in the original's candidate order (last access
   ascending, events before thoughts, newest first), are returned.

Every step is a ``MATERIALIZED`` CTE: computed once, never re-run per row by a planner that
cannot see the sizes of the aggregates. The error bound of step 1 is
:func:`~langchain_genmem.numerics.scoring.cosine_error` for float32, doubled for pgvector's own
summation order and the query's rounding to float32.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np

from langchain_genmem.core.modes import RecencyMode
from langchain_genmem.core.nodes import CANDIDATE_TYPES, NODE_TYPES
from langchain_genmem.core.timeutil import to_epoch
from langchain_genmem.numerics.scoring import Weights, cosine_error

EXACT = """(SELECT CASE WHEN e.embedding_norm = 0 OR %(qn)s = 0 THEN 0::float8
              ELSE sum(x::float8 * y) / (e.embedding_norm * %(qn)s) END
            FROM memory_nodes e, unnest(e.embedding::real[], %(qa)s::float8[]) AS u(x, y)
            WHERE e.persona_name = %(persona)s AND e.node_count = {alias}.node_count
            GROUP BY e.embedding_norm)"""

RECENCY = {
    "hours": "exp(greatest(%(now)s - la, 0::float8) * %(ln_decay)s)",
    "rank": "power(%(decay)s, (row_number() OVER (ORDER BY la DESC, node_count DESC))::float8)",
    "reverie": (
        "power(%(decay)s, (row_number() OVER "
        "(ORDER BY la ASC, type_code ASC, node_count DESC))::float8)"
    ),
}

# The in-process type codes (event 0, thought 1, chat 2: the order of NODE_TYPES), which
# order ties.
TYPE_CODE = f"(array_position(ARRAY[{', '.join(repr(t) for t in NODE_TYPES)}], m.type) - 1)"

COMBINE = "(({r} * %(w0)s) * %(g0)s + ({v} * %(w1)s) * %(g1)s) + ({i} * %(w2)s) * %(g2)s"

QUERY = """
WITH c AS MATERIALIZED (
    SELECT m.node_count, {type_code} AS type_code,
           extract(epoch FROM m.last_accessed)::float8 AS la, m.poignancy AS poig,
           CASE WHEN m.embedding_norm = 0 OR %(qn)s = 0 THEN 0::float8
                ELSE -(m.embedding <#> %(qv)s::vector) / (m.embedding_norm * %(qn)s) END AS cos_a
    FROM memory_nodes m
    WHERE m.persona_name = %(persona)s AND m.type = ANY(%(kinds)s)
      AND strpos(m.embedding_key, 'idle') = 0 {alive}{where}
), lim AS MATERIALIZED (
    SELECT min(cos_a) AS lo, max(cos_a) AS hi, min(poig) AS plo, max(poig) AS phi FROM c
), c2 AS MATERIALIZED (
    SELECT c.*, (%(err)s > 0 AND (cos_a <= lim.lo + 2 * %(err)s
                                  OR cos_a >= lim.hi - 2 * %(err)s)) AS edge,
           lim.plo, lim.phi
    FROM c, lim
), c3 AS MATERIALIZED (
    SELECT c2.*, CASE WHEN edge THEN {exact_c2} ELSE cos_a END AS cos_b, {recency} AS rec
    FROM c2
), st AS MATERIALIZED (
    SELECT min(cos_b) AS clo, max(cos_b) AS chi, min(rec) AS rlo, max(rec) AS rhi FROM c3
), s AS MATERIALIZED (
    SELECT c3.*, st.clo, st.chi - st.clo AS span,
           CASE WHEN st.rhi = st.rlo THEN 0.5::float8
                ELSE (rec - st.rlo) / (st.rhi - st.rlo) END AS r,
           CASE WHEN st.chi = st.clo THEN 0.5::float8
                ELSE (cos_b - st.clo) / (st.chi - st.clo) END AS v,
           CASE WHEN phi = plo THEN 0.5::float8 ELSE (poig - plo) / (phi - plo) END AS i
    FROM c3, st
), s2 AS MATERIALIZED (
    SELECT s.*, {combine_a} AS score_a FROM s
), kth AS MATERIALIZED (
    SELECT min(score_a) AS kth, (SELECT min(score_a) FROM s2) AS lowest,
           (SELECT count(*) FROM s2) AS n
    FROM (SELECT score_a FROM s2 ORDER BY score_a DESC LIMIT %(k)s) AS best
), near AS MATERIALIZED (
    SELECT s2.*, CASE WHEN %(err)s > 0 AND span > 0 AND NOT edge THEN {exact_near}
                      ELSE cos_b END AS cos_x
    FROM s2, kth
    WHERE s2.score_a >= kth.kth - CASE WHEN span > 0 AND %(err)s > 0
                                       THEN 2 * abs(%(w1)s * %(g1)s) * %(err)s / span
                                       ELSE 0 END
), fin AS MATERIALIZED (
    SELECT near.*, CASE WHEN span = 0 OR cos_x = cos_b THEN v
                        ELSE (cos_x - clo) / span END AS v2
    FROM near
), scored AS MATERIALIZED (
    SELECT fin.*, {combine_f} AS score FROM fin
)
SELECT m.node_count, m.type_count, m.type, m.depth, m.created_at, m.expiration,
       m.last_accessed, m.subject, m.predicate, m.object, m.description, m.embedding_key,
       m.poignancy, m.keywords, m.filling, m.conversation, m.speaker,
       scored.score, scored.r, scored.v2, scored.i, scored.cos_x, kth.n, kth.lowest
FROM scored JOIN memory_nodes m
  ON m.persona_name = %(persona)s AND m.node_count = scored.node_count, kth
ORDER BY scored.score DESC, scored.la ASC, scored.type_code ASC, scored.node_count DESC
LIMIT %(k)s
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
            "OR extract(epoch FROM m.expiration)::float8 > %(now)s)"
        )
    return QUERY.format(
        type_code=TYPE_CODE,
        alive=alive,
        where=where,
        recency=RECENCY[mode],
        exact_c2=EXACT.format(alias="c2"),
        exact_near=EXACT.format(alias="s2"),
        combine_a=COMBINE.format(r="r", v="v", i="i"),
        combine_f=COMBINE.format(r="r", v="v2", i="i"),
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
        "qa": q.tolist(),
        "qn": float(np.linalg.norm(q)),
        "k": int(k),
        "now": now if isinstance(now, float) else to_epoch(now),
        "decay": float(decay),
        "ln_decay": float(np.log(decay) / 3600.0),
        "err": 2.0 * cosine_error(dim, np.dtype(np.float32)),
        "w0": float(weights.recency_w),
        "w1": float(weights.relevance_w),
        "w2": float(weights.importance_w),
        "g0": float(weights.gains[0]),
        "g1": float(weights.gains[1]),
        "g2": float(weights.gains[2]),
    }
