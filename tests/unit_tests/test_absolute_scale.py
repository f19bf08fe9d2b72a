"""The absolute scale: scores that compare across retrievals.

``scale="absolute"`` puts every part on a fixed scale instead of min-max over the candidates:
recency as computed, importance as poignancy / 10, the cosine itself, BM25 as a share of the
query's ceiling. These tests check the formula against a Python-float brute force (to the
bit, over the int8 first pass too), that a score does not move when unrelated memories are
added, that a lone unrelated memory scores low, and the ceiling of BM25.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import numpy as np
import pytest

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream
from langchain_genmem.core.errors import ValidationError
from langchain_genmem.numerics.lexical import BM25_K1, bm25_idf
from langchain_genmem.numerics.quantized import approximate_cosine, int8_available
from langchain_genmem.numerics.scoring import POIGNANCY_SCALE, Weights, rank, recency
from tests.support.embeddings import TableEmbeddings
from tests.support.scoring_cases import (
    NOW,
    batch_exact,
    columns,
    original_order,
    replace_cos,
    stream_like,
)

NOON = datetime(2024, 5, 1, 12)


def absolute_brute_force(c, cos, raw, w, k):
    """Every candidate scored with Python floats on the fixed scales; the top k, stable."""
    g = w.gains
    master = {
        i: (w.recency_w * raw[i] * g[0] + w.relevance_w * cos[i] * g[1]
            + w.importance_w * (float(c.poignancy[i]) / POIGNANCY_SCALE) * g[2])
        for i in original_order(c)
    }
    best = [i for i, _ in sorted(master.items(), key=lambda kv: kv[1], reverse=True)[:k]]
    return best, master


@pytest.mark.parametrize("int8", [False, True])
@pytest.mark.parametrize("mode", ["hours", "rank", "reverie"])
@pytest.mark.parametrize(("seed", "n", "k"), [(0, 1, 5), (1, 7, 3), (2, 600, 30), (3, 3000, 10)])
def test_absolute_rank_is_brute_force_to_the_bit(int8, mode, seed, n, k):
    if int8 and not int8_available():
        pytest.skip("simsimd is not installed")
    rng = np.random.default_rng(seed)
    c, vectors, q = stream_like(rng, n, 48, spread_hours=3.0)
    c.poignancy[:] = rng.integers(1, 11, n)
    cache = columns(vectors)
    approx, error = approximate_cosine(cache, n, q, int8=int8)
    exact = batch_exact(vectors, cache.norms, q)
    raw = recency(c, mode, 0.99, NOW)
    w = Weights(1.0, 1.5, 0.5)
    ranked = rank(replace_cos(c, approx.copy()), raw.copy(), w, k, exact, error,
                  scale="absolute")
    truth = exact(np.arange(n)).tolist()
    best, master = absolute_brute_force(c, truth, raw.tolist(), w, k)
    assert ranked.best.tolist() == best
    for i in best:
        assert ranked.scored.score[i] == master[i]
        assert ranked.scored.relevance[i] == truth[i]  # the cosine itself
        assert ranked.scored.recency[i] == raw[i]
        assert ranked.scored.importance[i] == float(c.poignancy[i]) / POIGNANCY_SCALE
    assert ranked.scored.score.min() == pytest.approx(min(master.values()), abs=1e-9)


def _stream(texts: dict[str, list[float]], poignancy: int = 5) -> MemoryStream:
    stream = MemoryStream("小明", clock=lambda: NOON,
                          embeddings=TableEmbeddings({**texts, **QUERIES}))
    for i, text in enumerate(texts):
        stream.add_event(text, created=NOON - timedelta(hours=i), poignancy=poignancy)
    return stream


QUERIES = {"咖啡馆在哪里": [1.0, 0.0, 0.0], "the weather": [0.0, 0.0, 1.0]}
CAFE = {"小明在咖啡馆工作": [0.9, 0.1, 0.0]}
OTHERS = {f"其他记忆 {i}": [0.0, 1.0, 0.1 * i] for i in range(5)}


def _scores(stream: MemoryStream, query: str, **kwargs) -> dict[str, float]:
    retriever = GenerativeAgentsRetriever(stream=stream, update_access=False, **kwargs)
    return {d.page_content: d.metadata["score"] for d in retriever.invoke(query)}


def test_a_score_does_not_move_when_unrelated_memories_arrive():
    alone = _scores(_stream(CAFE), "咖啡馆在哪里", scale="absolute")
    crowded = _scores(_stream({**CAFE, **OTHERS}), "咖啡馆在哪里", scale="absolute")
    assert crowded["小明在咖啡馆工作"] == pytest.approx(alone["小明在咖啡馆工作"])
    # on the candidates' scale the same memory's score depends on the others
    before = _scores(_stream(CAFE), "咖啡馆在哪里")
    after = _scores(_stream({**CAFE, **OTHERS}), "咖啡馆在哪里")
    assert after["小明在咖啡馆工作"] != pytest.approx(before["小明在咖啡馆工作"])


def test_a_lone_unrelated_memory_scores_low():
    exact = _scores(_stream(CAFE), "咖啡馆在哪里", scale="absolute")["小明在咖啡馆工作"]
    unrelated = _scores(_stream(CAFE), "the weather", scale="absolute")["小明在咖啡馆工作"]
    # recency 1 x 0.5 + cosine 0 x 3 + importance 0.5 x 2 against cosine 0.99 x 3 more
    assert unrelated == pytest.approx(0.5 + 0.0 + 1.0)
    cos = 0.9 / math.hypot(0.9, 0.1)
    assert exact == pytest.approx(0.5 + 3.0 * cos + 1.0)
    # min-max over one candidate gives every part 0.5: the same score for both queries
    assert _scores(_stream(CAFE), "the weather")["小明在咖啡馆工作"] == pytest.approx(2.75)
    assert _scores(_stream(CAFE), "咖啡馆在哪里")["小明在咖啡馆工作"] == pytest.approx(2.75)


def test_metadata_holds_the_absolute_parts():
    stream = _stream({**CAFE, **OTHERS}, poignancy=7)
    retriever = GenerativeAgentsRetriever(stream=stream, update_access=False, scale="absolute",
                                          recency_decay=0.5)
    docs = retriever.invoke("咖啡馆在哪里")
    assert len(docs) == 6
    for d in docs:
        hours = (NOON - d.metadata["last_accessed"]).total_seconds() / 3600
        assert d.metadata["importance"] == pytest.approx(0.7)
        assert d.metadata["relevance"] == pytest.approx(d.metadata["cosine"])
        assert d.metadata["recency"] == pytest.approx(0.5 ** hours)
    halvings = [0.5 ** h for h in range(5, -1, -1)]
    assert sorted(d.metadata["recency"] for d in docs) == pytest.approx(halvings)


def test_hybrid_lexical_part_is_a_share_of_the_query_ceiling():
    texts = {"小明 喜欢 咖啡": [1.0, 0.0, 0.0], "小红 喜欢 茶": [0.0, 1.0, 0.0],
             "下雨 天气": [0.0, 0.0, 1.0]}
    stream = MemoryStream("p", clock=lambda: NOON, embeddings=TableEmbeddings(
        {**texts, "咖啡 咖啡 天气": [0.5, 0.5, 0.0]}))
    for text in texts:
        stream.add_event(text, created=NOON, poignancy=3)
    index = stream.lexical_index(stream.view()[0])
    rows = np.arange(3)
    scores, ceiling = index.scores_and_ceiling("咖啡 咖啡 天气", rows)
    assert scores.tolist() == index.scores("咖啡 咖啡 天气", rows).tolist()
    held = [t for t in index.terms("咖啡 咖啡 天气") if t in {"咖啡", "天气"}]
    assert ceiling == pytest.approx(sum(bm25_idf(3, 1) * (BM25_K1 + 1) for _ in held))
    assert (scores < ceiling).all()
    retriever = GenerativeAgentsRetriever(stream=stream, update_access=False, scale="absolute",
                                          relevance="hybrid", lexical_weight=0.5)
    for d in retriever.invoke("咖啡 咖啡 天气"):
        assert 0.0 <= d.metadata["lexical"] < 1.0
        assert d.metadata["lexical"] == pytest.approx(d.metadata["bm25"] / ceiling)
        assert d.metadata["lexical_share"] == 0.5
    # no query term held by any memory: the lexical part is 0, not 0.5
    _, none = index.scores_and_ceiling("月亮", rows)
    assert none == 0.0


def test_absolute_scale_is_scored_in_process_only():
    with pytest.raises(ValidationError, match="scale"):
        GenerativeAgentsRetriever(stream=_stream(CAFE), scale="absolute", score_in="database")
    with pytest.raises(ValidationError, match="scale"):
        GenerativeAgentsRetriever(stream=_stream(CAFE), scale="minmax")
