"""Exact, incremental BM25 over a persona's memories (lexical.py) and its tokens (tokens.py)."""

from __future__ import annotations

import math
from collections import Counter
from datetime import datetime
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from langchain_genmem import MemoryStream
from langchain_genmem.core.errors import GenMemError, ValidationError
from langchain_genmem.core.nodes import MemoryNode
from langchain_genmem.core.tokens import tokens
from langchain_genmem.numerics.lexical import (
    BM25_B,
    BM25_K1,
    LexicalIndex,
    indexed_text,
)

WHEN = datetime(2023, 2, 13, 9, 0)


def node(row: int, description: str, **fields: object) -> MemoryNode:
    return MemoryNode(
        node_id=f"node_{row + 1}", node_count=row + 1, type_count=row + 1, type="event",
        depth=0, created=WHEN, last_accessed=WHEN, description=description,
        embedding_key=description, poignancy=3, **fields,
    )


class FakeCache:
    """What the index reads of a NodeCache: its rows' nodes and which rows are dead."""

    def __init__(self, texts: list[str] | None = None) -> None:
        self.nodes: list[MemoryNode] = []
        self.alive = np.zeros(0, dtype=bool)
        for text in texts or []:
            self.append(text)

    @property
    def n(self) -> int:
        return len(self.nodes)

    @property
    def dead(self) -> int:
        return int(self.n - self.alive[: self.n].sum())

    def append(self, description: str, **fields: object) -> None:
        self.nodes.append(node(len(self.nodes), description, **fields))
        self.alive = np.append(self.alive, True)

    def forget(self, rows: list[int]) -> None:
        self.alive = self.alive.copy()
        self.alive[rows] = False


def reference_bm25(docs: list[list[str]], query: list[str]) -> np.ndarray:
    """BM25 written out term by term in float64 (Lucene idf, classic tf part)."""
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n
    out = np.zeros(n)
    for term in dict.fromkeys(query):
        df = sum(term in d for d in docs)
        if df == 0:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for i, doc in enumerate(docs):
            tf = Counter(doc)[term]
            if tf:
                norm = tf + BM25_K1 * (1 - BM25_B + BM25_B * len(doc) / avgdl)
                out[i] += idf * tf * (BM25_K1 + 1) / norm
    return out


ENGLISH = [
    "Isabella Rodriguez is opening Hobbs Cafe in the morning",
    "Maria Lopez is studying physics for her exam",
    "Klaus Mueller is writing a research paper about gentrification",
    "Maria is drinking coffee at Hobbs Cafe with Klaus",
    "the refrigerator is idle",
    "Isabella plans a Valentine's Day party at Hobbs Cafe, Hobbs Cafe, Hobbs Cafe",
]
CHINESE = [
    "伊莎贝拉在霍布斯咖啡馆准备情人节派对",
    "玛丽亚正在学习物理，准备考试",
    "克劳斯在写一篇关于城市绅士化的论文",
    "玛丽亚和克劳斯在咖啡馆喝咖啡",
]
MIXED = [
    "Maria 在 Hobbs Cafe 学习物理",
    "Klaus 在图书馆写 research paper",
    "Isabella 邀请 Maria 参加 Valentine's Day 派对",
]
ALL = ENGLISH + CHINESE + MIXED
QUERIES = [
    "Hobbs Cafe",
    "Maria studies physics",
    "学习物理",
    "Maria 在 Hobbs Cafe 学习物理",
    "克劳斯 research",
    "coffee 咖啡",
    "VALENTINE'S party 派对",
    "nothing matches zebra",
]


def index_of(texts: list[str]) -> tuple[LexicalIndex, FakeCache]:
    cache = FakeCache(texts)
    index = LexicalIndex()
    index.sync(cache)
    return index, cache


def expected(cache: FakeCache, query: str) -> np.ndarray:
    return reference_bm25([tokens(indexed_text(x)) for x in cache.nodes], tokens(query))


# --- tokens -------------------------------------------------------------------------------


def test_tokens_of_mixed_english_and_chinese():
    assert tokens("Maria 在 Hobbs Cafe 学习物理") == ["maria", "hobb", "cafe", "学习", "物理"]


def test_tokens_fold_width_and_case_and_stem():
    assert tokens("ＨＯＢＢＳ Café STUDYING studies") == ["hobb", "café", "studi", "studi"]


def test_tokens_drop_stop_words_and_punctuation():
    assert tokens("the of and, ... !!! ——的了") == []
    assert tokens("") == []
    assert tokens("idle_reactor") == ["idl", "reactor"]
    assert tokens("Valentine's party, don't we'll") == ["valentin", "parti", "don"]


def test_tokens_without_stemming():
    assert tokens("Maria STUDIES at Hobbs", stem=False) == ["maria", "studies", "hobbs"]


def test_tokens_segment_chinese_words():
    assert tokens("玛丽亚正在学习物理") == ["玛丽亚", "正在", "学习", "物理"]


# --- exact BM25 ---------------------------------------------------------------------------


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("corpus", [ENGLISH, CHINESE, MIXED, ALL], ids=["en", "zh", "mixed", "all"])
def test_scores_equal_the_formula(corpus, query):
    index, cache = index_of(corpus)
    rows = np.arange(cache.n)
    got = index.scores(query, rows)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, expected(cache, query), rtol=1e-12, atol=0)


def test_an_index_with_another_tokenizer():
    whole = partial(tokens, stem=False)
    cache = FakeCache(ALL)
    index = LexicalIndex(tokenizer=whole)
    index.sync(cache)
    assert index.terms("Maria studies 学习 studies") == ["maria", "studies", "学习"]
    want = reference_bm25([whole(indexed_text(x)) for x in cache.nodes], whole("studying physics"))
    np.testing.assert_allclose(index.scores("studying physics", np.arange(cache.n)), want,
                               rtol=1e-12, atol=0)
    assert index.scores("studies", [1])[0] == 0.0  # row 1 says "studying": no stem, no match
    stemmed, _ = index_of(ALL)
    assert stemmed.scores("studies", [1])[0] > 0


def test_scores_follow_the_given_rows():
    index, cache = index_of(ALL)
    rows = np.array([12, 0, 3, 3, 9])
    full = index.scores("Maria 在 Hobbs Cafe 学习物理", np.arange(cache.n))
    np.testing.assert_array_equal(index.scores("Maria 在 Hobbs Cafe 学习物理", rows), full[rows])
    assert full[0] > 0 and full[2] == 0.0  # Hobbs Cafe vs Klaus's paper
    assert index.scores("Hobbs", []).shape == (0,)


def test_a_known_value_by_hand():
    # Two documents: "cafe" (1 term) and "cafe cafe maria" (3 terms); avgdl = 2, N = 2, df = 2.
    index, _ = index_of(["cafe", "cafe cafe maria"])
    idf = math.log(1 + 0.5 / 2.5)
    first = idf * 1 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 1 / 2))
    second = idf * 2 * 2.2 / (2 + 1.2 * (0.25 + 0.75 * 3 / 2))
    np.testing.assert_allclose(index.scores("Cafe", [0, 1]), [first, second], rtol=1e-15)


def test_keywords_and_triple_are_indexed_once():
    cache = FakeCache()
    cache.append("an ordinary morning", subject="Isabella Rodriguez", predicate="is",
                 object="the Ville:Hobbs Cafe:counter", keywords=["counter", "COUNTER", "咖啡"])
    assert indexed_text(cache.nodes[0]) == (
        "an ordinary morning\ncounter\n咖啡\nIsabella Rodriguez\nis\nthe Ville:Hobbs Cafe:counter"
    )
    index = LexicalIndex()
    index.sync(cache)
    assert index.scores("咖啡 counter", [0])[0] > 0
    assert index.scores("Rodriguez", [0])[0] > 0


@pytest.mark.parametrize("query", ["", "   ", "the of and", "!!! ... ，。", "的了", "zebra"])
def test_queries_without_a_known_term_give_zeros(query):
    index, cache = index_of(ALL)
    got = index.scores(query, np.arange(cache.n))
    np.testing.assert_array_equal(got, np.zeros(cache.n))


def test_an_empty_index_and_stop_word_only_memories():
    index, cache = index_of([])
    assert index.scores("Hobbs", np.arange(0)).shape == (0,)
    index, cache = index_of(["the of and", "!!!"])
    np.testing.assert_array_equal(index.scores("Hobbs the", [0, 1]), [0.0, 0.0])


def test_rows_beyond_the_index_are_refused():
    index, _ = index_of(ENGLISH)
    with pytest.raises(ValidationError, match="rows") as err:
        index.scores("Hobbs", [0, len(ENGLISH)])
    assert isinstance(err.value, GenMemError)
    with pytest.raises(ValidationError, match="rows"):
        index.scores("Hobbs", [-1])


def test_bad_parameters_are_refused():
    with pytest.raises(ValidationError, match="k1"):
        LexicalIndex(k1=float("nan"))
    with pytest.raises(ValidationError, match="b"):
        LexicalIndex(b=1.5)


# --- incremental and coherent -------------------------------------------------------------


def test_incremental_adds_equal_a_full_rebuild():
    cache = FakeCache()
    growing = LexicalIndex()
    for i, text in enumerate(ALL):
        cache.append(text)
        if i % 3 == 0 or i == len(ALL) - 1:
            assert growing.sync(cache) > 0
    assert growing.sync(cache) == 0
    fresh, _ = index_of(ALL)
    rows = np.arange(cache.n)
    for query in QUERIES:
        np.testing.assert_allclose(
            growing.scores(query, rows), fresh.scores(query, rows), rtol=1e-12, atol=0
        )
        np.testing.assert_allclose(growing.scores(query, rows), expected(cache, query),
                                   rtol=1e-12, atol=0)


def test_scores_change_with_adds_without_going_stale():
    cache = FakeCache(ENGLISH)
    index = LexicalIndex()
    index.sync(cache)
    before = index.scores("Hobbs Cafe", np.arange(cache.n))
    cache.append("Hobbs Cafe 关门了")
    index.sync(cache)
    after = index.scores("Hobbs Cafe", np.arange(cache.n))
    assert after[-1] > 0
    assert not np.allclose(after[:-1], before)  # N, df and avgdl moved with the add
    np.testing.assert_allclose(after, expected(cache, "Hobbs Cafe"), rtol=1e-12)


def test_a_changed_description_is_reindexed():
    index, cache = index_of(ALL)
    cache.nodes[1] = node(1, "Maria 在 Hobbs Cafe 学习物理 and physics")
    cache.nodes[7] = node(7, "the of")  # now only stop words
    assert index.reindex(cache, [1, 7]) == 2
    fresh, _ = index_of([x.description for x in cache.nodes])
    rows = np.arange(cache.n)
    for query in QUERIES:
        np.testing.assert_allclose(index.scores(query, rows), fresh.scores(query, rows),
                                   rtol=1e-12, atol=0)
        np.testing.assert_allclose(index.scores(query, rows), expected(cache, query),
                                   rtol=1e-12, atol=0)


def test_sync_recheck_finds_changed_rows():
    index, cache = index_of(ALL)
    cache.nodes[4] = node(4, "克劳斯 bought a zebra")
    assert index.sync(cache) == 0  # the row count alone does not see an edit
    assert index.scores("zebra", [4])[0] == 0.0
    assert index.sync(cache, recheck=True) == 1
    np.testing.assert_allclose(index.scores("zebra 克劳斯", np.arange(cache.n)),
                               expected(cache, "zebra 克劳斯"), rtol=1e-12)


def test_dead_rows_leave_the_statistics_as_if_never_indexed():
    # forgotten memories keep their rows; the live rows score as in an index of them alone
    index, cache = index_of(ALL)
    gone = [1, 4, len(ALL) - 1]
    cache.forget(gone)
    assert index.sync(cache) == 0  # no row added: the dead ones are taken all the same
    assert index.live_count == len(ALL) - len(gone)
    live = [r for r in range(cache.n) if r not in gone]
    fresh, _ = index_of([ALL[r] for r in live])
    for query in QUERIES:
        np.testing.assert_allclose(index.scores(query, live),
                                   fresh.scores(query, np.arange(len(live))), rtol=1e-12, atol=0)
    assert index.forget_rows(cache, gone) == 0  # marked once
    cache.append("Hobbs Cafe 关门了")  # rows added after keep their place
    index.sync(cache)
    fresh, _ = index_of([*(ALL[r] for r in live), "Hobbs Cafe 关门了"])
    np.testing.assert_allclose(index.scores("Hobbs Cafe", [*live, cache.n - 1]),
                               fresh.scores("Hobbs Cafe", np.arange(len(live) + 1)), rtol=1e-12)


def test_reindex_refuses_unknown_rows():
    index, cache = index_of(ENGLISH)
    with pytest.raises(ValidationError, match="rows"):
        index.reindex(cache, [len(ENGLISH)])


def test_a_shorter_cache_is_indexed_afresh():
    index, _ = index_of(ALL)
    other = FakeCache(CHINESE)
    index.sync(other)
    assert len(index) == len(CHINESE)
    np.testing.assert_allclose(index.scores("咖啡馆", np.arange(other.n)),
                               expected(other, "咖啡馆"), rtol=1e-12)


# --- a real stream: adds, restart ---------------------------------------------------------


def test_scores_survive_a_restart_of_a_real_stream(tmp_path: Path):
    stream = MemoryStream("玛丽亚", path=tmp_path)
    index = LexicalIndex()
    stream.add_event(ENGLISH[1], poignancy=4)
    index.sync(stream.columns)
    for text in MIXED + CHINESE[:2]:
        stream.add_event(text, poignancy=4)
    stream.add_thought("玛丽亚喜欢物理", poignancy=6, subject="玛丽亚", predicate="喜欢",
                       object="物理")
    index.sync(stream.columns)  # catches up with the adds since the first sync
    rows = np.arange(len(stream))
    before = {q: index.scores(q, rows) for q in QUERIES + ["喜欢物理"]}
    stream.close()

    reopened = MemoryStream("玛丽亚", path=tmp_path)
    fresh = LexicalIndex()
    fresh.sync(reopened.columns)
    assert len(fresh) == len(reopened) == len(rows)
    for query, scores in before.items():
        np.testing.assert_allclose(fresh.scores(query, rows), scores, rtol=1e-12, atol=0)
    assert before["学习物理"][1] > 0 and before["喜欢物理"][-1] > 0
    reopened.close()


def test_queries_while_another_thread_adds():
    import threading

    cache = FakeCache(ALL[:3])
    index = LexicalIndex()
    index.sync(cache)
    errors: list[BaseException] = []

    def query() -> None:
        try:
            for _ in range(200):
                n = len(index)
                got = index.scores("Maria 在 Hobbs Cafe 学习物理", np.arange(n))
                assert got.shape == (n,) and np.isfinite(got).all()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    reader = threading.Thread(target=query)
    reader.start()
    for text in ALL[3:] * 20:
        cache.append(text)
        index.sync(cache)
    reader.join()
    assert errors == []
    np.testing.assert_allclose(index.scores("Hobbs 学习", np.arange(cache.n)),
                               expected(cache, "Hobbs 学习"), rtol=1e-12)
