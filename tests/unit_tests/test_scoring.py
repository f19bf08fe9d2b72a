"""The pure scoring functions, against hand-computed values and brute-force float64 scoring.

The brute force restates the original with Python floats, loops and stable sorts (candidate list
= events newest first + thoughts newest first, stable-sorted by last access; ``normalize``;
``w * value * gain`` summed left to right; ``sorted(..., reverse=True)[:k]``), so "equal"
below means equal to the last bit, not approximately.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from langchain_genmem.numerics.scoring import (
    DEFAULT_GAINS,
    Weights,
    combine,
    cosine,
    cosine_error,
    exact_cosine,
    inverse_norms,
    minmax,
    rank,
    recency,
    score,
    tie_order,
    top_k,
)
from tests.support.scoring_cases import (
    CASES,
    HOUR,
    NOW,
    assert_brute_force,
    batch_exact,
    cands,
    exact_row,
    normalize,
    original_order,
    random_candidates,
    replace_cos,
    tied,
)

# ---------------------------------------------------------------- the seeds, restated








# ---------------------------------------------------------------- minmax


def test_minmax_maps_to_the_unit_interval():
    assert minmax(np.array([2.0, 4.0, 3.0, 6.0])).tolist() == [0.0, 0.5, 0.25, 1.0]
    assert minmax(np.array([-1.0, 1.0])).tolist() == [0.0, 1.0]


@pytest.mark.parametrize("values", [[7.0], [3.0, 3.0, 3.0], [-0.25] * 5])
def test_minmax_of_equal_values_is_one_half(values):
    out = minmax(np.array(values))
    assert out.tolist() == [0.5] * len(values)
    assert out.dtype == np.float64


def test_minmax_of_integers_and_of_nothing():
    out = minmax(np.array([1, 10, 4], dtype=np.int64))
    assert out.dtype == np.float64
    assert out.tolist() == [0.0, 1.0, 1 / 3]
    assert minmax(np.zeros(0)).shape == (0,)


def test_minmax_is_the_originals_formula_to_the_bit():
    values = np.random.default_rng(3).standard_normal(500) * 1e3
    expected = normalize(dict(enumerate(values.tolist())))
    assert minmax(values).tolist() == [expected[i] for i in range(500)]


# ---------------------------------------------------------------- recency


def test_hours_mode_is_decay_to_the_hours_since_last_access():
    c = cands([NOW, NOW - HOUR, NOW - 2.5 * HOUR, NOW - 24 * HOUR, NOW + HOUR])
    got = recency(c, "hours", 0.99, NOW)
    # the future access (clock moved back) counts as "now"
    expected = [1.0, 0.99, 0.99**2.5, 0.99**24, 1.0]
    assert got.tolist() == pytest.approx(expected, rel=1e-15)


def test_rank_mode_is_decay_to_the_position_most_recent_first():
    # rows: 0 oldest access, 3 newest; rows 1 and 2 accessed together (row 2 is newer)
    c = cands([NOW - 9 * HOUR, NOW - HOUR, NOW - HOUR, NOW])
    got = recency(c, "rank", 0.5, NOW)
    assert got.tolist() == [0.5**4, 0.5**3, 0.5**2, 0.5**1]


def test_reverie_mode_gives_the_oldest_access_the_highest_recency():
    # events node_1, node_2, thought node_3, event node_4; node_1..3 share one access time
    c = cands([NOW - HOUR, NOW - HOUR, NOW - HOUR, NOW - 5 * HOUR], type_code=[0, 0, 1, 0])
    # candidate order: node_4 (oldest access), then the tie: events newest first, thoughts
    assert original_order(c) == [3, 1, 0, 2]
    got = recency(c, "reverie", 0.9, NOW)
    assert got.tolist() == [0.9**3, 0.9**2, 0.9**4, 0.9**1]


def test_reverie_recency_ignores_the_gaps_between_accesses():
    near = recency(cands([NOW - 1.0, NOW - 2.0]), "reverie", 0.99, NOW)
    far = recency(cands([NOW - HOUR * 1e4, NOW - HOUR * 2e4]), "reverie", 0.99, NOW)
    assert near.tolist() == far.tolist() == [0.99**2, 0.99**1]


def test_unknown_recency_mode_is_refused():
    with pytest.raises(ValueError, match="recency_mode"):
        recency(cands([NOW]), "days", 0.99, NOW)  # type: ignore[arg-type]


# ---------------------------------------------------------------- tie order and top k


@pytest.mark.parametrize("seed", range(5))
def test_tie_order_is_the_originals_candidate_order(seed):
    c = tied(np.random.default_rng(seed), 60, accesses=4)
    assert tie_order(c).tolist() == original_order(c)


def test_top_k_breaks_ties_in_candidate_order():
    c = cands([NOW - HOUR, NOW - HOUR, NOW - 2 * HOUR, NOW - HOUR], type_code=[1, 0, 0, 0])
    scores = np.array([1.0, 1.0, 1.0, 2.0])
    # ties among 0, 1, 2: 2 (older access) first, then event 1 before thought 0
    assert top_k(scores, c, 4).tolist() == [3, 2, 1, 0]
    assert top_k(scores, c, 2).tolist() == [3, 2]
    assert top_k(np.ones(4), c, 4).tolist() == tie_order(c).tolist()


def test_top_k_edges():
    c = cands([NOW] * 3)
    scores = np.array([0.2, 0.9, 0.5])
    assert top_k(scores, c, 0).tolist() == []
    assert top_k(scores, c, 10).tolist() == [1, 2, 0]
    assert top_k(scores, c, 2, among=np.array([0, 2])).tolist() == [2, 0]
    assert top_k(np.zeros(0), cands([]), 3).tolist() == []


@pytest.mark.parametrize("seed", range(10))
def test_top_k_equals_a_stable_sort_with_ties_at_the_boundary(seed):
    rng = np.random.default_rng(seed)
    n = 80
    c = tied(rng, n, accesses=3)
    scores = rng.integers(0, 4, n).astype(np.float64)  # few values: ties everywhere
    order = original_order(c)
    for k in range(n + 2):
        expected = sorted(order, key=lambda i: scores[i], reverse=True)[:k]
        assert top_k(scores, c, k).tolist() == expected, k


def test_top_k_is_stable_when_asked_again():
    rng = np.random.default_rng(0)
    c = cands(NOW - HOUR * rng.integers(0, 2, 200), node_count=rng.permutation(200) + 1)
    scores = rng.integers(0, 3, 200).astype(np.float64)
    first = top_k(scores, c, 50)
    assert first.tolist() == top_k(scores, c, 50).tolist()
    # the top 10 is a prefix of the top 50
    assert top_k(scores, c, 10).tolist() == first[:10].tolist()


# ---------------------------------------------------------------- combining


def test_score_is_the_weighted_sum_of_normalised_components():
    c = cands([NOW] * 3, poignancy=[1, 10, 4], cos=[0.1, 0.3, 0.2])
    w = Weights(recency_w=2.0, relevance_w=0.5, importance_w=1.5)
    s = score(c, np.array([0.5, 1.0, 0.75]), w)
    assert s.recency.tolist() == [0.0, 1.0, 0.5]
    assert s.relevance.tolist() == pytest.approx([0.0, 1.0, 0.5], abs=1e-15)
    assert s.importance.tolist() == [0.0, 1.0, 1 / 3]
    for i in range(3):
        expected = (2.0 * s.recency[i] * 0.5 + 0.5 * s.relevance[i] * 3.0
                    + 1.5 * s.importance[i] * 2.0)
        assert s.score[i] == expected


def test_combine_is_the_originals_arithmetic_to_the_bit():
    rng = np.random.default_rng(1)
    r, v, i = rng.random((3, 1000))
    for w in (Weights(), Weights(0.3, 1.7, 1.0, gains=(1.0, 1.0, 1.0)), Weights(1.0, 0.1, 7.0)):
        g = w.gains
        expected = [w.recency_w * a * g[0] + w.relevance_w * b * g[1] + w.importance_w * c * g[2]
                    for a, b, c in zip(r.tolist(), v.tolist(), i.tolist(), strict=False)]
        assert combine(r, v, i, w).tolist() == expected
    assert Weights().gains == DEFAULT_GAINS == (0.5, 3.0, 2.0)


# ---------------------------------------------------------------- cosine


def test_cosine_against_hand_computed_values():
    vectors = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 0], [-2, 0, 0]], dtype=np.float32)
    norms = np.linalg.norm(vectors.astype(np.float64), axis=1)
    inv = inverse_norms(norms)
    assert inv.tolist() == [1.0, 1 / math.sqrt(2), 0.0, 0.5]
    q = np.array([3.0, 0.0, 0.0])
    expected = [1.0, 1 / math.sqrt(2), 0.0, -1.0]
    assert cosine(vectors, inv, q).tolist() == pytest.approx(expected, abs=1e-7)
    assert exact_cosine(vectors, norms, q).tolist() == pytest.approx(expected, abs=1e-15)
    assert cosine(vectors, inv, np.zeros(3)).tolist() == [0.0] * 4
    assert exact_cosine(vectors, norms, np.zeros(3)).tolist() == [0.0] * 4


@pytest.mark.parametrize("dim", [3, 384, 1536])
def test_float32_cosine_is_within_its_stated_error(dim):
    rng = np.random.default_rng(dim)
    vectors = rng.standard_normal((500, dim)).astype(np.float32)
    norms = np.linalg.norm(vectors.astype(np.float64), axis=1)
    q = rng.standard_normal(dim)
    gap = np.abs(cosine(vectors, inverse_norms(norms), q) - exact_cosine(vectors, norms, q))
    assert gap.max() <= cosine_error(dim, np.float32)
    assert cosine_error(dim, np.float64) == 0.0


def test_exact_cosine_of_a_row_does_not_depend_on_the_other_rows():
    """Identical vectors (nodes sharing an embedding_key) must get identical cosines.

    ``rank`` recomputes a different subset of rows at each refinement; if a row's value
    depended on its batch, memories sharing a vector would stop tying exactly and the
    original's tie order would be lost.
    """
    rng = np.random.default_rng(7)
    for dim in (16, 384, 1536):
        base = rng.standard_normal((20, dim)).astype(np.float32)
        rows = rng.integers(0, 20, 300)
        vectors = base[rows]
        norms = np.linalg.norm(vectors.astype(np.float64), axis=1)
        q = rng.standard_normal(dim)
        whole = exact_cosine(vectors, norms, q)
        for key in range(20):
            same = whole[rows == key]
            assert np.unique(same).size == 1, (dim, key, np.unique(same))
        for lo, hi in ((0, 1), (3, 8), (10, 47)):
            assert exact_cosine(vectors[lo:hi], norms[lo:hi], q).tolist() == whole[lo:hi].tolist()


# ---------------------------------------------------------------- rank == brute force








def check_rank(c, vectors, q, mode, w, k, exact_factory):
    norms = np.linalg.norm(vectors.astype(np.float64), axis=1)
    approx = replace_cos(c, cosine(vectors, inverse_norms(norms), q))
    raw = recency(approx, mode, 0.99, NOW)
    exact = exact_factory(vectors, norms, q)
    ranked = rank(approx, raw, w, k, exact, cosine_error(vectors.shape[1], vectors.dtype))
    assert_brute_force(ranked, c, exact, raw, w, k)








@pytest.mark.parametrize(("seed", "n", "dim", "mode", "w"), CASES)
@pytest.mark.parametrize("k", [1, 5, 30, 299])
def test_rank_equals_brute_force_float64_scoring(seed, n, dim, mode, w, k):
    c, vectors, q = random_candidates(seed, n, dim)
    check_rank(c, vectors, q, mode, w, k, exact_row)


@pytest.mark.parametrize(("seed", "n", "dim", "mode", "w"), CASES[:3])
def test_rank_equals_brute_force_with_the_retrievers_batched_exact_cosine(seed, n, dim, mode, w):
    c, vectors, q = random_candidates(seed, n, dim)
    check_rank(c, vectors, q, mode, w, 30, batch_exact)


def test_rank_when_every_cosine_is_equal_or_there_is_nothing():
    vectors = np.ones((5, 4), dtype=np.float32)
    c, q = cands([NOW - i * HOUR for i in range(5)]), np.ones(4)
    norms = np.linalg.norm(vectors.astype(np.float64), axis=1)
    approx = replace_cos(c, cosine(vectors, inverse_norms(norms), q))
    ranked = rank(approx, recency(approx, "hours", 0.99, NOW), Weights(), 2,
                  batch_exact(vectors, norms, q), cosine_error(4, np.float32))
    assert ranked.scored.relevance.tolist() == [0.5] * 5
    assert ranked.best.tolist() == [0, 1]  # most recent access wins
    empty = cands([])
    nothing = rank(empty, np.zeros(0), Weights(), 3, lambda idx: np.zeros(0), 1e-6)
    assert nothing.best.tolist() == []


def test_rank_with_float64_vectors_needs_no_refinement():
    c, vectors, q = random_candidates(11, 500, 32)
    vectors = vectors.astype(np.float64)
    calls = []

    def exact(idx):
        calls.append(idx)
        return exact_cosine(vectors[idx], np.linalg.norm(vectors[idx], axis=1), q)

    norms = np.linalg.norm(vectors, axis=1)
    approx = replace_cos(c, exact_cosine(vectors, norms, q))
    ranked = rank(approx, recency(approx, "hours", 0.99, NOW), Weights(), 10, exact, 0.0)
    assert calls == []
    assert ranked.best.size == 10
