"""One set of input rules for library and CLI; errors name the field and what is allowed."""

from __future__ import annotations

import math
from datetime import datetime

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import GenerativeAgentsRetriever, GenMemError, MemoryStream, ValidationError
from langchain_genmem.core import validation

FAKE = DeterministicFakeEmbedding(size=16)


@pytest.fixture
def stream() -> MemoryStream:
    s = MemoryStream("玛丽亚", embeddings=FAKE, clock=lambda: datetime(2023, 2, 13, 9))
    s.add_event("玛丽亚在吃早餐", poignancy=2)
    return s


def test_unknown_retriever_arguments_raise_naming_each_with_a_suggestion(stream):
    with pytest.raises(ValidationError) as caught:
        GenerativeAgentsRetriever(stream=stream, relevence_w=2, recency_mod="rank")
    text = str(caught.value)
    assert "'relevence_w' (did you mean 'relevance_w'?)" in text
    assert "'recency_mod' (did you mean 'recency_mode'?)" in text
    assert isinstance(caught.value, GenMemError) and caught.value.field == "relevence_w"


def test_the_stream_alias_and_the_field_name_both_work(stream):
    assert GenerativeAgentsRetriever(stream=stream).memory_stream is stream
    assert GenerativeAgentsRetriever(memory_stream=stream, k=2).k == 2


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"recency_decay": 1.5}, "recency_decay: expected a number in (0, 1]"),
    ({"recency_decay": 0}, "recency_decay: expected a number in (0, 1]"),
    ({"recency_decay": math.nan}, "recency_decay: expected a number in (0, 1]"),
    ({"recency_w": math.nan}, "recency_w: expected a finite number"),
    ({"relevance_w": math.inf}, "relevance_w: expected a finite number"),
    ({"importance_w": -1}, "importance_w: expected a finite number >= 0"),
    ({"gains": (0.5, -3, 2)}, "gains[1]: expected a finite number >= 0"),
    ({"k": -1}, "k: expected an integer >= 0"),
    ({"k": 2.5}, "k: expected an integer >= 0"),
])
def test_retriever_values_out_of_range_raise(stream, kwargs, says):
    with pytest.raises(ValidationError) as caught:
        GenerativeAgentsRetriever(stream=stream, **kwargs)
    assert says in str(caught.value)
    assert str(caught.value).startswith("GenerativeAgentsRetriever: ")


@pytest.mark.parametrize("query", ["", "   ", "\n"])
def test_an_empty_query_raises_and_touches_nothing(stream, query):
    before = stream.get("node_1").last_accessed
    retriever = GenerativeAgentsRetriever(stream=stream)
    for call in (retriever.invoke, retriever.retrieve_with_report, retriever.nodes_for):
        with pytest.raises(ValidationError, match="query: expected a non-empty text"):
            call(query)
    with pytest.raises(ValidationError, match="k: expected an integer >= 0"):
        retriever.invoke("早餐", k=-3)
    assert stream.get("node_1").last_accessed == before


@pytest.mark.parametrize(("changes", "says"), [
    ({"recency_decay": 0}, "recency_decay: expected a number in (0, 1]"),
    ({"recency_decay": 2}, "recency_decay: expected a number in (0, 1]"),
    ({"recency_w": -1}, "recency_w: expected a finite number >= 0"),
    ({"importance_trigger_max": math.nan}, "importance_trigger_max: expected a finite number"),
])
def test_settings_follow_the_same_rules(stream, changes, says):
    with pytest.raises(ValidationError, match=rf"^{says.replace('(', '.').replace(')', '.')}"):
        stream.update_settings(**changes)
    assert stream.state.recency_decay == 0.99 and stream.state.recency_w == 1


@pytest.mark.parametrize("value", [0, 0.5, 11, -1, math.nan, "high", True])
def test_poignancy_is_on_the_original_scale(stream, value):
    pattern = r"^items\[0\]\.poignancy: expected a number from 1 \(mundane\) to 10 \(poignant\)"
    with pytest.raises(ValidationError, match=pattern):
        stream.add_event("玛丽亚在散步", poignancy=value)
    assert len(stream) == 1


def test_the_checks_return_normalised_values():
    assert validation.decay(1) == 1.0 and validation.weight(0, "w") == 0.0
    assert validation.top_k(3.0) == 3 and validation.poignancy(10) == 10.0
    assert validation.query(" 早餐 ") == " 早餐 "
    with pytest.raises(ValidationError, match="q: expected a text, got int"):
        validation.query(3, "q")


def test_the_agent_recalls_nothing_for_an_empty_message(stream):
    from langchain_core.language_models import FakeListChatModel

    from langchain_genmem.agent import create_memory_agent

    model = FakeListChatModel(responses=["你好！", "1. 2\n2. 2\n3. 2"])
    out = create_memory_agent(model, stream, reflect=False).invoke({"messages": [("user", " ")]})
    assert out["recalled"] == [] and out["messages"][-1].content == "你好！"


@pytest.mark.parametrize("name", ["玛丽亚 Lopez", "Isabella Rodriguez", "李 小 龙", "x" * 200])
def test_persona_names_in_any_script_with_spaces_are_fine(name):
    assert validation.persona_name(name) == name
    assert MemoryStream(name, embeddings=FAKE).persona == name


@pytest.mark.parametrize(("name", "says"), [
    ("a\x00b", "control character.*'\\\\x00' at position 1"),
    ("玛丽亚\n", "control character"),
    ("tab\there", "control character"),
    ("del\x7f", "control character"),
    ("c1\x85", "control character"),
    ("lone \ud800", "unpaired surrogate"),
    ("x" * 201, "201 characters; a persona name has at most 200"),
    ("   ", "non-empty name"),
    (None, "non-empty name"),
])
def test_bad_persona_names_are_refused_naming_the_persona_and_the_rule(name, says):
    with pytest.raises(ValidationError, match=says) as e:
        validation.persona_name(name)
    assert e.value.field == "persona"
    if isinstance(name, str) and name.strip():
        assert repr(name[:10])[1:-1] in str(e.value)  # the persona is named
    # before any store is asked: this DSN would fail on any connection attempt
    with pytest.raises(ValidationError, match=says):
        MemoryStream(name, dsn="postgresql://nobody@/x?host=/nonexistent-genmem-socket")


class BadEmbeddings(DeterministicFakeEmbedding):
    """An embedding model that returns NaN or infinity for some texts."""

    bad: float = math.nan
    on: str = "query"

    def embed_query(self, text: str) -> list[float]:
        vector = super().embed_query(text)
        return [self.bad] * len(vector) if self.on == "query" else vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors = super().embed_documents(texts)
        if self.on == "documents":
            vectors[-1][3] = self.bad
        return vectors


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("first_pass", ["float32", "int8"])
def test_a_non_finite_query_vector_is_refused_not_an_empty_ok(bad, first_pass):
    stream = MemoryStream("玛丽亚", embeddings=BadEmbeddings(size=16, bad=bad),
                          clock=lambda: datetime(2023, 2, 13, 9))
    stream.add_many([{"type": "event", "description": f"玛丽亚在学习 {i}", "poignancy": 2}
                     for i in range(40)])
    retriever = GenerativeAgentsRetriever(stream=stream, k=5, first_pass=first_pass)
    with pytest.raises(ValidationError, match="query embedding: 16 of its 16 numbers are NaN"):
        retriever.invoke("物理")
    assert all(n.last_accessed == n.created for n in stream.nodes())


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_non_finite_vector_from_the_model_is_refused_on_add(bad):
    stream = MemoryStream("玛丽亚", embeddings=BadEmbeddings(size=16, bad=bad, on="documents"))
    with pytest.raises(ValidationError, match="embedding of '第二'.*NaN or infinite"):
        stream.add_many([{"type": "event", "description": d, "poignancy": 2}
                         for d in ("第一", "第二")])
    assert len(stream) == 0
    with pytest.raises(ValidationError, match="finite"):
        stream.add_event("given", poignancy=2, embedding=[bad] * 16)


def test_finite_vector_refuses_shapes_and_returns_float64():
    assert validation.finite_vector([1, 2]).dtype == "float64"
    for value in ([], [[1.0, 2.0]], "abc"):
        with pytest.raises(ValidationError, match="embedding"):
            validation.finite_vector(value)


@pytest.mark.parametrize("name", ["a\x00b", "伊莎贝拉\x01"])
def test_the_service_refuses_a_bad_persona_name_on_a_read_too(tmp_path, name):
    from fastapi.testclient import TestClient

    from langchain_genmem.cli import Store
    from langchain_genmem.service import create_app, create_service

    service = create_service(Store(tmp_path / "store", now=datetime(2023, 2, 14, 9)))
    with TestClient(create_app(service)) as client:
        r = client.post("/retrieve", json={"persona_name": name, "focal_text": "派对"})
    assert r.status_code == 422, r.text
    assert "control character" in r.json()["message"]


@pytest.mark.parametrize(("call", "field"), [
    (lambda s: s.nodes(type="闲聊"), "type"),
    (lambda s: GenerativeAgentsRetriever(stream=s, recency_mode="最近"), "recency_mode"),
    (lambda s: GenerativeAgentsRetriever(stream=s, time_in_query="上周"), "time_in_query"),
])
def test_a_name_outside_its_set_is_refused_naming_the_field_and_the_choices(stream, call, field):
    said = f"{field}: (expected one of .+, got|Input should be) '"
    with pytest.raises((ValidationError, ValueError), match=said):
        call(stream)
    with pytest.raises(ValidationError, match="mode: expected one of a, b, got 'c'"):
        validation.one_of("c", ("a", "b"), "mode")
