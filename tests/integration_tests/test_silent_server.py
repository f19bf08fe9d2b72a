"""A server that accepts and never answers: every call of the package ends at its timeout,
whatever timeout the ChatOpenAI given was built with (600 s by default)."""

from __future__ import annotations

import time
from datetime import datetime

import pytest
from langchain_openai import ChatOpenAI

from langchain_genmem import (
    CallLimits,
    ImportanceScorer,
    MemoryStream,
    ReflectionSettings,
    SimulationClock,
    create_reflection_graph,
)
from langchain_genmem.core.errors import ChatModelError
from tests.support.silent_server import silent_server


@pytest.fixture
def silent_url():
    """A server that accepts connections and never answers."""
    with silent_server() as url:
        yield url


def test_a_user_built_chat_openai_times_out_at_the_package_timeout(silent_url):
    model = ChatOpenAI(model="m", api_key="k", base_url=silent_url, max_retries=0)
    assert model.request_timeout is None  # the client's own: 600 s
    stream = MemoryStream("玛丽亚", clock=SimulationClock(datetime(2024, 3, 1, 9)))
    stream.add_event("玛丽亚在学习物理", poignancy=5)
    settings = ReflectionSettings(limits=CallLimits(timeout=0.5))
    graph = create_reflection_graph(model, stream, settings=settings, force=True)
    started = time.monotonic()
    with pytest.raises(ChatModelError, match=r"did not answer in time \(timed out after 0\.5 s\)"):
        graph.invoke({})
    scorer = ImportanceScorer(model, limits=settings.limits)
    with pytest.raises(ChatModelError, match="timed out after 0.5 s"):
        scorer.score_many("玛丽亚", [("event", "玛丽亚的祖母今天去世了")])
    assert time.monotonic() - started < 10


def test_the_chat_agents_answer_times_out_in_one_line(silent_url):
    from langchain_genmem.agent import create_memory_agent

    model = ChatOpenAI(model="m", api_key="k", base_url=silent_url, max_retries=0)
    stream = MemoryStream("玛丽亚", clock=SimulationClock(datetime(2024, 3, 1, 9)))
    settings = ReflectionSettings(limits=CallLimits(timeout=0.5))
    agent = create_memory_agent(model, stream, settings=settings, reflect=False)
    with pytest.raises(ChatModelError, match=r"timed out after 0\.5 s"):
        agent.invoke({"messages": [("user", "你好")]})
