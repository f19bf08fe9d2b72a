"""Lexical and hybrid relevance: one fusion formula, exact top k in every mode.

``rank`` with ``relevance="lexical"`` or ``"hybrid"`` is checked against a Python-float brute
force of the fused formula (``(1 - s) * dense + s * lexical`` over min-max normalised parts)
on tie-heavy data: few distinct vectors, few BM25 values (equal scores, many zeros), all-zero
lexical scores (a query with no known term), over the int8 and float32 first passes. The
retriever tests check the options end to end: persona settings, metadata, no query embedding
in lexical mode, an index never stale after adds, the idle filter, and the database path.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream
from langchain_genmem.core.errors import ValidationError
from langchain_genmem.numerics.quantized import approximate_cosine, int8_available
from langchain_genmem.numerics.scoring import (
    Weights,
    fuse_relevance,
    lexical_share,
    minmax,
    normalise_lexical,
    rank,
    recency,
)
from tests.support.scoring_cases import (
    NOW,
    batch_exact,
    brute_force,
    columns,
    normalize,
    original_order,
    replace_cos,
    stream_like,
)

MODES = ["dense", "lexical", "hybrid"]


def fused_brute_force(c, cos, bm25, rec, w, k, mode, lexical_weight):
    """Every candidate scored with Python floats, relevance fused as documented."""
    order = original_order(c)
    d = normalize({i: cos[i] for i in order})
    lex = normalize({i: bm25[i] for i in order})
    if mode == "dense":
        s = 0.0
    elif mode == "lexical" or len(set(cos)) == 1:
        s = 1.0 if mode == "lexical" or len(set(bm25)) > 1 else 0.0
    else:
        s = 0.0 if len(set(bm25)) == 1 else lexical_weight
    if s == 0.0:
        v = d
    elif s == 1.0:
        v = lex
    else:
        v = {i: d[i] * (1.0 - s) + lex[i] * s for i in order}
    best, master, *_ = brute_force(c, cos, rec, w, k, relevance=v)
    return best, master, v, d, lex


def lexical_scores(rng, n, kind):
    """Raw BM25-like scores: few values with many ties and zeros, all zero, or all equal."""
    if kind == "zero":
        return np.zeros(n)
    if kind == "equal":
        return np.full(n, 2.5)
    return rng.choice([0.0, 0.0, 0.0, 1.25, 1.25, 2.5, 3.0 + 1e-9, 7.0], n)


def check(c, vectors, q, bm25, w, k, mode, lexical_weight, *, int8):
    cache = columns(vectors)
    approx, error = approximate_cosine(cache, len(c), q, int8=int8)
    exact = batch_exact(vectors, cache.norms, q)
    raw = recency(c, "hours", 0.99, NOW)
    ranked = rank(replace_cos(c, approx.copy()), raw.copy(), w, k, exact, error,
                  relevance=mode, lexical_weight=lexical_weight, bm25=bm25)
    truth = exact(np.arange(len(c))).tolist()
    best, master, v, d, lex = fused_brute_force(
        c, truth, bm25.tolist(), raw.tolist(), w, k, mode, lexical_weight
    )
    assert ranked.best.tolist() == best
    for i in best:
        assert ranked.scored.score[i] == master[i]
        assert ranked.scored.relevance[i] == v[i]
        assert 0.0 <= ranked.scored.relevance[i] <= 1.0
        if mode != "lexical":
            assert ranked.cosine[i] == truth[i]
            assert ranked.dense[i] == d[i]
        if mode != "dense":
            assert ranked.lexical[i] == lex[i]
            assert ranked.bm25[i] == bm25[i]
    full = fused_brute_force(c, truth, bm25.tolist(), raw.tolist(), w, len(c), mode,
                             lexical_weight)[1]
    assert ranked.scored.score.min() == pytest.approx(min(full.values()), abs=1e-9)
    return ranked


WEIGHTS = [Weights(), Weights(recency_w=0.0, importance_w=0.0), Weights(2.0, 0.25, 1.0)]


@pytest.mark.parametrize("int8", [False, pytest.param(True, marks=pytest.mark.skipif(
    not int8_available(), reason="simsimd is not installed"))])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("lexical_weight", [0.0, 0.3, 0.5, 1.0])
@pytest.mark.parametrize("kind", ["ties", "zero", "equal"])
@pytest.mark.parametrize(("n", "k"), [(1, 5), (7, 3), (600, 30)])
def test_rank_equals_the_fused_brute_force(int8, mode, lexical_weight, kind, n, k):
    rng = np.random.default_rng(n + k + len(kind))
    c, vectors, q = stream_like(rng, n, 48, spread_hours=3.0)
    bm25 = lexical_scores(rng, n, kind)
    for w in WEIGHTS:
        check(c, vectors, q, bm25, w, k, mode, lexical_weight, int8=int8)


@pytest.mark.parametrize("seed", range(12))
def test_hybrid_is_exact_when_scores_crowd_the_kth(seed):
    """Many rows with near-equal cosines and equal BM25: the refinement slack must hold."""
    rng = np.random.default_rng(seed)
    n, dim = 3000, 64
    base = rng.standard_normal(dim).astype(np.float32)
    vectors = base + rng.standard_normal((n, dim)).astype(np.float32) * 1e-3
    c, _, _ = stream_like(rng, n, dim, spread_hours=1.0)
    bm25 = rng.choice([0.0, 4.0, 4.0, 4.0 + 1e-12], n)
    for mode in ("hybrid", "dense"):
        check(c, vectors, base.astype(np.float64), bm25, Weights(recency_w=0.0,
              importance_w=0.0), 10, mode, 0.5, int8=int8_available())


def test_all_zero_lexical_scores_leave_the_hybrid_to_the_dense_part():
    """A query with no known term: lexical is 0.5 everywhere and hybrid ranks as dense does,
    with the dense part's full spread (not squeezed into [w/2, 1 - w/2])."""
    dense = np.array([0.0, 0.25, 1.0])
    lexical = normalise_lexical(np.zeros(3))
    assert lexical.tolist() == [0.5, 0.5, 0.5]
    assert fuse_relevance(dense, lexical, "hybrid", 0.5) is dense
    assert fuse_relevance(dense, lexical, "lexical", 0.5).tolist() == [0.5, 0.5, 0.5]
    assert lexical_share("hybrid", 0.7, False, True) == 0.0
    assert lexical_share("hybrid", 0.7, True, False) == 1.0


def test_fusion_is_the_convex_combination_of_the_normalised_parts():
    dense = minmax(np.array([0.1, 0.5, 0.9]))
    lexical = normalise_lexical(np.array([3.0, 0.0, 1.5]))
    fused = fuse_relevance(dense, lexical, "hybrid", 0.25)
    assert fused.tolist() == [0.0 * 0.75 + 1.0 * 0.25, 0.5 * 0.75 + 0.0, 1.0 * 0.75 + 0.5 * 0.25]
    assert fuse_relevance(dense, lexical, "dense", 0.25) is dense
    assert fuse_relevance(dense, lexical, "lexical", 0.25).tolist() == lexical.tolist()
    with pytest.raises(ValueError, match="relevance"):
        fuse_relevance(dense, lexical, "sparse", 0.25)  # type: ignore[arg-type]


def test_rank_without_bm25_for_a_lexical_mode_says_so():
    c, vectors, q = stream_like(np.random.default_rng(0), 5, 8, spread_hours=1.0)
    with pytest.raises(ValueError, match="bm25"):
        rank(c, recency(c, "hours", 0.99, NOW), Weights(), 3, lambda i: i, 0.0,
             relevance="hybrid")


# ---------------------------------------------------------------- the retriever


class CountingEmbedding(DeterministicFakeEmbedding):
    """The fake embedding, counting query embeddings."""

    queries: int = 0

    def embed_query(self, text: str) -> list[float]:
        self.queries += 1
        return super().embed_query(text)


def physics_stream(**kw) -> MemoryStream:
    stream = MemoryStream("Klaus Mueller", embeddings=CountingEmbedding(size=16),
                          clock=lambda: datetime(2024, 5, 1, 12), **kw)
    stream.add_many([
        {"type": "event", "description": "Klaus checks the idle reactor's coolant pressure",
         "poignancy": 8, "embedding_key": "the idle reactor"},
        {"type": "event", "description": "Klaus 在实验室测量中子通量", "poignancy": 5},
        {"type": "event", "description": "Klaus eats lunch at Hobbs Cafe", "poignancy": 2},
        {"type": "event", "description": "Klaus is idle", "poignancy": 1,
         "embedding_key": "Klaus is idle"},
    ])
    return stream


def test_lexical_mode_needs_no_query_embedding_and_reports_bm25():
    stream = physics_stream()
    docs = GenerativeAgentsRetriever(stream=stream, relevance="lexical", k=2,
                                     recency_w=0, importance_w=0).invoke("中子通量")
    assert stream.embeddings.queries == 0
    meta = docs[0].metadata
    assert docs[0].page_content == "Klaus 在实验室测量中子通量"
    assert meta["bm25"] > 0 and meta["lexical"] == 1.0 == meta["relevance"]
    assert meta["cosine"] is None and meta["dense"] is None


def test_hybrid_metadata_shows_both_parts_and_the_fused_relevance():
    stream = physics_stream()
    docs = GenerativeAgentsRetriever(stream=stream, relevance="hybrid", lexical_weight=0.3,
                                     k=3).invoke("Hobbs Cafe lunch")
    assert stream.embeddings.queries == 1
    for doc in docs:
        m = doc.metadata
        assert m["relevance"] == pytest.approx(0.7 * m["dense"] + 0.3 * m["lexical"], abs=1e-15)
        assert m["cosine"] is not None and m["bm25"] is not None
    dense_docs = GenerativeAgentsRetriever(stream=stream, k=3).invoke("Hobbs Cafe lunch")
    assert all(d.metadata["lexical"] is None and d.metadata["bm25"] is None for d in dense_docs)
    assert all(d.metadata["relevance"] == d.metadata["dense"] for d in dense_docs)
    assert stream._mirror.lexical is not None  # built by the hybrid call only


def test_a_dense_retrieval_builds_no_lexical_index():
    stream = physics_stream()
    GenerativeAgentsRetriever(stream=stream, k=3).invoke("reactor")
    assert stream._mirror.lexical is None


def test_none_takes_the_personas_relevance_settings():
    stream = physics_stream()
    stream.update_settings(relevance_mode="lexical", lexical_weight=0.8)
    retriever = GenerativeAgentsRetriever(stream=stream, k=2)
    assert retriever.effective_relevance() == ("lexical", 0.8)
    retriever.invoke("中子")
    assert stream.embeddings.queries == 0
    own = GenerativeAgentsRetriever(stream=stream, relevance="hybrid", lexical_weight=0.1)
    assert own.effective_relevance() == ("hybrid", 0.1)


@pytest.mark.parametrize(("field", "value"), [("relevance", "sparse"), ("lexical_weight", 1.5),
                                              ("lexical_weight", -0.1)])
def test_bad_relevance_options_are_named(field, value):
    with pytest.raises(ValidationError, match=field):
        GenerativeAgentsRetriever(stream=physics_stream(), **{field: value})


def test_the_lexical_index_is_never_stale_after_adds():
    stream = physics_stream()
    retriever = GenerativeAgentsRetriever(stream=stream, relevance="lexical", k=1,
                                          recency_w=0, importance_w=0)
    assert retriever.invoke("超导磁体")[0].metadata["bm25"] == 0.0  # no memory holds it
    stream.add_event("Klaus 调试超导磁体", poignancy=3)
    doc = retriever.invoke("超导磁体")[0]
    assert doc.page_content == "Klaus 调试超导磁体" and doc.metadata["bm25"] > 0
    index = stream._mirror.lexical
    assert len(index) == len(stream)
    fresh = index.scores("超导磁体", np.arange(len(stream)))
    rebuilt = type(index)()
    rebuilt.sync(stream.columns)
    assert fresh.tolist() == rebuilt.scores("超导磁体", np.arange(len(stream))).tolist()


def test_the_idle_filter_drops_idle_memories_by_default():
    stream = physics_stream()
    report = GenerativeAgentsRetriever(stream=stream, k=10).retrieve_with_report("reactor")
    texts = [d.page_content for d in report.documents]
    assert "Klaus checks the idle reactor's coolant pressure" not in texts
    assert report.skipped_idle == 2 and report.candidate_count == 2


@pytest.mark.parametrize("mode", ["hours", "reverie"])
@pytest.mark.parametrize("relevance", MODES)
def test_idle_filter_off_keeps_the_idle_reactor(mode, relevance):
    stream = physics_stream()
    retriever = GenerativeAgentsRetriever(stream=stream, k=10, idle_filter=False,
                                          recency_mode=mode, relevance=relevance)
    report = retriever.retrieve_with_report("the idle reactor coolant")
    texts = [d.page_content for d in report.documents]
    assert "Klaus checks the idle reactor's coolant pressure" in texts
    assert report.skipped_idle == 0 and report.candidate_count == 4
    if relevance != "dense":
        assert texts[0] == "Klaus checks the idle reactor's coolant pressure" or mode == "reverie"
    # the filter on again: the same stream, the original's candidates
    again = GenerativeAgentsRetriever(stream=stream, k=10, recency_mode=mode,
                                      relevance=relevance).retrieve_with_report("reactor")
    assert again.skipped_idle == 2 and again.candidate_count == 2


def test_reverie_order_is_right_with_and_without_the_idle_filter():
    """One kept access order serves both candidate sets (idle rows dropped from it)."""
    stream = physics_stream()

    def result(idle_filter: bool) -> list[tuple[str, float]]:
        docs = GenerativeAgentsRetriever(stream=stream, k=10, idle_filter=idle_filter,
                                         recency_mode="reverie").invoke("Klaus reactor")
        return [(d.metadata["node_id"], d.metadata["score"]) for d in docs]

    for idle_filter in (True, False, True, False, False, True):
        got = result(idle_filter)
        stream.columns._order = None  # the order sorted afresh
        stream.columns._moved = []
        assert len(got) == (2 if idle_filter else 4)
        # same access times as before the call (update_access moved them): compare orders
        assert [i for i, _ in got] == [i for i, _ in sorted(got, key=lambda x: -x[1])]


def test_database_scoring_with_lexical_relevance_is_refused_by_name():
    stream = physics_stream()
    with pytest.raises(ValidationError, match="relevance"):
        GenerativeAgentsRetriever(stream=stream, score_in="database", relevance="hybrid")
    with pytest.raises(ValidationError, match="idle_filter"):
        GenerativeAgentsRetriever(stream=stream, score_in="database", idle_filter=False)
    stream.update_settings(relevance_mode="hybrid")
    retriever = GenerativeAgentsRetriever(stream=stream, score_in="database")
    with pytest.raises(ValidationError, match="relevance"):
        retriever.invoke("reactor")


def test_rows_of_a_repeated_stream_rank_the_same_in_hybrid_with_either_first_pass():
    from tests.support.scoring_cases import repeated_stream

    stream, _ = repeated_stream(3, 5000, (40, 64), 1e-4, 4, 7)
    results = []
    for first_pass in ("int8", "float32"):
        retriever = GenerativeAgentsRetriever(stream=stream, k=20, relevance="hybrid",
                                              first_pass=first_pass, update_access=False)
        results.append([(d.metadata["node_id"], d.metadata["score"])
                        for d in retriever.invoke("记忆 7")])
    assert results[0] == results[1]
    assert len(results[0]) == 20


def test_lexical_scores_survive_a_restart(tmp_path):
    """The index is rebuilt from the stored nodes on the first lexical query after an open."""
    stream = physics_stream(path=str(tmp_path / "store"))
    stream.add_event("Klaus 调试超导磁体", poignancy=3)
    ask = dict(relevance="hybrid", k=5, update_access=False)
    before = [(d.metadata["node_id"], d.metadata["bm25"], d.metadata["score"])
              for d in GenerativeAgentsRetriever(stream=stream, **ask).invoke("超导磁体 reactor")]
    stream.close()
    again = MemoryStream("Klaus Mueller", embeddings=CountingEmbedding(size=16),
                         clock=lambda: datetime(2024, 5, 1, 12), path=str(tmp_path / "store"))
    assert again._mirror.lexical is None
    after = [(d.metadata["node_id"], d.metadata["bm25"], d.metadata["score"])
             for d in GenerativeAgentsRetriever(stream=again, **ask).invoke("超导磁体 reactor")]
    assert after == before and before[0][1] > 0
    again.close()


def test_the_share_used_is_told_so_the_parts_add_up_to_the_relevance():
    """A hybrid retrieval whose query words occur in no memory ranks by the dense part alone;
    its documents say so (``lexical_share`` 0), so the parts shown add up to the relevance."""
    stream = physics_stream()
    retriever = GenerativeAgentsRetriever(stream=stream, relevance="hybrid", k=3)
    for query, share in [("超导磁体", 0.0), ("中子通量 lunch", 0.25)]:
        report = retriever.retrieve_with_report(query)
        assert report.lexical_share == share
        for doc in report.documents:
            m = doc.metadata
            assert m["lexical_share"] == share
            mixed = (1 - share) * m["dense"] + share * m["lexical"]
            assert m["relevance"] == pytest.approx(mixed, abs=1e-15)
    assert retriever.invoke("超导磁体")[0].metadata["bm25"] == 0.0
    lexical = GenerativeAgentsRetriever(stream=stream, relevance="lexical", k=1).invoke("中子")
    dense = GenerativeAgentsRetriever(stream=stream, k=1).invoke("中子")
    assert (lexical[0].metadata["lexical_share"], dense[0].metadata["lexical_share"]) == (1, 0)
