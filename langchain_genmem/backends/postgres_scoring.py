"""Weighted retrieval in PostgreSQL, equal to :mod:`langchain_genmem.numerics.scoring`.

The database does what only it can do cheaply, one pass over the persona's rows, and the
ranking itself is the in-process one (:func:`~langchain_genmem.numerics.scoring.rank`), so
the two cannot drift apart:

1. one scan of the candidates (events and thoughts whose ``embedding_key`` has no
   ``"idle"``, or the types a filter names, chats included; expired ones dropped unless asked
   or in ``"reverie"`` mode) aggregates, per candidate, 28 bytes: its number and type code,
   its last access (the stored microseconds), its poignancy and pgvector's float32 inner
   product with the query (``<#>``) over the stored norm. The aggregate is one
   ``string_agg`` of fixed-size records, so parallel workers hand on one value each instead
   of a row per candidate, as pgvector's own top-k scan hands on only its k;
2. in process, the records become the columns of
   :class:`~langchain_genmem.numerics.scoring.Candidates` (last accesses as
   :func:`~langchain_genmem.core.timeutil.to_epoch` gives them, approximate cosines from the
   products and the stored norms), recency comes from
   :func:`~langchain_genmem.numerics.scoring.recency` and the ranking from
   :func:`~langchain_genmem.numerics.scoring.rank`;
3. the rows the ranking needs exactly (those that could hold the least or greatest cosine,
   reach the k-th best, or hold the lowest score) are read by primary key with their
   vectors and get the float64 cosine of
   :func:`~langchain_genmem.numerics.scoring.exact_cosine`: a few rows, read once each,
   the top k among them. The first read also takes the rows the later steps will most
   likely ask for (:func:`likely_rows`), so a ranking is usually two queries.

The error bound of the approximate cosines is
:func:`~langchain_genmem.numerics.scoring.cosine_error` for float32, doubled for pgvector's
own summation order and the query's rounding to float32.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np

from langchain_genmem.core.nodes import CANDIDATE_TYPES, TYPE_CODES
from langchain_genmem.core.timeutil import to_epoch
from langchain_genmem.numerics.scoring import Candidates, Weights, cosine_error, score

# The type codes of the in-process ranking (they order ties), packed under the node number.
TYPE_CODE = (
    "CASE m.type " + " ".join(f"WHEN '{t}' THEN {code}" for t, code in TYPE_CODES.items())
    + " END"
)
TYPE_BITS = 2

# One record per candidate: node number * 4 + type code (an int4: PostgreSQL refuses the
# query past 536 million memories of a persona rather than wrap), last access (microseconds
# since 2000-01-01, PostgreSQL's own), poignancy, inner product (pgvector's float32 sum) / norm.
RECORD = np.dtype([("key", ">i4"), ("la", ">i8"), ("poig", ">f8"), ("ip", ">f8")])
POSTGRES_EPOCH_US = 946_684_800 * 1_000_000  # 2000-01-01 in microseconds since 1970

QUERY = f"""
SELECT string_agg(int4send(m.node_count * {1 << TYPE_BITS} + {TYPE_CODE})
                  || timestamp_send(m.last_accessed) || float8send(m.poignancy)
                  || float8send(CASE WHEN m.embedding_norm = 0 THEN 0::float8
                                     ELSE (m.embedding <#> %(qv)s::vector) / m.embedding_norm END),
                  ''::bytea)
FROM memory_nodes m
WHERE m.persona_name = %(persona)s AND m.type = ANY(%(kinds)s)
  AND m.embedding_key NOT LIKE '%%idle%%' {{alive}}{{where}}
"""

ALIVE = " AND (m.expiration IS NULL OR date_part('epoch', m.expiration) > %(now)s)"


def candidates_query(include_expired: bool, where: str = "") -> str:
    """The SQL that aggregates every candidate of a persona.

    Args:
        include_expired: keep expired candidates (the caller passes True for ``"reverie"``).
        where: more candidate conditions (``" AND ..."`` over ``memory_nodes m``), from
            :meth:`~langchain_genmem.numerics.candidate_filter.CandidateFilter.sql`: the filter
            picks the candidates before normalisation, as in process (its parameters may replace
            ``kinds``, the types scored).

    Returns:
        The query, with ``%(name)s`` parameters from :func:`candidates_params`.
    """
    return QUERY.format(alive="" if include_expired else ALIVE, where=where)


def candidates_params(
    persona: str, query: np.ndarray, now: datetime | float
) -> dict[str, object]:
    """The parameters of :func:`candidates_query`.

    Args:
        persona: the persona.
        query: the query vector.
        now: the current time (datetime or epoch seconds).

    Returns:
        The parameters; ``kinds`` are the original's candidate types (a filter's types
        replace them).
    """
    from pgvector import Vector  # lazy: optional extra

    return {
        "persona": persona,
        "kinds": list(CANDIDATE_TYPES),
        "qv": Vector(np.asarray(query, dtype=np.float32)),
        "now": now if isinstance(now, float) else to_epoch(now),
    }


def approximation_error(dim: int) -> float:
    """The bound on each approximate cosine's error, for vectors of ``dim`` numbers."""
    return 2.0 * cosine_error(dim, np.dtype(np.float32))


# likely_rows: how many rows past the k best and above the lowest it guesses (rows within
# the approximation's slack of the k-th best are few: reading 38 rather than 60 past the
# extremes saves up to a millisecond a ranking, and a miss costs one more read)
GUESS_BEYOND_K = 8
GUESS_LOWEST = 8


def likely_rows(c: Candidates, raw_recency: np.ndarray, w: Weights, k: int) -> np.ndarray:
    """The node numbers the exact steps of a ranking will most likely read.

    A guess from the approximate scores: the best ``k + GUESS_BEYOND_K`` and the
    ``GUESS_LOWEST`` lowest. Reading them with the first exact rows saves the ranking a round
    trip per later step; a row the guess misses is read when asked for, so the guess never
    changes the result.

    Args:
        c: the candidates, with approximate cosines.
        raw_recency: their raw recency (not changed).
        w: the weights.
        k: how many the ranking returns.

    Returns:
        Node numbers.
    """
    approx = score(c, raw_recency, w).score
    n = approx.shape[0]
    best = min(n, k + GUESS_BEYOND_K)
    lowest = min(n, GUESS_LOWEST)
    picked = [np.argpartition(-approx, best - 1)[:best] if best else np.zeros(0, np.int64),
              np.argpartition(approx, lowest - 1)[:lowest] if lowest else np.zeros(0, np.int64)]
    return c.node_count[np.unique(np.concatenate(picked))]


def unpack(packed: bytes | None, query: np.ndarray) -> Candidates:
    """The candidates of the query's result.

    Args:
        packed: the query's one value: the records (None when there are none).
        query: the query vector.

    Returns:
        The candidates, with approximate cosines.
    """
    records = np.frombuffer(packed or b"", dtype=RECORD)
    key = records["key"].astype(np.int64)
    us = records["la"].astype(np.int64) + POSTGRES_EPOCH_US
    # seconds + microseconds / 1e6, the two roundings of to_epoch
    la = (us // 1_000_000).astype(np.float64) + (us % 1_000_000) / 1e6
    q_norm = float(np.linalg.norm(np.asarray(query, dtype=np.float64)))
    cos = -records["ip"].astype(np.float64)
    if q_norm == 0:
        cos[:] = 0.0
    else:
        cos /= q_norm
    return Candidates(
        last_accessed=la,
        type_code=key & ((1 << TYPE_BITS) - 1),
        node_count=key >> TYPE_BITS,
        poignancy=records["poig"].astype(np.float64),
        cosine=cos,
    )
