"""The fewer-pass ranking stays float64 brute force's, to the bit.

``rank`` now normalises in place when the caller hands over its arrays (``overwrite``),
reuses the extremes it found for the relevance, and ``top_k`` bounds the k-th best score by
block maxima before partitioning. These tests drive every path against the Python-float
brute force of test_scoring: degenerate sizes (one candidate, k >= n), huge and tiny decays
(recency underflowing to 0, or all equal), accesses after "now", equal access times and
equal poignancy, all three recency modes, the int8 first pass, cosines crowding the k-th
score, and filters narrowing the candidates in the retriever.
"""

from __future__ import annotations

import numpy as np
import pytest

from langchain_genmem import GenerativeAgentsRetriever
from langchain_genmem.core.timeutil import to_epoch
from langchain_genmem.numerics import scoring
from langchain_genmem.numerics.quantized import approximate_cosine, int8_available
from langchain_genmem.numerics.scoring import Weights, rank, recency, score, top_k
from tests.support.scoring_cases import (
    HOUR,
    NOW,
    assert_brute_force,
    batch_exact,
    cands,
    columns,
    repeated_stream,
    replace_cos,
    stream_like,
)

needs_int8 = pytest.mark.skipif(not int8_available(), reason="simsimd is not installed")


@pytest.fixture(params=["blocks", "partition"])
def kth_path(request, monkeypatch):
    """Run a test with top_k's block-maxima bound forced on (1 row a block) or off."""
    monkeypatch.setattr(scoring, "_BLOCK_ROWS", 1 if request.param == "blocks" else 10**12)
    return request.param




def check(c, vectors, q, mode, decay, w, k, *, overwrite, int8):
    """rank() over a first pass equals brute force, min and max scores included."""
    cache = columns(vectors)
    approx, error = approximate_cosine(cache, len(c), q, int8=int8)
    exact = batch_exact(vectors, cache.norms, q)
    raw = recency(c, mode, decay, NOW)
    ranked = rank(replace_cos(c, approx.copy()), raw.copy(), w, k, exact, error,
                  overwrite=overwrite)
    assert_brute_force(ranked, c, exact, raw, w, k)
    truth = score(replace_cos(c, exact(np.arange(len(c)))), raw, w)
    assert ranked.scored.score.min() == pytest.approx(truth.score.min(), abs=1e-9)
    assert ranked.scored.score.max() == pytest.approx(truth.score.max(), abs=1e-9)
    assert ranked.best.size == min(k, len(c))
    return ranked


@needs_int8
@pytest.mark.parametrize("mode", ["hours", "rank", "reverie"])
@pytest.mark.parametrize("decay", [1e-12, 0.5, 0.99, 1 - 1e-12, 1.0])
@pytest.mark.parametrize(("n", "k"), [(1, 1), (1, 30), (2, 1), (7, 7), (7, 30), (600, 30)])
@pytest.mark.parametrize("overwrite", [True, False])
def test_rank_is_exact_at_the_edges(kth_path, mode, decay, n, k, overwrite):
    rng = np.random.default_rng(n * 7 + k)
    c, vectors, q = stream_like(rng, n, 48, spread_hours=1e5)  # 0.5**3e5 underflows to 0
    check(c, vectors, q, mode, decay, Weights(), k, overwrite=overwrite, int8=True)


@needs_int8
@pytest.mark.parametrize("seed", range(30))
def test_rank_is_exact_on_random_tie_heavy_streams(kth_path, seed):
    """Property test over modes, decays, weights, k and both first passes."""
    rng = np.random.default_rng(5000 + seed)
    n = int(rng.integers(1, 3000))
    c, vectors, q = stream_like(rng, n, int(rng.choice([3, 32, 384])),
                                spread_hours=float(rng.choice([1e-3, 1.0, 1e4])))
    w = Weights(*(float(x) for x in rng.choice([0.0, 0.5, 1.0, 3.0], 3)))
    check(c, vectors, q, str(rng.choice(["hours", "rank", "reverie"])),
          float(rng.choice([1e-6, 0.9, 0.995, 1.0])), w, int(rng.integers(1, 80)),
          overwrite=bool(seed % 2), int8=bool(seed % 3))


@needs_int8
@pytest.mark.parametrize("seed", range(4))
def test_rank_is_exact_when_cosines_crowd_the_kth_score_in_blocks(kth_path, seed):
    """Equal recency and importance, cosines within 1e-7 around the 30th best."""
    rng = np.random.default_rng(seed)
    dim, n, k = 384, 4000, 30
    unit = rng.standard_normal(dim)
    unit /= np.linalg.norm(unit)
    noise = rng.standard_normal((n, dim))
    noise -= np.outer(noise @ unit, unit)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    angle = 0.8 + 1e-7 * rng.standard_normal(n)
    angle[: n // 5] = rng.uniform(0.0, 3.1, n // 5)
    vectors = (np.cos(angle)[:, None] * unit + np.sin(angle)[:, None] * noise).astype(np.float32)
    c = cands(np.full(n, NOW - HOUR), node_count=rng.permutation(n) + 1)
    check(c, vectors, unit, "hours", 0.99, Weights(), k, overwrite=True, int8=True)


@pytest.mark.parametrize("seed", range(40))
def test_top_k_block_bound_keeps_every_row_reaching_the_kth(monkeypatch, seed):
    """Integer scores with heavy ties: the same rows as a full partition, in the same order."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5000))
    c = cands(NOW - HOUR * rng.integers(0, 3, n), type_code=rng.integers(0, 2, n),
              node_count=rng.permutation(n) + 1)
    scores = rng.integers(0, int(rng.choice([2, 10, 1000, 10**9])), n).astype(np.float64)
    k = int(rng.integers(1, n + 2))
    among = np.sort(rng.choice(n, int(rng.integers(1, n + 1)), replace=False))
    monkeypatch.setattr(scoring, "_BLOCK_ROWS", 10**12)
    expected = top_k(scores, c, k), top_k(scores, c, k, among=among)
    monkeypatch.setattr(scoring, "_BLOCK_ROWS", 1)
    got = top_k(scores, c, k), top_k(scores, c, k, among=among)
    assert [g.tolist() for g in got] == [e.tolist() for e in expected]


def test_recency_counts_accesses_after_now_as_now_and_keeps_the_input():
    c = cands([NOW + 5 * HOUR, NOW, NOW - 2 * HOUR])
    before = c.last_accessed.copy()
    assert recency(c, "hours", 0.5, NOW).tolist() == [1.0, 1.0, 0.25]
    assert recency(cands([NOW - HOUR, NOW]), "hours", 0.5, NOW).tolist() == [0.5, 1.0]
    assert c.last_accessed.tolist() == before.tolist()


def test_rank_leaves_the_callers_arrays_alone_unless_told():
    rng = np.random.default_rng(2)
    c, vectors, q = stream_like(rng, 200, 16, spread_hours=1.0)
    cache = columns(vectors)
    approx, error = approximate_cosine(cache, 200, q, int8=False)
    raw = recency(c, "hours", 0.9, NOW)
    held = replace_cos(c, approx)
    kept = approx.copy(), raw.copy()
    rank(held, raw, Weights(), 10, batch_exact(vectors, cache.norms, q), error)
    assert np.array_equal(approx, kept[0]) and np.array_equal(raw, kept[1])


@needs_int8
@pytest.mark.parametrize("first_pass", ["int8", "float32"])
def test_filtered_retrieval_equals_brute_force_over_the_kept_memories(first_pass):
    """Filters narrow the candidates: the ranking is float64's over the kept memories only."""
    stream, query = repeated_stream(9, 5000, (30, 24), 1e-6, 4, query_row=4)
    when = stream.clock()
    retriever = GenerativeAgentsRetriever(stream=stream, k=40, update_access=False,
                                          first_pass=first_pass, min_poignancy=2)
    report = retriever.retrieve_with_report("q")
    cache = stream.columns
    rows = np.flatnonzero(cache.poignancy[: cache.n] >= 2)
    c = cands(cache.last_accessed[rows], type_code=cache.type_code[rows], node_count=rows + 1,
              poignancy=cache.poignancy[rows])
    exact = batch_exact(cache.vectors[rows], cache.norms[rows], query)
    state = stream.committed
    w = Weights(state.recency_w, state.relevance_w, state.importance_w)
    truth = score(replace_cos(c, exact(np.arange(len(c)))),
                  recency(c, "hours", state.recency_decay, to_epoch(when)), w)
    best = top_k(truth.score, c, 40)
    assert [d.metadata["node_id"] for d in report.documents] == [
        cache.nodes[r].node_id for r in rows[best]]
    assert [d.metadata["score"] for d in report.documents] == pytest.approx(
        truth.score[best].tolist(), abs=1e-9)
    assert report.candidate_count == rows.size < 5000


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("mode", ["hours", "rank", "reverie"])
def test_rank_is_exact_when_every_approximation_errs_by_the_full_bound_the_wrong_way(
    kth_path, seed, mode
):
    """Adversarial first pass: the true best rows are pushed down by the whole bound and the
    others up, the extremes too, so only a correct slack keeps the right rows."""
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(50, 3000)), int(rng.integers(1, 40))
    c, vectors, q = stream_like(rng, n, 16, spread_hours=float(rng.choice([0.01, 1.0])))
    norms = np.linalg.norm(vectors.astype(np.float64), axis=1)
    exact = batch_exact(vectors, norms, q)
    truth = exact(np.arange(n))
    raw = recency(c, mode, 0.99, NOW)
    true_scores = score(replace_cos(c, truth), raw, Weights()).score
    error = float(rng.choice([1e-3, 0.05]))
    cut = np.sort(true_scores)[::-1][min(k, n) - 1]
    push = np.where(true_scores >= cut - 0.5, -error, error)  # best down, the rest up
    push[truth <= truth.min() + error] = error  # the lowest cosines look higher
    push[truth >= truth.max() - error] = -error  # and the highest lower
    approx = replace_cos(c, truth + push)
    ranked = rank(approx, raw.copy(), Weights(), k, exact, error, overwrite=bool(seed % 2))
    assert_brute_force(ranked, c, exact, raw, Weights(), k)
    assert ranked.scored.score.min() == pytest.approx(true_scores.min(), abs=1e-9)
