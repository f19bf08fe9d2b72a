"""The fast first pass of exact retrieval: approximate cosines with a per-row error bound.

Every query scores every memory. The exact top k (:func:`langchain_genmem.numerics.scoring.rank`)
only needs *approximate* cosines with a guaranteed bound on their error: it recomputes in
float64 the rows that could hold the minimum or maximum cosine or reach the k-th best score.
This module gives the approximations, by one of two passes chosen at run time:

- **int8** (when the compiled ``simsimd`` package is installed, the default): each stored
  row ``v`` is kept as int8 codes ``c`` with a scale ``s`` (``v = s c + e``), the unit query
  ``q`` likewise (``q = t p + f``), and ``v.q`` is approximated by ``s t (c.p)``, the integer
  product computed exactly by simsimd's SIMD kernels (a quarter of float32's memory traffic,
  one thread). Since ``v.q - s t (c.p) = v.f + e.q - e.f``, the error is at most
  ``|v| |f| + |e| + |e| |f|`` (Cauchy-Schwarz), so in cosine units
  ``|f| + (|e| / |v|) (1 + |f|)``; ``|f|`` is known per query and the largest ``|e| / |v|``
  is kept by the cache, giving one bound for every row (plus a margin for float64
  rounding). Rows whose int8 codes are poor (one huge entry) widen the bound for all: the
  result stays exact, only more rows are rescored.
- **float32** (without simsimd): the float32 matrix-vector product with BLAS held to one
  thread (threadpoolctl), since with another process busy on the second core a two-thread
  product costs a near-fixed 8 ms at any size; error bound
  :func:`langchain_genmem.numerics.scoring.cosine_error`.

Both passes run on one core, so a busy machine slows a query by the share of one core it
gets, not by a BLAS thread waiting for a core.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from langchain_genmem.numerics.scoring import cosine, cosine_error

LEVELS = 127
# float64 rounding in the scale products and norms, far below any int8 or float32 error
ROUNDING_MARGIN = 1e-9
# Rows from which the int8 pass is used; below, the float32 product is as fast and its
# tighter bound refines fewer rows. GENMEM_INT8_MIN_ROWS overrides (0: always int8).
INT8_MIN_ROWS = int(os.environ.get("GENMEM_INT8_MIN_ROWS", "4096"))


def _load_simsimd() -> Any:
    try:
        import simsimd
    except ImportError:  # pragma: no cover - simsimd is a dependency; numpy is the fallback
        return None
    return simsimd


def _load_blas_limit() -> Callable[[], Any] | None:
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        return None
    controller = ThreadpoolController()
    return lambda: controller.limit(limits=1, user_api="blas")


_SIMSIMD = _load_simsimd()
_ONE_BLAS_THREAD = _load_blas_limit()


def int8_available() -> bool:
    """Whether the int8 pass can run (simsimd is installed).

    Returns:
        True when simsimd was imported.
    """
    return _SIMSIMD is not None


@dataclass(frozen=True)
class Codes:
    """int8 codes of a block of rows: ``row ~ scale * codes``, ``|row - scale*codes| = residual``.

    Attributes:
        codes: (m, d) int8.
        scale: (m,) float64 per-row scale (0 for a zero row).
        residual: (m,) float64 norm of each row's quantisation error.
    """

    codes: np.ndarray
    scale: np.ndarray
    residual: np.ndarray


def quantize(block: np.ndarray) -> Codes:
    """int8 codes of rows, each scaled so its largest entry maps to +-127.

    Args:
        block: (m, d) rows (float32 or float64).

    Returns:
        The codes, scales and residual norms.
    """
    rows = np.asarray(block, dtype=np.float64)
    peak = np.abs(rows).max(axis=1) if rows.shape[1] else np.zeros(rows.shape[0])
    scale = peak / LEVELS
    inv = np.zeros_like(scale)
    np.divide(1.0, scale, out=inv, where=scale > 0)
    codes = np.clip(np.rint(rows * inv[:, None]), -LEVELS, LEVELS).astype(np.int8)
    residual = np.linalg.norm(rows - codes * scale[:, None], axis=1)
    return Codes(codes, scale, residual)


def approximate_cosine(
    cache: Any, n: int, query: np.ndarray, *, int8: bool | None = None
) -> tuple[np.ndarray, float]:
    """Approximate cosines of the first ``n`` cached rows to ``query``, with their error bound.

    Args:
        cache: a :class:`~langchain_genmem.memory.cache.NodeCache` (vectors, inverse norms, int8
            codes, ``unit_scale`` and ``max_relative_residual``).
        n: how many rows.
        query: (d,) query vector.
        int8: force the int8 pass (True) or the float32 one (False); None chooses by size
            and by whether simsimd is installed.

    Returns:
        ``(cosines, error)``: float64 cosines and a bound on any one's distance from
        :func:`~langchain_genmem.numerics.scoring.exact_cosine`.
    """
    use_int8 = (n >= INT8_MIN_ROWS and _SIMSIMD is not None) if int8 is None else int8
    if use_int8 and _SIMSIMD is not None:
        return _int8_cosine(cache, n, np.asarray(query, dtype=np.float64))
    vectors = cache.vectors[:n]
    if _ONE_BLAS_THREAD is None:  # pragma: no cover
        values = cosine(vectors, cache.inv_norms[:n], query)
    else:
        with _ONE_BLAS_THREAD():
            values = cosine(vectors, cache.inv_norms[:n], query)
    return values, cosine_error(vectors.shape[1], vectors.dtype)


def _int8_cosine(cache: Any, n: int, query: np.ndarray) -> tuple[np.ndarray, float]:
    q_norm = float(np.linalg.norm(query))
    if n == 0 or q_norm == 0.0:
        return np.zeros(n), 0.0
    q = quantize((query / q_norm).reshape(1, -1))
    dots = np.asarray(
        _SIMSIMD.cdist(cache.codes[:n], q.codes, metric="dot"), dtype=np.float64
    ).reshape(n)
    dots *= cache.unit_scale[:n]  # s / |v| per row
    dots *= float(q.scale[0])
    f = float(q.residual[0])
    return dots, f + cache.max_relative_residual * (1.0 + f) + ROUNDING_MARGIN
