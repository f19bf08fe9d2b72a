"""Exact top k from the int8 scan on adversarial streams, through the cache's own codes.

The first pass's bound must hold, and the ranking built on it must equal float64 brute force
(ids, order, every component of the top k, the lowest and highest scores), for rows that
make int8 codes poor (one huge entry), many equal rows, zero rows, tiny and huge norms,
cosines crowding the k-th best score, and poor rows arriving after the first codes were made
(the bound of the rows held before widens).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

import numpy as np
import pytest

from langchain_genmem import MemoryStream
from langchain_genmem.numerics.quantized import approximate_cosine, int8_available
from langchain_genmem.numerics.scoring import (
    RECENCY_ERROR,
    Candidates,
    Weights,
    approximate_recency,
    exact_cosine,
    rank,
    recency,
)
from tests.support.scoring_cases import assert_brute_force

pytestmark = pytest.mark.skipif(not int8_available(), reason="simsimd is not installed")

DIM = 48
T0 = datetime(2024, 5, 1, 8)


def adversarial_batches(seed: int, n: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Three batches of vectors (the last holding the poorly coded rows) and a query."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(DIM)
    unit = q / np.linalg.norm(q)
    noise = rng.standard_normal((n, DIM))
    noise -= (noise @ unit)[:, None] * unit
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    angle = rng.uniform(0.0, 3.1, n)
    crowd = rng.random(n) < 0.4  # cosines within 1e-7 of each other, near the top
    angle[crowd] = 0.5 + 1e-7 * rng.standard_normal(int(crowd.sum()))
    vectors = np.cos(angle)[:, None] * unit + np.sin(angle)[:, None] * noise
    vectors *= rng.choice([1e-20, 1e-3, 1.0, 1.0, 1.0, 1e3, 1e20], n)[:, None]  # norms
    vectors[rng.random(n) < 0.03] = 0.0  # zero rows
    equal = rng.random(n) < 0.1  # many rows of one vector
    vectors[equal] = vectors[int(np.flatnonzero(equal)[0])]
    first, second, third = np.array_split(vectors, 3)
    third = third.copy()
    huge = rng.random(third.shape[0]) < 0.2  # one entry far above the rest: poor int8 codes
    spike = rng.uniform(1.0, 30.0, int(huge.sum())) * np.linalg.norm(third[huge], axis=1)
    third[huge, rng.integers(0, DIM, int(huge.sum()))] += spike * rng.choice([-1, 1])
    return [first, second, third], q


def fill(seed: int, n: int, batches: int = 3) -> tuple[MemoryStream, np.ndarray]:
    stream = MemoryStream("p", clock=lambda: T0 + timedelta(hours=5))
    return add(stream, seed, n, batches), adversarial_batches(seed, n)[1]


def add(stream: MemoryStream, seed: int, n: int, batches: int, skip: int = 0) -> MemoryStream:
    rng = np.random.default_rng(seed + 100 + skip)
    start = len(stream)
    for batch in adversarial_batches(seed, n)[0][skip:batches]:
        stream.add_many([
            {"type": "event" if rng.random() < 0.8 else "thought",
             "description": f"第 {start + i} 条记忆：扫描", "poignancy": int(rng.integers(1, 4)),
             "created": T0 + timedelta(hours=int(rng.integers(0, 3))),  # few access times
             "embedding": v.astype(np.float32)}
            for i, v in enumerate(batch)
        ])
        start += batch.shape[0]
    return stream


def ranked_from_cache(
    stream: MemoryStream, q: np.ndarray, mode: str, w: Weights, k: int, decay: float = 0.99
):
    cache = stream.columns
    static = cache.candidates()
    rows = static.rows
    approx, error = approximate_cosine(cache, cache.n, q, int8=True)
    vectors, norms = cache.vectors[: cache.n], cache.norms[: cache.n]
    truth = exact_cosine(vectors, norms, q)
    assert np.all(np.abs(approx - truth) <= error)  # the bound holds on every row
    c = Candidates(cache.last_accessed[rows], static.type_code, static.node_count,
                   static.poignancy, approx[rows])
    now = (T0 + timedelta(hours=5)).timestamp()
    raw = recency(c, mode, decay, now)
    approx_raw, recency_error, exact_recency = approximate_recency(c, mode, decay, now)
    assert np.all(np.abs(approx_raw - raw) <= recency_error)

    def exact(idx: np.ndarray) -> np.ndarray:
        return exact_cosine(vectors[rows[idx]], norms[rows[idx]], q)

    ranked = rank(c, approx_raw, w, k, exact, error, static.importance, overwrite=True,
                  recency_error=recency_error, exact_recency=exact_recency)
    return ranked, c, exact, raw


@pytest.fixture(scope="module")
def adversarial_streams() -> Iterator[dict[int, tuple[MemoryStream, np.ndarray]]]:
    """Streams of 1500 adversarial memories and their query by seed, each built once.

    Ranking only reads the cache, so the eight rankings of a seed share its stream.
    """
    made: dict[int, tuple[MemoryStream, np.ndarray]] = {}
    yield made
    for stream, _ in made.values():
        stream.close()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("k", [1, 30])
@pytest.mark.parametrize(("mode", "w"), [
    ("hours", Weights()),
    ("reverie", Weights()),
    ("hours", Weights(recency_w=0.0, importance_w=0.0)),  # relevance alone: ties decide
    ("rank", Weights(2.0, 0.25, 1.0, gains=(1.0, 1.0, 1.0))),
])
def test_int8_scan_ranks_adversarial_streams_as_float64_brute_force(
    seed, k, mode, w, adversarial_streams
):
    if seed not in adversarial_streams:
        adversarial_streams[seed] = fill(seed, 1500)
    stream, q = adversarial_streams[seed]
    ranked, c, exact, raw = ranked_from_cache(stream, q, mode, w, k)
    assert_brute_force(ranked, c, exact, raw, w, k)
    truth = exact(np.arange(len(c)))
    brute = rank(Candidates(c.last_accessed, c.type_code, c.node_count, c.poignancy, truth),
                 raw.copy(), w, len(c), exact, 0.0)  # every row exact: the float64 scores
    assert ranked.scored.score.min() == pytest.approx(brute.scored.score.min(), abs=1e-9)
    assert ranked.scored.score.max() == brute.scored.score.max()


def test_rows_added_later_widen_the_bound_of_the_rows_held_before():
    stream, q = fill(7, 900, batches=2)
    cache = stream.columns
    before = cache.max_relative_residual
    add(stream, 7, 900, 3, skip=2)  # the batch of poorly coded rows
    assert cache.max_relative_residual > 2 * before
    approx, error = approximate_cosine(cache, cache.n, q, int8=True)
    truth = exact_cosine(cache.vectors[: cache.n], cache.norms[: cache.n], q)
    assert np.all(np.abs(approx - truth) <= error)
    ranked, c, exact, raw = ranked_from_cache(stream, q, "hours", Weights(), 30)
    assert_brute_force(ranked, c, exact, raw, Weights(), 30)


def test_rank_from_approximations_computes_components_only_where_they_can_matter():
    stream, q = fill(3, 3000)
    ranked, c, exact, raw = ranked_from_cache(stream, q, "hours", Weights(), 30)
    assert_brute_force(ranked, c, exact, raw, Weights(), 30)
    computed = np.flatnonzero(ranked.scored.recency)  # recency 0 only at the oldest access
    assert set(ranked.best.tolist()) <= set(computed.tolist()) | {
        int(i) for i in np.flatnonzero(raw == raw.min())}
    assert computed.size < len(c) // 2  # the rest were never normalised


@pytest.mark.parametrize("decay", [0.5, 0.99, 0.999999, 1.0])
def test_float32_hours_recency_stays_within_its_bound_at_any_age(decay):
    rng = np.random.default_rng(11)
    now = 1_700_000_000.0
    ages = np.concatenate([[0.0, -3600.0, 1e-3, 1.0], rng.uniform(0, 3600, 300),
                           rng.uniform(0, 3e8, 300), np.geomspace(1, 1e10, 300)])
    c = Candidates(now - ages, np.zeros(ages.size, np.int8), np.arange(1, ages.size + 1),
                   np.ones(ages.size), np.zeros(ages.size))
    values, error, exact = approximate_recency(c, "hours", decay, now)
    truth = recency(c, "hours", decay, now)
    assert error == (RECENCY_ERROR if decay < 1 else 0.0)
    assert np.all(np.abs(values - truth) <= error)
    idx = rng.permutation(ages.size)[:50]
    assert exact(idx).tolist() == truth[idx].tolist()  # the same bits, whatever rows are asked


@pytest.mark.parametrize(("spread_s", "decay"), [(2.0, 0.99), (36_000.0, 0.99), (3600.0, 1.0)])
def test_rank_on_float32_recency_is_exact_for_narrow_and_wide_spreads(spread_s, decay):
    stream, q = fill(5, 1200)
    cache = stream.columns
    rng = np.random.default_rng(5)
    when = (T0 + timedelta(hours=5)).timestamp() - spread_s * rng.integers(0, 4, cache.n)
    cache.last_accessed[: cache.n] = when  # few access times within spread_s
    ranked, c, exact, raw = ranked_from_cache(stream, q, "hours", Weights(), 30, decay)
    assert_brute_force(ranked, c, exact, raw, Weights(), 30)


def test_concurrent_rankings_never_share_a_temporary():
    cases = [(*fill(2, 1500), 1), (*fill(2, 1500), -1), (*fill(3, 700), 1)]  # sizes differ

    def ranked(case: tuple) -> object:
        stream, q, sign = case
        return ranked_from_cache(stream, q * sign, "hours", Weights(), 30)[0]

    serial = [ranked(case) for case in cases]
    with ThreadPoolExecutor(6) as pool:
        together = list(pool.map(ranked, cases * 6))
    for i, got in enumerate(together):
        assert got.best.tolist() == serial[i % 3].best.tolist()
        assert np.array_equal(got.scored.score, serial[i % 3].scored.score)
