"""Hostile model replies through the parsers, the importance scorer and a forced reflection.

Every case of :mod:`tests.support.hostile_replies` runs under its own hang guard
(pytest-timeout's per-test limit: a reply that sends a parser into quadratic time fails
the case instead of stalling the suite). Nothing may raise but the package's documented
``ParseError`` (a single rating with no number), and nothing written may be empty, over the
thought limit, without a letter, unclean, or cite a memory that does not exist.
"""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from langchain_genmem import MemoryStream, ParseError
from langchain_genmem.core.text import has_letter, limits
from langchain_genmem.core.timeutil import SimulationClock
from langchain_genmem.llm.importance import ImportanceScorer
from langchain_genmem.llm.parsers import (
    parse_focal_points,
    parse_insights,
    parse_rating,
    parse_ratings,
    parse_triple,
    parse_triples,
)
from langchain_genmem.reflection import create_reflection_graph
from langchain_genmem.reflection.conversation import sentence
from tests.support.hostile_replies import StrictEmbedding, hostile_replies

CASES = hostile_replies()
IDS = [name for name, _ in CASES]
REPLIES = [reply for _, reply in CASES]
GUARD = pytest.mark.timeout(20)  # a hang guard per case, not a timing assertion

PERSONA = "Maria Lopez"
T0 = datetime(2023, 2, 13, 9, 0)
FOCAL = "most salient high-level questions"
INSIGHTS = "high-level insights can you infer"
QUESTION = "What does Maria Lopez study?"


def test_the_corpus_is_large_and_varied():
    assert len(CASES) >= 150
    assert len(set(IDS)) == len(IDS)
    joined = "".join(REPLIES)
    for needle in ("", "\x00", "\ud800", "½", "⑦", "٣", "七", "\u202e", "😀", "```", "|---|"):
        assert needle in joined
    assert max(map(len, REPLIES)) >= 200_000


class RoutedChatModel(BaseChatModel):
    """Replies with ``route(human prompt)``; thread-safe, counts its calls."""

    route: Callable[[str], str]
    calls: int = 0
    lock: Any = Field(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "routed"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **_: Any
    ) -> ChatResult:
        with self.lock:
            self.calls += 1
        text = self.route(str(messages[-1].content))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])


def _clean(text: str) -> bool:
    """Valid Unicode (encodable) and without NUL."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


def _good_thought(text: str) -> bool:
    return bool(text.strip()) and len(text) <= limits().thought and has_letter(text) and _clean(
        text
    )


@pytest.fixture(scope="module")
def stream() -> MemoryStream:
    """One stream for the whole module: each forced reflection adds its thoughts to it."""
    clock = SimulationClock(T0)
    stream = MemoryStream(PERSONA, embeddings=DeterministicFakeEmbedding(size=16), clock=clock)
    texts = ["Maria Lopez is studying physics", "Klaus Mueller is writing a paper",
             "玛丽亚在霍布斯咖啡馆吃午饭", "Maria Lopez is streaming on Twitch"]
    for i, text in enumerate(texts, 1):
        clock.now = T0 + timedelta(minutes=i)
        stream.add_event(text, subject=PERSONA, predicate="is", object=text, poignancy=5)
    clock.now = T0 + timedelta(hours=1)
    return stream


@GUARD
@pytest.mark.parametrize("reply", REPLIES, ids=IDS)
def test_parsers_survive(reply: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a truncated reply is reported by a warning
        try:
            rating = parse_rating(reply)
        except ParseError:
            rating = 1
        ratings = parse_ratings(reply, 3)
        questions = parse_focal_points(reply)
        insights = parse_insights(reply)
        triple = parse_triple(reply, "Maria")
        triples = parse_triples(reply, 3, "Maria")
    assert rating >= 1 and rating <= 10  # on the original 1..10 scale
    assert len(ratings) == 3
    assert all(r is None or 1 <= r <= 10 for r in ratings)
    assert all(_good_thought(q) for q in questions), questions
    assert all(_good_thought(text) for text, _ in insights), insights
    assert all(isinstance(n, int) and n >= 0 for _, cited in insights for n in cited)
    assert len(triples) == 3
    for found in [triple, *triples]:
        assert found is None or (
            len(found) == 3 and all(part and _clean(part) for part in found)
        ), found


@GUARD
@pytest.mark.parametrize("reply", REPLIES, ids=IDS)
def test_conversation_sentences_survive(reply: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = sentence(PERSONA, reply)
    assert found is None or (_good_thought(found) and found.startswith(PERSONA))


@GUARD
@pytest.mark.parametrize("reply", REPLIES, ids=IDS)
def test_importance_scorer_survives(reply: str):
    model = RoutedChatModel(route=lambda _: reply)
    scorer = ImportanceScorer(model)
    items = [("event", "Maria Lopez is studying physics"), ("chat", "玛丽亚：你好")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            scores = scorer.score_many(PERSONA, items)
        except ParseError:  # the documented outcome of a reply without a number
            return
    assert len(scores) == 2
    assert all(1 <= s <= 10 for s in scores)


def _check_reflection(stream: MemoryStream, route: Callable[[str], str]) -> dict[str, Any]:
    before = {node.node_id for node in stream.nodes()}
    graph = create_reflection_graph(RoutedChatModel(route=route), stream, force=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = graph.invoke({})
    assert out["status"] in ("reflected", "no_insights", "no_questions")
    assert all(_good_thought(q) for q in out["focal_points"])
    for node_id in out["written"]:
        node = stream.get(node_id)
        assert _good_thought(node.description), node.description
        assert node.filling, "a thought cites its evidence"
        assert set(node.filling) <= before, "evidence must be memories that existed"
        assert node.poignancy >= 1 and node.poignancy <= 10
        assert all(_clean(x) for x in (node.subject, node.predicate, node.object))
    return out


@GUARD
@pytest.mark.parametrize("reply", REPLIES, ids=IDS)
def test_forced_reflection_with_every_reply_hostile(stream: MemoryStream, reply: str):
    _check_reflection(stream, lambda _: reply)


@GUARD
@pytest.mark.parametrize("reply", REPLIES, ids=IDS)
def test_forced_reflection_with_hostile_insights_triples_and_ratings(
    stream: MemoryStream, reply: str
):
    # Good questions, so that the hostile reply reaches the insights; one good insight
    # beside it, so that the triple and rating calls (answered by the hostile reply) run.
    def route(human: str) -> str:
        if FOCAL in human:
            return QUESTION
        if INSIGHTS in human:
            return f"Maria Lopez loves physics [0]\n{reply}"
        return reply

    out = _check_reflection(stream, route)
    assert out["status"] == "reflected"  # the good insight is written whatever the reply


@GUARD
def test_a_surrogate_in_a_reply_reaches_no_encoder():
    # The hostile question reaches the retriever's embedding call: with an encoder that
    # refuses lone surrogates (as tokenizers and HTTP clients do) the run must still work.
    clock = SimulationClock(T0)
    strict = MemoryStream(PERSONA, embeddings=StrictEmbedding(size=16), clock=clock)
    strict.add_event("Maria Lopez is studying \ud800physics", subject=PERSONA, predicate="is",
                     object="studying", poignancy=5)

    def route(human: str) -> str:
        if FOCAL in human:
            return "What does Maria \udfff study?"
        if INSIGHTS in human:
            return "Maria \ud800 loves physics [0]"
        return "1. (Maria\ud800, love, physics)" if re.search("statements", human) else "7"

    out = create_reflection_graph(RoutedChatModel(route=route), strict, force=True).invoke({})
    assert out["status"] == "reflected"
    assert strict.get("node_1").description == "Maria Lopez is studying \ufffdphysics"
    assert strict.get(out["written"][0]).description == "Maria \ufffd loves physics"


@GUARD
@pytest.mark.parametrize("reply", ["\ud800", "\udfff\x00 ⑦"])
def test_what_the_graph_keeps_of_a_reply_is_clean_text(stream: MemoryStream, reply: str):
    # The records of dropped replies are output and state (a checkpointer serialises them,
    # a service returns them as JSON): no lone surrogate, no NUL.
    graph = create_reflection_graph(RoutedChatModel(route=lambda _: reply), stream, force=True)
    out = graph.invoke({})
    assert out["dropped"]
    assert all(_clean(record.get("text", "")) for record in out["dropped"])


ECHOES = [(name, reply) for name, reply in zip(IDS, REPLIES, strict=True)
          if name.startswith("echo-")]


@pytest.mark.parametrize("reply", [reply for _, reply in ECHOES],
                         ids=[name for name, _ in ECHOES])
def test_an_echo_of_the_prompt_is_never_a_rating(reply: str):
    with pytest.raises(ParseError):
        parse_rating(reply)
    assert parse_ratings(reply, 2) == [None, None]
