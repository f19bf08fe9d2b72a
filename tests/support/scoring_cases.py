"""Scoring cases shared by the scoring, int8, fast-rank and hybrid tests: candidate
columns, brute-force references and tie-heavy streams.
"""

from __future__ import annotations

from datetime import datetime
from types import SimpleNamespace

import numpy as np

from langchain_genmem import MemoryStream
from langchain_genmem.numerics.quantized import quantize
from langchain_genmem.numerics.scoring import (
    Candidates,
    Weights,
    exact_cosine,
    inverse_norms,
)

HOUR = 3600.0


NOW = 1_676_300_000.0  # 2023-02-13, an epoch like the fixtures'


CASES = [  # seed, n, dim, recency mode, weights
    (0, 300, 8, "hours", Weights()),
    (1, 2000, 384, "hours", Weights()),
    (2, 1500, 384, "reverie", Weights()),
    (3, 1000, 64, "rank", Weights(recency_w=0.0, importance_w=0.0)),  # relevance alone
    (4, 1200, 384, "hours", Weights(2.0, 0.25, 1.0, gains=(1.0, 1.0, 1.0))),
    (5, 800, 1536, "hours", Weights(importance_w=0.0)),
]


def columns(vectors: np.ndarray) -> SimpleNamespace:
    """What approximate_cosine reads of a NodeCache."""
    q = quantize(vectors)
    norms = np.linalg.norm(vectors.astype(np.float64), axis=1)
    inv = inverse_norms(norms)
    return SimpleNamespace(vectors=vectors, norms=norms, inv_norms=inv, codes=q.codes,
                           unit_scale=q.scale * inv,
                           max_relative_residual=float((q.residual * inv).max(initial=0.0)))


def repeated_stream(
    seed: int, n: int, shape: tuple[int, int], nudge: float, poignancy: int, query_row: int
) -> tuple[MemoryStream, np.ndarray]:
    """A stream of ``n`` memories over few distinct vectors (each nudged by multiples of
    ``nudge``), every 5th or 7th a thought, and a fake query embedding: tie-heavy data."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal(shape).astype(np.float32)
    stream = MemoryStream("p", clock=lambda: datetime(2024, 5, 1, 12))
    every = 7 if seed % 2 else 5
    stream.add_many([
        {"type": "event" if i % every else "thought", "description": f"记忆 {i}",
         "poignancy": int(rng.integers(1, poignancy)),
         "embedding": base[i % shape[0]] + nudge * (i % 3)}
        for i in range(n)
    ])
    query = base[query_row].astype(np.float64)
    stream._embeddings = SimpleNamespace(embed_query=lambda _: query.tolist())
    return stream, query


def cands(
    last_accessed,
    type_code=None,
    poignancy=None,
    cos=None,
    node_count=None,
) -> Candidates:
    n = len(last_accessed)
    return Candidates(
        last_accessed=np.asarray(last_accessed, dtype=np.float64),
        type_code=np.zeros(n, np.int8) if type_code is None else np.asarray(type_code, np.int8),
        node_count=np.arange(1, n + 1) if node_count is None else np.asarray(node_count),
        poignancy=np.ones(n) if poignancy is None else np.asarray(poignancy, np.float64),
        cosine=np.zeros(n) if cos is None else np.asarray(cos, np.float64),
    )


def tied(rng: np.random.Generator, n: int, accesses: int, **columns) -> Candidates:
    """Candidates in shuffled node order with only ``accesses`` distinct access times."""
    return cands(NOW - HOUR * rng.integers(0, accesses, n), type_code=rng.integers(0, 2, n),
                 node_count=rng.permutation(n) + 1, **columns)


def original_order(c: Candidates) -> list[int]:
    """seq_event + seq_thought (each newest first), stable-sorted by last access."""
    newest_first = sorted(range(len(c)), key=lambda i: -int(c.node_count[i]))
    events = [i for i in newest_first if c.type_code[i] == 0]
    thoughts = [i for i in newest_first if c.type_code[i] == 1]
    return sorted(events + thoughts, key=lambda i: float(c.last_accessed[i]))


def normalize(d: dict[int, float]) -> dict[int, float]:
    """normalize_dict_floats(d, 0, 1)."""
    lo, hi = min(d.values()), max(d.values())
    if hi - lo == 0:
        return {key: (1 - 0) / 2 for key in d}
    return {key: (v - lo) * (1 - 0) / (hi - lo) + 0 for key, v in d.items()}


def brute_force(c: Candidates, cos: list[float], rec: list[float], w: Weights, k: int,
                relevance: dict[int, float] | None = None):
    """Every candidate scored with Python floats; the top k as top_highest_x_values picks it.

    ``relevance`` replaces the normalised cosines (a fused relevance, test_hybrid)."""
    order = original_order(c)
    r = normalize({i: rec[i] for i in order})
    v = normalize({i: cos[i] for i in order}) if relevance is None else relevance
    imp = normalize({i: float(c.poignancy[i]) for i in order})
    g = w.gains
    master = {
        i: w.recency_w * r[i] * g[0] + w.relevance_w * v[i] * g[1] + w.importance_w * imp[i] * g[2]
        for i in order
    }
    best = [i for i, _ in sorted(master.items(), key=lambda kv: kv[1], reverse=True)[:k]]
    return best, master, r, v, imp


def random_candidates(seed: int, n: int, dim: int):
    """Float32 vectors with many exact duplicates and 1-ulp near-duplicates, few access
    times and poignancies: ties and near-ties in every component."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((max(3, n // 6), dim)).astype(np.float32)
    vectors = base[rng.integers(0, base.shape[0], n)]
    nudged = rng.random(n) < 0.2
    col = rng.integers(0, dim, n)
    vectors[nudged, col[nudged]] = np.nextafter(vectors[nudged, col[nudged]], np.float32(np.inf))
    vectors[rng.random(n) < 0.02] = 0.0  # a few zero vectors: cosine 0
    c = tied(rng, n, accesses=5, poignancy=rng.integers(1, 11, n))
    # the query is close to one stored vector, so relevance has a clear top and a long tail
    q = base[0].astype(np.float64) + 0.01 * rng.standard_normal(dim)
    return c, vectors, q


def exact_row(vectors: np.ndarray, norms: np.ndarray, q: np.ndarray):
    """exact_cosine one row at a time: a row's value is its own, whatever else is asked."""

    def exact(idx: np.ndarray) -> np.ndarray:
        return np.array([exact_cosine(vectors[i : i + 1], norms[i : i + 1], q)[0] for i in idx])

    return exact


def batch_exact(vectors: np.ndarray, norms: np.ndarray, q: np.ndarray):
    """exact_cosine of the asked rows in one call, as the retriever does."""
    return lambda idx: exact_cosine(vectors[idx], norms[idx], q)


def assert_brute_force(ranked, c, exact, raw, w, k):
    """``ranked`` is brute-force float64 scoring's top k, to the bit."""
    truth = exact(np.arange(len(c))).tolist()
    best, master, r, v, imp = brute_force(c, truth, raw.tolist(), w, k)
    assert ranked.best.tolist() == best
    for i in best:
        assert ranked.scored.score[i] == master[i]
        assert ranked.scored.relevance[i] == v[i]
        assert ranked.scored.recency[i] == r[i]
        assert ranked.scored.importance[i] == imp[i]
        assert ranked.cosine[i] == truth[i]
        assert 0.0 <= ranked.scored.relevance[i] <= 1.0


def replace_cos(c: Candidates, cos: np.ndarray) -> Candidates:
    return Candidates(c.last_accessed, c.type_code, c.node_count, c.poignancy, cos)


def stream_like(rng: np.random.Generator, n: int, dim: int, *, spread_hours: float):
    """Tie-heavy candidates: few vectors, few access times (some after NOW), few poignancies."""
    base = rng.standard_normal((max(1, n // 5), dim)).astype(np.float32)
    vectors = base[rng.integers(0, base.shape[0], n)]
    vectors[rng.random(n) < 0.03] = 0.0
    access = NOW - spread_hours * HOUR * rng.integers(-1, 4, n)  # -1: after now
    c = cands(access, type_code=rng.integers(0, 2, n), node_count=rng.permutation(n) + 1,
              poignancy=rng.integers(1, 4, n))
    return c, vectors, rng.standard_normal(dim)
