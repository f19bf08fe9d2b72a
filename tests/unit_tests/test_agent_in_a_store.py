"""The chat agent keeping its memories as items of a LangGraph store (``namespace=``).

A deployed agent does this with its server's store, so a client of the store sees what the
agent remembered and the agent recalls what clients put. Here in process, on a fake chat
model, with GenerativeAgentsStore and with LangGraph's own InMemoryStore.
"""

from __future__ import annotations

from datetime import datetime

import pytest
from langchain_core.language_models import FakeListChatModel
from langgraph.store.memory import InMemoryStore

from langchain_genmem import GenerativeAgentsStore, MemoryStream, SimulationClock
from langchain_genmem.agent import create_memory_agent, item_text, item_value
from langchain_genmem.core.errors import ValidationError
from tests.support.embeddings import LetterEmbeddings
from tests.unit_tests.test_agent import Prompts

TEA = "Ada 最喜欢乌龙茶 (oolong tea)"


@pytest.fixture
def store(tmp_path):
    clock = SimulationClock(datetime(2024, 3, 1, 9, 0))
    with GenerativeAgentsStore(path=str(tmp_path / "store"), embeddings=LetterEmbeddings(),
                               clock=clock) as opened:
        yield opened


def test_what_the_agent_remembers_is_an_item_and_what_is_put_is_recalled(store):
    store.put(("Ada",), "tea", {"content": TEA})
    model = FakeListChatModel(responses=["乌龙茶。", "1. 6\n2. 2"])
    agent = create_memory_agent(model, store.stream("Ada"), namespace=("Ada",), store=store,
                                k=2, reflect=False)
    prompts = Prompts()
    out = agent.invoke({"messages": [("user", "你最喜欢什么茶？")]},
                       {"configurable": {"thread_id": "t1"}, "callbacks": [prompts]})
    assert out["recalled"][0] == "tea" and out["memories"][0] == TEA
    assert f"- {TEA}\n" in prompts.calls[0][0].content
    kept = {item.key: item.value for item in store.search(("Ada",), limit=10)}
    assert set(out["written"]) < set(kept)
    said = kept[out["written"][0]]
    assert said == {"content": "User said to Ada: 你最喜欢什么茶？", "type": "event",
                    "poignancy": 6, "speaker": "User", "conversation": "t1"}
    assert kept[out["written"][1]]["content"] == "Ada answered User: 乌龙茶。"
    last = store.stream("Ada").get("node_3")  # the persona's stream holds them, as turns
    assert (last.description, last.poignancy) == ("Ada answered User: 乌龙茶。", 2)
    assert last.conversation == "t1"


def test_the_agent_works_with_langgraphs_own_store():
    store = InMemoryStore()
    store.put(("Ada",), "tea", {"content": TEA})
    model = FakeListChatModel(responses=["乌龙茶。", "1. 6\n2. 2"])
    agent = create_memory_agent(model, MemoryStream("Ada"), namespace=("Ada",), store=store,
                                reflect=False)
    out = agent.invoke({"messages": [("user", "茶")]})
    assert out["memories"] == [TEA]  # no index: a listing, newest first
    assert len(store.search(("Ada",))) == 3


def test_a_namespace_is_searched_so_a_retriever_is_refused(store):
    from langchain_genmem import GenerativeAgentsRetriever

    with pytest.raises(ValidationError, match="^retriever: a namespace's memories"):
        create_memory_agent(FakeListChatModel(responses=["x"]), store.stream("Ada"),
                            namespace=("Ada",),
                            retriever=GenerativeAgentsRetriever(stream=store.stream("Ada")))


def test_item_values_and_texts():
    memory = {"description": "User said to Ada: 你好", "type": "event", "poignancy": 4,
              "speaker": "User", "conversation": "t", "subject": "User"}
    assert item_value(memory) == {"content": "User said to Ada: 你好", "type": "event",
                                  "poignancy": 4, "speaker": "User", "conversation": "t"}
    assert item_text({"content": "茶"}) == "茶"
    assert item_text({"title": "茶", "n": 1}) == '{"title": "茶", "n": 1}'
