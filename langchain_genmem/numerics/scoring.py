"""Pure numpy scoring of the weighted retrieval: the original simulation's ``new_retrieve``.

Every function here is pure and vectorised over the whole candidate set. The formula::

    score = recency_w * gains[0] * recency
          + relevance_w * gains[1] * relevance
          + importance_w * gains[2] * importance

with each component min-max normalised to [0, 1] over the candidates (all 0.5 when the
values are equal), relevance the cosine similarity to the query (or a fusion of it with
the BM25 lexical score: :func:`fuse_relevance`), importance the poignancy and recency by
mode:

- ``"hours"``: ``decay ** hours since last access`` (the paper's definition; default);
- ``"rank"``: ``decay ** position`` when ordered by last access, most recent first;
- ``"reverie"``: the original code exactly: candidates (events newest first, then thoughts
  newest first) stable-sorted by last access *ascending*, the i-th getting ``decay ** (i+1)``,
  so the oldest access scores highest.

Ties keep the candidate order of the original: by last access ascending, then events before
thoughts, then newest first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from langchain_genmem.core.modes import (
    RECENCY_MODES,
    RELEVANCE_MODES,
    RecencyMode,
    RelevanceMode,
)
from langchain_genmem.core.state import DEFAULT_LEXICAL_WEIGHT
from langchain_genmem.numerics.buffers import scratch

__all__ = [  # the modes are core.modes'; importable from here as before
    "RECENCY_MODES",
    "RELEVANCE_MODES",
    "RecencyMode",
    "RelevanceMode",
]

DEFAULT_GAINS = (0.5, 3.0, 2.0)
POIGNANCY_SCALE = 10.0
"""What poignancy is divided by on the absolute scale (ratings run from 1 to 10)."""

Scale = Literal["candidates", "absolute"]
"""How a ranking puts its components on one scale before weighting them.

``"candidates"``: min-max over the candidates of each retrieval, the paper's and the
original's rule (each component spans [0, 1] among the memories ranked; a score means
something only next to the scores of the same retrieval). ``"absolute"``: fixed scales,
the same for every retrieval, so scores compare across retrievals: recency as computed
(``decay ** hours``, in (0, 1]), importance as ``poignancy / 10``, dense relevance as the
cosine itself, lexical relevance as the share of the query's attainable BM25 (see
:meth:`~langchain_genmem.numerics.lexical.LexicalIndex.attainable`), fused with the same
lexical weight."""
# float64 rounding of a score, relative to the largest score
SCORE_MARGIN = 1e-12
# bound on float32 "hours" recency against float64's (approximate_recency); seen below 2**-22
RECENCY_ERROR = 2.0**-18
# rank recomputes every recency exactly when its error is this large against their spread
_RECENCY_SHARE = 1e-3


@dataclass(frozen=True)
class Weights:
    """How the three components are combined.

    Attributes:
        recency_w: persona weight of recency.
        relevance_w: persona weight of relevance.
        importance_w: persona weight of importance.
        gains: the global gains (the original's ``gw = [0.5, 3, 2]``).
    """

    recency_w: float = 1.0
    relevance_w: float = 1.0
    importance_w: float = 1.0
    gains: tuple[float, float, float] = DEFAULT_GAINS


@dataclass(frozen=True)
class Candidates:
    """The columns scoring reads, one entry per candidate, in any order.

    Attributes:
        last_accessed: epoch seconds of last access.
        type_code: 0 for events, 1 for thoughts.
        node_count: the node numbers (newer is larger).
        poignancy: raw importance.
        cosine: raw cosine similarity to the query.
    """

    last_accessed: np.ndarray
    type_code: np.ndarray
    node_count: np.ndarray
    poignancy: np.ndarray
    cosine: np.ndarray

    def __len__(self) -> int:
        return int(self.cosine.shape[0])


@dataclass(frozen=True)
class Scored:
    """Components and final scores of every candidate (indices as in Candidates).

    Attributes:
        recency: normalised recency.
        relevance: normalised relevance.
        importance: normalised importance.
        score: the weighted sum.
    """

    recency: np.ndarray
    relevance: np.ndarray
    importance: np.ndarray
    score: np.ndarray


def cosine(vectors: np.ndarray, inv_norms: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Cosine similarity of each row to the query, in the vectors' precision.

    Args:
        vectors: (n, d) matrix (float32 or float64).
        inv_norms: (n,) float64 inverse row norms (0 for a zero row).
        query: (d,) vector.

    Returns:
        (n,) float64 similarities; see :func:`cosine_error` for their accuracy.
    """
    q = np.asarray(query, dtype=np.float64)
    q_norm = float(np.linalg.norm(q))
    if vectors.shape[0] == 0 or q_norm == 0.0:
        return np.zeros(vectors.shape[0])
    dots = vectors @ (q / q_norm).astype(vectors.dtype)
    return np.multiply(dots, inv_norms, dtype=np.float64)


def inverse_norms(norms: np.ndarray) -> np.ndarray:
    """``1 / norms``, with 0 where a norm is 0.

    Args:
        norms: row norms.

    Returns:
        The inverses.
    """
    out = np.zeros_like(norms, dtype=np.float64)
    np.divide(1.0, norms, out=out, where=norms != 0)
    return out


def exact_cosine(vectors: np.ndarray, norms: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Cosine similarity in float64, as the original computes it: ``a.b / (|a| |b|)``.

    Each row's value depends on that row alone (an elementwise product summed along the row,
    not a BLAS product whose blocking varies with the number of rows), so equal rows get
    equal values and refining a row twice gives the same value.

    Args:
        vectors: (m, d) rows to score.
        norms: (m,) their norms.
        query: (d,) vector.

    Returns:
        (m,) similarities.
    """
    q = np.asarray(query, dtype=np.float64)
    dots = np.multiply(vectors, q, dtype=np.float64).sum(axis=1)
    return _divide(dots, norms * float(np.linalg.norm(q)))


def cosine_error(dim: int, dtype: np.dtype) -> float:
    """A bound on ``|cosine(...) - exact_cosine(...)|`` for one row.

    A float32 dot product of n terms is off by at most ``n u / (1 - n u)`` times
    ``|a| |b|`` (u = 2**-24), one more ``u`` for rounding the query; float64 is exact enough.

    Args:
        dim: the vector size.
        dtype: the matrix dtype.

    Returns:
        The bound (0.0 for float64).
    """
    if np.dtype(dtype) == np.float64:
        return 0.0
    nu = (dim + 2) * 2.0**-24
    return nu / (1.0 - nu)


def _divide(dots: np.ndarray, norms: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        out = dots / norms
    out[~np.isfinite(out)] = 0.0
    return out


def minmax(
    values: np.ndarray,
    bounds: tuple[float, float] | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Min-max normalise to [0, 1]; all 0.5 when the values are equal (the original's rule).

    Args:
        values: the raw values.
        bounds: ``(values.min(), values.max())`` when the caller has them already.
        out: a float64 array to write into (``values`` itself to normalise in place).

    Returns:
        The normalised values.
    """
    if values.size == 0:
        return values.astype(np.float64)
    lo, hi = (float(values.min()), float(values.max())) if bounds is None else bounds
    span = hi - lo
    if span == 0:
        return np.full(values.shape, 0.5)
    out = np.subtract(values, lo, out=out, dtype=np.float64)
    out /= span  # the original's "* (1 - 0) / span + 0": multiplying by 1, adding 0 are exact
    return out


def normalise_lexical(bm25: np.ndarray) -> np.ndarray:
    """The lexical part of relevance: BM25 min-max normalised like every other component.

    BM25 is 0 for a memory holding no query term, so over a persona's memories the minimum
    is nearly always 0 and this equals dividing by the maximum (compared in
    ``benchmarks/bench_fusion.py``); all 0.5 when every score is equal (a query with no
    known term).

    Args:
        bm25: raw BM25 of each candidate.

    Returns:
        The normalised values.
    """
    return minmax(bm25)


def lexical_share(
    mode: RelevanceMode, lexical_weight: float, dense_constant: bool, lexical_constant: bool
) -> float:
    """The weight of the lexical part in the relevance actually used.

    ``"dense"`` is 0 and ``"lexical"`` 1. ``"hybrid"`` is ``lexical_weight``, except when a
    part says nothing: equal lexical scores for every candidate (no query term occurs in any
    memory) leave the dense part alone (0), equal cosines leave the lexical part alone (1),
    so a hybrid retrieval never flattens relevance against recency and importance for a
    signal that cannot tell the candidates apart.

    Args:
        mode: the relevance mode.
        lexical_weight: the hybrid's lexical weight, in [0, 1].
        dense_constant: every candidate has the same cosine.
        lexical_constant: every candidate has the same BM25 score.

    Returns:
        The share, in [0, 1].
    """
    if mode == "dense":
        return 0.0
    if mode == "lexical":
        return 1.0
    if mode != "hybrid":
        msg = f"relevance: expected one of {RELEVANCE_MODES}, got {mode!r}"
        raise ValueError(msg)
    if lexical_constant:
        return 0.0
    if dense_constant:
        return 1.0
    return float(lexical_weight)


def mix(dense_norm: np.ndarray, lexical_norm: np.ndarray | None, share: float) -> np.ndarray:
    """``(1 - share) * dense_norm + share * lexical_norm``, elementwise (so exact on any subset).

    Args:
        dense_norm: normalised dense relevance.
        lexical_norm: normalised lexical relevance (unused when ``share`` is 0).
        share: the lexical share from :func:`lexical_share`.

    Returns:
        ``dense_norm`` itself when ``share`` is 0 (the original's relevance, bit for bit),
        else a new array.
    """
    if share == 0.0 or lexical_norm is None:
        return dense_norm
    if share == 1.0:
        return np.array(lexical_norm, dtype=np.float64)
    out = np.multiply(dense_norm, 1.0 - share)
    out += np.multiply(lexical_norm, share)
    return out


def fuse_relevance(
    dense_norm: np.ndarray,
    lexical_norm: np.ndarray | None,
    mode: RelevanceMode,
    lexical_weight: float,
) -> np.ndarray:
    """The relevance component: dense, lexical, or their convex combination (one formula).

    ``hybrid = (1 - w) * dense + w * lexical`` over min-max normalised parts (each in
    [0, 1], so the fused value is too), with ``w`` from :func:`lexical_share` (a part equal
    for every candidate is left out). Chosen by measurement over rank fusion and a
    max-normalised lexical part (``benchmarks/bench_fusion.py``). The retriever and weight
    fitting both call this; :func:`rank` computes the same values.

    Args:
        dense_norm: ``minmax(cosine)`` of every candidate.
        lexical_norm: :func:`normalise_lexical` of their BM25 (None for ``"dense"``).
        mode: ``"dense"``, ``"lexical"`` or ``"hybrid"``.
        lexical_weight: ``w``, in [0, 1].

    Returns:
        The normalised relevance of every candidate.
    """
    share = lexical_share(mode, lexical_weight, _constant(dense_norm), _constant(lexical_norm))
    return mix(dense_norm, lexical_norm, share)


def _constant(values: np.ndarray | None) -> bool:
    return values is None or values.size == 0 or float(values.min()) == float(values.max())


def tie_order(c: Candidates) -> np.ndarray:
    """Indices of the candidates in the original's candidate order.

    The original lists events newest first, then thoughts newest first, and stable-sorts
    that list by last access ascending.

    Args:
        c: the candidates.

    Returns:
        The permutation.
    """
    return np.lexsort((-c.node_count, c.type_code, c.last_accessed))


def recency(
    c: Candidates,
    mode: RecencyMode,
    decay: float,
    now: float,
    order: np.ndarray | None = None,
) -> np.ndarray:
    """Raw (not normalised) recency of each candidate.

    Args:
        c: the candidates.
        mode: ``"hours"``, ``"rank"`` or ``"reverie"``.
        decay: the decay factor.
        now: the current time, epoch seconds.
        order: for ``"reverie"``, :func:`tie_order` when the caller keeps it already
            (the stream's cache does, patched between retrievals).

    Returns:
        The recency values.
    """
    n = len(c)
    if mode == "hours":
        exponent = _hours_exponent(c.last_accessed, decay, now)
        return np.exp(exponent, out=exponent)  # decay ** hours, one vectorised exp
    if mode == "reverie":
        order = tie_order(c) if order is None else order
    elif mode == "rank":
        order = np.lexsort((-c.node_count, -c.last_accessed))
    else:
        msg = f"recency_mode: expected one of {RECENCY_MODES}, got {mode!r}"
        raise ValueError(msg)
    out = np.empty(n)
    out[order] = _powers(decay, n)
    return out


def _hours_exponent(last_accessed: np.ndarray, decay: float, now: float) -> np.ndarray:
    """``log(decay) * hours since last access`` (accesses after now count as now), a new array.

    Elementwise, so a row's value is the same whichever rows are asked with it.
    """
    hours = np.subtract(now, last_accessed)  # one array, updated in place
    if hours.size and hours.min() < 0:
        np.maximum(hours, 0.0, out=hours)
    hours *= np.log(decay) / 3600.0
    return hours


def approximate_recency(
    c: Candidates,
    mode: RecencyMode,
    decay: float,
    now: float,
    order: np.ndarray | None = None,
) -> tuple[np.ndarray, float, Callable[[np.ndarray], np.ndarray]]:
    """Raw recency of every candidate to within a bound, and the exact values of any rows.

    :func:`rank` needs exact recency only for the rows it scores exactly. ``"hours"`` with
    ``0 < decay < 1`` is ``exp(x)`` with ``x <= 0``: float32's exp of ``x`` computed in
    float32 is off from float64's by at most ``e^x (3 |x| 2^-24 + a few float32 ulps)``, below
    ``2^-23 + 2^-20``, so :data:`RECENCY_ERROR` holds with a wide margin (float64's exp
    of a million rows costs three times float32's on CPUs without AVX-512). Other modes are
    exact (error 0).

    Args:
        c: the candidates.
        mode: ``"hours"``, ``"rank"`` or ``"reverie"``.
        decay: the decay factor.
        now: the current time, epoch seconds.
        order: as for :func:`recency`.

    Returns:
        ``(values, error, exact)``: approximations, a bound on each one's distance from
        :func:`recency`'s value, and a function giving :func:`recency`'s values of the
        given candidate indices.
    """
    if mode != "hours" or not 0.0 < decay < 1.0:
        values = recency(c, mode, decay, now, order)
        return values, 0.0, values.__getitem__
    # hours in float64 (epoch seconds need it), stored and scaled in float32: x is off by at
    # most three float32 roundings, e^x 3 |x| 2^-24 <= 2^-23 after the exp
    approx = np.subtract(now, c.last_accessed, out=np.empty(len(c), np.float32),
                         casting="same_kind")
    if approx.size and approx.min() < 0:  # accesses after now count as now
        np.maximum(approx, 0.0, out=approx)
    approx *= np.float32(np.log(decay) / 3600.0)

    def exact(idx: np.ndarray) -> np.ndarray:
        exponent = _hours_exponent(c.last_accessed[idx], decay, now)
        return np.exp(exponent, out=exponent)

    return np.exp(approx, out=approx), RECENCY_ERROR, exact


_POWERS: dict[float, np.ndarray] = {}


def _powers(decay: float, n: int) -> np.ndarray:
    """``decay ** [1..n]``, kept per decay (np.power is elementwise: a prefix is the same)."""
    held = _POWERS.get(decay)
    if held is None or held.shape[0] < n:
        if len(_POWERS) > 8:
            _POWERS.clear()
        held = np.power(decay, np.arange(1, max(n, 1024) + 1, dtype=np.float64))
        held.flags.writeable = False
        _POWERS[decay] = held
    return held[:n]


def score(
    c: Candidates, rec: np.ndarray, w: Weights, importance: np.ndarray | None = None
) -> Scored:
    """Normalise the three components and combine them.

    The arithmetic is the original's, term by term (``w * value * gain``), so that equal
    scores there are equal here.

    Args:
        c: the candidates.
        rec: raw recency from :func:`recency`.
        w: the weights.
        importance: ``minmax(c.poignancy)`` when the caller already has it.

    Returns:
        The components and scores.
    """
    i = minmax(c.poignancy) if importance is None else importance
    r, v = minmax(rec), minmax(c.cosine)
    return Scored(recency=r, relevance=v, importance=i, score=combine(r, v, i, w))


def combine(r: np.ndarray, v: np.ndarray, i: np.ndarray, w: Weights) -> np.ndarray:
    """``recency_w*r*g0 + relevance_w*v*g1 + importance_w*i*g2``, in the original's order.

    Args:
        r: normalised recency.
        v: normalised relevance.
        i: normalised importance.
        w: the weights.

    Returns:
        The scores.
    """
    total = _term(r, w.recency_w, w.gains[0])
    with scratch(total.shape[0]) as temp:  # one temporary for the other two terms
        total += _term(v, w.relevance_w, w.gains[1], temp)
        total += _term(i, w.importance_w, w.gains[2], temp)
    return total


def _term(
    values: np.ndarray, weight: float, gain: float, out: np.ndarray | None = None
) -> np.ndarray:
    if weight == 1.0:  # (x * 1.0) * g == x * g exactly: skip a pass
        return np.multiply(values, gain, out=out)
    out = np.multiply(values, weight, out=out)
    out *= gain
    return out


def top_k(
    scores: np.ndarray, c: Candidates, k: int, among: np.ndarray | None = None
) -> np.ndarray:
    """Indices of the k best candidates, best first; ties in the original's candidate order.

    Runs in linear time plus a sort of the k (and any boundary ties).

    Args:
        scores: final scores of every candidate.
        c: the candidates (for tie order).
        k: how many.
        among: consider only these candidate indices (default: all).

    Returns:
        Candidate indices.
    """
    values = scores if among is None else scores[among]
    n = values.shape[0]
    if k <= 0 or n == 0:
        return np.zeros(0, dtype=np.int64)
    pick = _at_least_kth(values, k) if k < n else np.arange(n)
    if among is not None:
        pick = among[pick]
    keys = (-c.node_count[pick], c.type_code[pick], c.last_accessed[pick], -scores[pick])
    return pick[np.lexsort(keys)][:k]


# top_k: from this many rows per block, the k-th best is bounded by block maxima first
_BLOCK_ROWS = 64


def _at_least_kth(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the values at least the k-th largest (0 < k < len), in index order.

    The k-th largest of ``m >= k`` block maxima is at most the k-th largest value (k blocks
    each hold a value at least that large), so only the rows reaching it are partitioned:
    one pass over the values instead of a partition of a copy of all of them.
    """
    n = values.shape[0]
    blocks = 8 * k
    if n < _BLOCK_ROWS * blocks:
        return np.flatnonzero(values >= np.partition(values, n - k)[n - k])
    maxima = values[: n - n % blocks].reshape(blocks, -1).max(axis=1)
    pick = np.flatnonzero(values >= np.partition(maxima, blocks - k)[blocks - k])
    held = values[pick]
    return pick[held >= np.partition(held, held.shape[0] - k)[held.shape[0] - k]]


@dataclass(frozen=True)
class Ranking:
    """The outcome of :func:`rank`.

    Attributes:
        best: candidate indices of the top k, best first.
        scored: components and scores of every candidate, exact for ``best`` and for every
            row that could hold the lowest score; ``scored.relevance`` is the fused relevance
            actually used. From approximate cosines, the other rows' scores are
            approximations and their recency, relevance and dense part are not computed
            (0): a million rows are never normalised column by column.
        cosine: raw cosine of every candidate (exact for ``best``; all 0 when the mode
            needs no dense part and none was given).
        dense: the normalised dense part (exact for ``best``).
        lexical: the normalised lexical part (None without lexical scores).
        bm25: the raw lexical scores (None without them).
        share: the lexical share used (:func:`lexical_share`).
    """

    best: np.ndarray
    scored: Scored
    cosine: np.ndarray
    dense: np.ndarray | None = None
    lexical: np.ndarray | None = None
    bm25: np.ndarray | None = None
    share: float = 0.0


def rank(
    c: Candidates,
    raw_recency: np.ndarray,
    w: Weights,
    k: int,
    exact: Callable[[np.ndarray], np.ndarray],
    error: float,
    importance: np.ndarray | None = None,
    *,
    overwrite: bool = False,
    relevance: RelevanceMode = "dense",
    lexical_weight: float = DEFAULT_LEXICAL_WEIGHT,
    bm25: np.ndarray | None = None,
    bonus: np.ndarray | None = None,
    recency_error: float = 0.0,
    exact_recency: Callable[[np.ndarray], np.ndarray] | None = None,
    scale: Scale = "candidates",
    lexical_max: float = 0.0,
) -> Ranking:
    """Exact top k from fast approximate cosines, refining only where it can matter.

    ``c.cosine`` may be off by up to ``error`` (float32 arithmetic, or int8 codes:
    :mod:`langchain_genmem.numerics.quantized`). The candidates that
    could hold the minimum or maximum cosine are recomputed exactly first, so normalisation
    is exact; then every candidate whose score could reach the k-th best is recomputed
    exactly, and the top k is chosen among those. The result equals scoring everything in
    float64, at the cost of one approximate pass and a few exact rows.

    Why it is exact: with ``a`` the approximations and ``e`` the bound, the true minimum is
    at most ``min(a) + e``, so only rows with ``a <= min(a) + 2e`` can hold it (likewise for
    the maximum). Once those are exact, a row's approximate score is off by at most
    ``d = relevance weight * gain * (1 - s) * e / span``, with ``s`` the lexical share
    (:func:`lexical_share`; 0 for ``"dense"``): the lexical part (``bm25``) is exact float64
    and enters relevance as ``s * lexical``, the dense part as ``(1 - s) * dense``. The true
    k-th best is at least the approximate k-th best minus ``d``, so a row whose approximate
    score is below that by more than ``d`` cannot be in the top k (plus a margin for
    float64 rounding). With ``s = 1`` (``"lexical"``) no cosine matters and none is refined.

    Args:
        c: the candidates, with approximate cosines.
        raw_recency: raw recency from :func:`recency`.
        w: the weights.
        k: how many.
        exact: exact cosines of the given candidate indices.
        error: bound on each approximate cosine's error (0 when already exact).
        importance: ``minmax(c.poignancy)`` when the caller already has it.
        overwrite: ``c.cosine`` and ``raw_recency`` are the caller's scratch: the ranking
            takes them over (refined and normalised in place) instead of copying them.
        relevance: ``"dense"`` (default), ``"lexical"`` or ``"hybrid"``
            (:func:`fuse_relevance`).
        lexical_weight: the hybrid's lexical weight.
        bm25: exact raw BM25 of every candidate (needed unless ``relevance="dense"``).
        bonus: exact amounts added to each candidate's score (a retrieval's preference for
            memories of the period its question names); None adds nothing.
        recency_error: bound on each ``raw_recency`` value's error (0 when exact), as
            :func:`approximate_recency` gives it; bounded like the cosines.
        exact_recency: the exact raw recency of given candidate indices (needed with
            ``recency_error``).
        scale: ``"candidates"`` (min-max over the candidates) or ``"absolute"`` (fixed
            scales: :data:`Scale`). On the absolute scale ``importance``, when given, must
            be ``poignancy / POIGNANCY_SCALE``, and the hybrid's lexical weight is used as
            given (no part is dropped for being equal over the candidates).
        lexical_max: on the absolute scale, the query's attainable BM25 (0: no query term is
            known, every lexical part is 0).

    Returns:
        The ranking.

    Raises:
        ValueError: a lexical or hybrid ranking without ``bm25``, or an unknown mode.
    """
    if relevance != "dense" and bm25 is None:
        msg = f"relevance={relevance!r} needs the candidates' bm25 scores"
        raise ValueError(msg)
    absolute = scale == "absolute"
    lexical = None if relevance == "dense" else (
        _lexical_share_of(bm25, lexical_max) if absolute else normalise_lexical(bm25))  # type: ignore[arg-type]
    cos = c.cosine if overwrite else c.cosine.copy()
    refined = np.zeros(cos.shape, dtype=bool)
    if absolute:  # fixed scales: no extreme need be exact
        bounds, fixed_recency = (0.0, 1.0), (0.0, 1.0)
        share = lexical_share(relevance, lexical_weight, False, False)
        i = c.poignancy / POIGNANCY_SCALE if importance is None else importance
    else:
        bounds = _exact_bounds(cos, refined, exact, error if relevance != "lexical" else 0.0)
        fixed_recency = None
        share = lexical_share(relevance, lexical_weight, bounds[0] == bounds[1],
                              _constant(lexical))
        i = minmax(c.poignancy) if importance is None else importance
    cands = replace(c, cosine=cos)
    lo, span = bounds[0], bounds[1] - bounds[0]
    if error and share != 1.0 and span and k >= len(c):  # every row is in the top k
        _refine(cos, refined, np.arange(cos.size), exact)
        error = 0.0
    if error and share != 1.0 and span:
        return _rank_from_bounds(cands, raw_recency, i, w, k, exact, error, refined, bounds,
                                 lexical, share, bm25, bonus,
                                 (recency_error, exact_recency),  # type: ignore[arg-type]
                                 fixed_recency)
    if recency_error:
        raw_recency = exact_recency(np.arange(len(c)))  # type: ignore[misc]
    # every cosine that scores is exact: score every row as the original does
    r = minmax(raw_recency, fixed_recency, out=raw_recency if overwrite else None)
    d = minmax(cos, bounds)
    v = mix(d, lexical, share)
    total = combine(r, v, i, w)
    if bonus is not None:
        total += bonus
    best = top_k(total, cands, k)
    if error and span:  # lexical relevance alone: only the reported cosines are refined
        fresh = _refine(cos, refined, best, exact)
        d[fresh] = (cos[fresh] - lo) / span
    return Ranking(best, Scored(recency=r, relevance=v, importance=i, score=total), cos, d,
                   lexical, bm25, share)


def _rank_from_bounds(
    c: Candidates,
    raw_recency: np.ndarray,
    i: np.ndarray,
    w: Weights,
    k: int,
    exact: Callable[[np.ndarray], np.ndarray],
    error: float,
    refined: np.ndarray,
    bounds: tuple[float, float],
    lexical: np.ndarray | None,
    share: float,
    bm25: np.ndarray | None,
    bonus: np.ndarray | None,
    recency: tuple[float, Callable[[np.ndarray], np.ndarray]],
    fixed_recency: tuple[float, float] | None = None,
) -> Ranking:
    """:func:`rank` from approximate cosines whose extremes are exact (``span > 0``, ``k < n``).

    Every score is first approximated in one fused pass per term (never normalising a
    whole column); the rows whose approximation could reach the k-th best or the lowest
    score are then scored exactly, term by term as the original does. The approximation of
    a row is off by at most ``|relevance weight * gain * (1 - s) / span| * error`` (its
    cosine) plus float64 rounding, so the bound of :func:`rank` holds unchanged. Approximate
    recency (``recency``: its error and exact values) is bounded the same way: its extremes
    made exact first, then ``|recency weight * gain / spread| * error`` more per row.
    """
    cos, n = c.cosine, len(c)
    lo, span = bounds[0], bounds[1] - bounds[0]
    recency_error, exact_recency = recency
    if fixed_recency is not None:  # the absolute scale: recency as it is
        r_lo, r_hi = fixed_recency
    elif recency_error:
        low, high = _extreme_rows(raw_recency, recency_error)
        r_lo, r_hi = float(exact_recency(low).min()), float(exact_recency(high).max())
    else:
        r_lo, r_hi = float(raw_recency.min()), float(raw_recency.max())
    r_span = r_hi - r_lo
    if recency_error and recency_error > _RECENCY_SHARE * r_span:  # too coarse: all exact
        raw_recency, recency_error = exact_recency(np.arange(n)), 0.0
    gains = (w.recency_w * w.gains[0], w.relevance_w * w.gains[1], w.importance_w * w.gains[2])
    dense_gain = gains[1] * (1.0 - share) / span
    total = np.multiply(cos, dense_gain)
    constant = -lo * dense_gain
    with scratch(n) as temp:
        if r_span:
            total += np.multiply(raw_recency, gains[0] / r_span, out=temp, dtype=np.float64)
            constant -= r_lo * gains[0] / r_span
        else:
            constant += 0.5 * gains[0]
        total += np.multiply(i, gains[2], out=temp)
        if share:
            assert lexical is not None  # a lexical share is only taken with lexical scores
            total += np.multiply(lexical, gains[1] * share, out=temp)
    if bonus is not None:
        total += bonus
    total += constant
    # rounding of the fused sum against the original's: both within a few ulps of the largest
    # term (a term and the constant can nearly cancel, so each counts at its own size)
    size = (abs(dense_gain) * (max(abs(lo), abs(bounds[1])) + error + abs(lo))
            + abs(gains[0]) * ((abs(r_lo) + abs(r_hi)) / r_span if r_span else 0.5)
            + abs(gains[2]) + abs(gains[1] * share)  # importance and lexical are in [0, 1]
            + (float(np.abs(bonus).max()) if bonus is not None else 0.0))
    recency_slack = abs(gains[0]) * recency_error / r_span if recency_error else 0.0
    slack = 2 * (abs(dense_gain) * error + recency_slack + SCORE_MARGIN * (1.0 + size))
    r, d = np.zeros(n), np.zeros(n)  # pages of zeros cost nothing until written
    v = d if share == 0 else np.zeros(n)

    def rescore(idx: np.ndarray) -> None:
        """Score the rows ``idx`` exactly, as :func:`score` would with exact cosines."""
        _refine(cos, refined, idx, exact)
        raw = exact_recency(idx) if recency_error else raw_recency[idx]
        r[idx] = minmax(raw, (r_lo, r_hi)) if r_span else 0.5
        d[idx] = (cos[idx] - lo) / span
        if share:
            v[idx] = mix(d[idx], lexical[idx], share)  # type: ignore[index]
        total[idx] = combine(r[idx], v[idx], i[idx], w) + (0.0 if bonus is None else bonus[idx])

    best = np.zeros(0, dtype=np.int64)
    if k > 0:
        kth = float(total[_at_least_kth(total, k)].min())
        near = np.flatnonzero(total >= kth - slack)
        rescore(near)
        best = top_k(total, c, k, among=near)
    # the lowest score is reported (min_score): rows that could hold it are made exact too
    rescore(np.flatnonzero(total <= total.min() + slack))
    return Ranking(best, Scored(recency=r, relevance=v, importance=i, score=total), cos, d,
                   lexical, bm25, share)


def _lexical_share_of(bm25: np.ndarray, attainable: float) -> np.ndarray:
    """Each candidate's BM25 as a share of the query's attainable BM25 (all 0 without one)."""
    if attainable <= 0:
        return np.zeros(bm25.shape[0])
    return np.asarray(bm25, dtype=np.float64) / attainable


def _exact_bounds(
    cos: np.ndarray,
    refined: np.ndarray,
    exact: Callable[[np.ndarray], np.ndarray],
    error: float,
) -> tuple[float, float]:
    """The exact minimum and maximum cosine, refining the rows that could hold them.

    With ``a`` the approximations, the true minimum is at most ``min(a) + error``, and a row
    with ``a > min(a) + 2 error`` is above it, so the minimum is among the rows refined here
    and is the least of their exact values (likewise for the maximum): no second pass over
    every row.
    """
    if cos.size == 0:
        return 0.0, 0.0
    if error <= 0:
        return float(cos.min()), float(cos.max())
    low, high = _extreme_rows(cos, error)
    _refine(cos, refined, np.union1d(low, high), exact)
    return float(cos[low].min()), float(cos[high].max())


def _extreme_rows(values: np.ndarray, error: float) -> tuple[np.ndarray, np.ndarray]:
    """The rows that could hold the minimum and the maximum of values known to ``error``."""
    lo, hi = float(values.min()), float(values.max())
    return np.flatnonzero(values <= lo + 2 * error), np.flatnonzero(values >= hi - 2 * error)


def _refine(
    cos: np.ndarray, refined: np.ndarray, idx: np.ndarray, exact: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """Replace approximate cosines at ``idx`` by exact ones, once per row; return the new rows."""
    fresh = idx[~refined[idx]]
    if fresh.size:
        cos[fresh] = exact(fresh)
        refined[fresh] = True
    return fresh
