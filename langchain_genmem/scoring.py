"""Pure numpy scoring of the weighted retrieval (``new_retrieve``; seeds 000, 001, 003).

Every function here is pure and vectorised over the whole candidate set. The formula::

    score = recency_w * gains[0] * recency
          + relevance_w * gains[1] * relevance
          + importance_w * gains[2] * importance

with each component min-max normalised to [0, 1] over the candidates (all 0.5 when the
values are equal), relevance the cosine similarity to the query, importance the poignancy
and recency by mode:

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

RecencyMode = Literal["hours", "rank", "reverie"]
RECENCY_MODES: tuple[str, ...] = ("hours", "rank", "reverie")
DEFAULT_GAINS = (0.5, 3.0, 2.0)
# float64 rounding of a score, relative to the largest score
SCORE_MARGIN = 1e-12


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
        hours = np.subtract(now, c.last_accessed)  # one array, updated in place
        if hours.size and hours.min() < 0:  # accesses after now count as now
            np.maximum(hours, 0.0, out=hours)
        hours *= np.log(decay) / 3600.0
        return np.exp(hours, out=hours)  # decay ** hours, one vectorised exp
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
    scratch = np.empty_like(total)  # one temporary for the other two terms
    total += _term(v, w.relevance_w, w.gains[1], scratch)
    total += _term(i, w.importance_w, w.gains[2], scratch)
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
        scored: components and scores of every candidate (exact for ``best``).
        cosine: raw cosine of every candidate (exact for ``best``).
    """

    best: np.ndarray
    scored: Scored
    cosine: np.ndarray


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
) -> Ranking:
    """Exact top k from fast approximate cosines, refining only where it can matter.

    ``c.cosine`` may be off by up to ``error`` (float32 arithmetic, or int8 codes:
    :mod:`langchain_genmem.quantized`). The candidates that
    could hold the minimum or maximum cosine are recomputed exactly first, so normalisation
    is exact; then every candidate whose score could reach the k-th best is recomputed
    exactly, and the top k is chosen among those. The result equals scoring everything in
    float64, at the cost of one approximate pass and a few exact rows.

    Why it is exact: with ``a`` the approximations and ``e`` the bound, the true minimum is
    at most ``min(a) + e``, so only rows with ``a <= min(a) + 2e`` can hold it (likewise for
    the maximum). Once those are exact, a row's approximate score is off by at most
    ``d = relevance weight * gain * e / span``; the true k-th best is at least the
    approximate k-th best minus ``d``, so a row whose approximate score is below that by
    more than ``d`` cannot be in the top k (plus a margin for float64 rounding).

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

    Returns:
        The ranking.
    """
    cos = c.cosine if overwrite else c.cosine.copy()
    refined = np.zeros(cos.shape, dtype=bool)
    if error > 0 and cos.size:
        lo, hi = float(cos.min()), float(cos.max())
        edges = np.flatnonzero((cos <= lo + 2 * error) | (cos >= hi - 2 * error))
        _refine(cos, refined, edges, exact)
    cands = replace(c, cosine=cos)
    bounds = (float(cos.min()), float(cos.max())) if cos.size else (0.0, 0.0)
    r = minmax(raw_recency, out=raw_recency if overwrite else None)
    v = minmax(cos, bounds)
    i = minmax(c.poignancy) if importance is None else importance
    scored = Scored(recency=r, relevance=v, importance=i, score=combine(r, v, i, w))
    best = top_k(scored.score, cands, k)
    lo, span = bounds[0], bounds[1] - bounds[0]
    if error == 0 or best.size == 0 or span == 0:
        return Ranking(best, scored, cos)
    margin = SCORE_MARGIN * (1.0 + float(np.abs(scored.score[best]).max()))
    slack = 2 * abs(w.relevance_w * w.gains[1]) * error / span + margin

    def rescore(idx: np.ndarray) -> None:
        fresh = _refine(cos, refined, idx, exact)
        scored.relevance[fresh] = (cos[fresh] - lo) / span
        scored.score[fresh] = combine(
            scored.recency[fresh], scored.relevance[fresh], scored.importance[fresh], w
        )

    near = np.flatnonzero(scored.score >= scored.score[best[-1]] - slack)
    rescore(near)
    best = top_k(scored.score, cands, k, among=near)
    # the lowest score is reported (min_score): rows that could hold it are made exact too
    rescore(np.flatnonzero(scored.score <= scored.score.min() + slack))
    return Ranking(best, scored, cos)


def _refine(
    cos: np.ndarray, refined: np.ndarray, idx: np.ndarray, exact: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """Replace approximate cosines at ``idx`` by exact ones, once per row; return the new rows."""
    fresh = idx[~refined[idx]]
    if fresh.size:
        cos[fresh] = exact(fresh)
        refined[fresh] = True
    return fresh
