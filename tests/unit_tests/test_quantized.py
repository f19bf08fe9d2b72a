"""The int8 first pass: its error bound holds, and ranking on it is exact.

``rank`` over int8 approximations must give the same ids, order, components and scores as
float64 brute force (the original restated in Python floats, see test_scoring), on tie-heavy
data, on adversarial data whose cosines crowd the k-th best score and the extremes, and on
many seeded random streams (a property test).
"""

from __future__ import annotations

import numpy as np
import pytest

from langchain_genmem import GenerativeAgentsRetriever
from langchain_genmem.numerics.quantized import approximate_cosine, int8_available
from langchain_genmem.numerics.scoring import (
    Weights,
    exact_cosine,
    rank,
    recency,
    score,
)
from tests.support.scoring_cases import (
    CASES,
    NOW,
    assert_brute_force,
    batch_exact,
    columns,
    exact_row,
    random_candidates,
    repeated_stream,
    replace_cos,
    tied,
)

pytestmark = pytest.mark.skipif(not int8_available(), reason="simsimd is not installed")




def check_int8_rank(c, vectors, q, mode, w, k, exact_factory):
    cache = columns(vectors)
    approx, error = approximate_cosine(cache, len(c), q, int8=True)
    truth_all = exact_cosine(vectors, cache.norms, q)
    assert np.all(np.abs(approx - truth_all) <= error)  # the bound holds on every row
    cands = replace_cos(c, approx)
    raw = recency(cands, mode, 0.99, NOW)
    exact = exact_factory(vectors, cache.norms, q)
    ranked = rank(cands, raw, w, k, exact, error)
    assert_brute_force(ranked, c, exact, raw, w, k)
    truth = score(replace_cos(c, truth_all), raw, w)
    # the report's min_score and max_score are exact too, not the int8 approximations
    assert ranked.scored.score.min() == pytest.approx(truth.score.min(), abs=1e-9)
    assert ranked.scored.score.max() == pytest.approx(truth.score.max(), abs=1e-9)
    return ranked


@pytest.mark.parametrize(("seed", "n", "dim", "mode", "w"), CASES)
@pytest.mark.parametrize("k", [1, 30, 299])
def test_int8_rank_equals_brute_force_on_tie_heavy_data(seed, n, dim, mode, w, k):
    c, vectors, q = random_candidates(seed, n, dim)
    check_int8_rank(c, vectors, q, mode, w, k, exact_row)


@pytest.mark.parametrize("seed", range(40))
def test_int8_rank_equals_brute_force_on_random_streams(seed):
    """Property test: random sizes, dims, weights, k, modes and data shapes."""
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(1, 1500))
    dim = int(rng.choice([2, 3, 17, 64, 384]))
    kind = seed % 3
    if kind == 0:  # plain gaussian
        vectors = rng.standard_normal((n, dim)).astype(np.float32)
    elif kind == 1:  # few distinct vectors: exact ties
        base = rng.standard_normal((max(1, n // 10), dim)).astype(np.float32)
        vectors = base[rng.integers(0, base.shape[0], n)]
    else:  # spiky rows (one huge entry) and tiny rows: the worst int8 scales
        vectors = rng.standard_normal((n, dim)).astype(np.float32) * 1e-3
        spike = rng.random(n) < 0.3
        vectors[spike, rng.integers(0, dim, int(spike.sum()))] = 50.0
    vectors[rng.random(n) < 0.05] = 0.0
    c = tied(rng, n, accesses=int(rng.integers(1, 20)), poignancy=rng.integers(1, 11, n))
    q = rng.standard_normal(dim)
    w = Weights(*(float(x) for x in rng.choice([0.0, 0.5, 1.0, 3.0], 3)))
    mode = str(rng.choice(["hours", "rank", "reverie"]))
    k = int(rng.integers(1, 60))
    check_int8_rank(c, vectors, q, mode, w, k, batch_exact)


@pytest.mark.parametrize("seed", range(6))
def test_int8_rank_is_exact_when_cosines_crowd_the_kth_score(seed):
    """Adversarial: hundreds of cosines within 1e-7 of each other around the k-th best.

    Every memory has the same recency and importance, so relevance alone orders them; the
    vectors are the query plus orthogonal noise of nearly equal size, so their cosines
    differ by far less than the int8 error: the int8 order is meaningless there, and only
    the exact rescoring can put them right.
    """
    rng = np.random.default_rng(seed)
    dim, n, k = 384, 2000, 30
    q = rng.standard_normal(dim)
    unit = q / np.linalg.norm(q)
    noise = rng.standard_normal((n, dim))
    noise -= np.outer(noise @ unit, unit)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    angle = 0.8 + 1e-7 * rng.standard_normal(n)  # cosines near cos(0.8), crowded
    angle[: n // 4] = rng.uniform(0.0, 3.1, n // 4)  # and a spread for min and max
    vectors = (np.cos(angle)[:, None] * unit + np.sin(angle)[:, None] * noise).astype(np.float32)
    c = replace_cos(tied(rng, n, accesses=1), np.zeros(n))
    ranked = check_int8_rank(c, vectors, q, "hours", Weights(), k, batch_exact)
    assert ranked.best.size == k


def test_int8_error_bound_holds_on_extreme_rows():
    rng = np.random.default_rng(3)
    dim = 384
    vectors = np.vstack([
        np.zeros(dim), np.full(dim, 1e-30), np.eye(dim)[0] * 1e30, np.full(dim, -7.0),
        rng.standard_normal((50, dim)) * rng.uniform(1e-6, 1e6, (50, 1)),
    ]).astype(np.float32)
    cache = columns(vectors)
    for q in (rng.standard_normal(dim), np.eye(dim)[5], np.full(dim, 3.0)):
        approx, error = approximate_cosine(cache, vectors.shape[0], q, int8=True)
        assert np.all(np.abs(approx - exact_cosine(vectors, cache.norms, q)) <= error)
    approx, error = approximate_cosine(cache, vectors.shape[0], np.zeros(dim), int8=True)
    assert not approx.any() and not np.any(error)




def test_the_retriever_gives_the_same_documents_with_either_first_pass():
    stream, _ = repeated_stream(5, 600, (40, 32), 1e-4, 11, query_row=3)
    got = {}
    for first_pass in ("int8", "float32"):
        r = GenerativeAgentsRetriever(stream=stream, k=25, update_access=False,
                                      first_pass=first_pass)
        got[first_pass] = [(d.metadata["node_id"], d.metadata["score"]) for d in r.invoke("q")]
    assert got["int8"] == got["float32"]
    assert len(got["int8"]) == 25
