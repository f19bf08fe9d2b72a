"""A memory the model gives no rating for is stored anyway: fallback importance, a warning,
and a place in the persona's unrated list; the chat agent's turn goes on."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from langchain_core.language_models import FakeListChatModel

from langchain_genmem import MemoryStream, SimulationClock, dump_associative_memory
from langchain_genmem.agent import create_memory_agent
from langchain_genmem.core.errors import ParseError
from langchain_genmem.llm.importance import (
    UNRATED_KEY,
    ImportanceScorer,
    UnratedWarning,
    add_rated,
    unrated_ids,
)
from langchain_genmem.llm.limits import FALLBACK_IMPORTANCE

ECHO = "On the scale of 1 to 10, where 1 is purely mundane"  # what a small model answers


def scorer(*replies: str, **options) -> ImportanceScorer:
    return ImportanceScorer(FakeListChatModel(responses=list(replies)), **options)


def test_strict_raises_and_lenient_falls_back_with_a_warning_naming_the_memory():
    with pytest.raises(ParseError, match="玛丽亚的祖母今天去世了"):
        scorer(ECHO).score_many("Maria", [("event", "玛丽亚的祖母今天去世了")])
    lenient = scorer(ECHO, strict=False)
    with pytest.warns(UnratedWarning, match="event '玛丽亚的祖母今天去世了'.*fallback importance"):
        assert lenient.score_many("Maria", [("event", "玛丽亚的祖母今天去世了")]) == [
            FALLBACK_IMPORTANCE]


def test_rate_many_says_none_and_keeps_to_its_budget():
    rater = scorer("1. 7\n2. 1. 1. 玛丽亚", "no idea")
    items = [("event", "a"), ("chat", "玛丽亚：奶奶去世了")]
    assert rater.rate_many("Maria", items) == [7.0, None]  # batch, then the second alone
    assert rater.calls == 2
    tight = scorer("1. 7\n2. 1. 1. 玛丽亚", "9")
    assert tight.rate_many("Maria", items, max_calls=1) == [7.0, None]  # not asked alone
    assert tight.calls == 1


def test_add_rated_stores_unrated_memories_and_lists_them(tmp_path):
    clock = SimulationClock(datetime(2024, 3, 1, 9))
    with MemoryStream("Maria", path=tmp_path / "s", clock=clock) as stream:
        with pytest.warns(UnratedWarning):
            nodes = add_rated(stream, scorer("1. 6\n2. " + ECHO, ECHO), [
                {"type": "event", "description": "Maria had breakfast"},
                {"type": "event", "description": "玛丽亚的祖母今天去世了"},
                {"type": "event", "description": "Maria read", "poignancy": 2},
            ])
        assert [n.poignancy for n in nodes] == [6, FALLBACK_IMPORTANCE, 2]
        assert unrated_ids(stream) == [nodes[1].node_id]
        dump_associative_memory(stream, tmp_path / "out" / "associative_memory")
    with MemoryStream("Maria", path=tmp_path / "s", clock=clock) as reopened:
        assert unrated_ids(reopened) == [nodes[1].node_id]  # stored with the persona's state
    scratch = json.loads((tmp_path / "out" / "scratch.json").read_text("utf-8"))
    assert scratch[UNRATED_KEY] == [nodes[1].node_id]
    saved = json.loads((tmp_path / "out" / "associative_memory" / "nodes.json").read_text())
    assert set(saved["node_2"]) == set(saved["node_1"])  # nodes.json: the original's fields


def test_the_agent_turn_survives_a_bad_rating_and_shows_its_answer():
    stream = MemoryStream("Ada", clock=SimulationClock(datetime(2024, 3, 1, 9)))
    # the answer, then the batch of three ratings and each memory alone: all echoes
    model = FakeListChatModel(responses=["She lives in Porto.", ECHO, ECHO, ECHO, ECHO])
    agent = create_memory_agent(model, stream, reflect=False)
    with pytest.warns(UnratedWarning):
        out = agent.invoke({"messages": [("user", "我的妹妹住在波尔图。")]})
    assert out["messages"][-1].content == "She lives in Porto."
    assert [stream.get(i).poignancy for i in out["written"]] == [FALLBACK_IMPORTANCE] * 3
    assert unrated_ids(stream) == out["written"]


class _Refusing:
    """A scorer of another kind (only score_many), that finds no rating."""

    def score_many(self, persona, items):
        raise ParseError("no rating")


def test_a_scorer_of_another_kind_that_fails_leaves_the_memories_unrated():
    stream = MemoryStream("Ada", clock=SimulationClock(datetime(2024, 3, 1, 9)))
    with pytest.warns(UnratedWarning):
        [node] = add_rated(stream, _Refusing(), [{"type": "chat", "description": "林晓说：我也是"}])
    assert node.poignancy == FALLBACK_IMPORTANCE and unrated_ids(stream) == [node.node_id]
