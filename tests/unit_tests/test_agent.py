"""The chat agent recalls with the configuration measured best for a chat (CHAT_RETRIEVAL)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import FakeListChatModel
from langchain_core.messages import BaseMessage

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream, SimulationClock
from langchain_genmem.agent import (
    CHAT_RETRIEVAL,
    DEFAULT_AGENT_SYSTEM_PROMPT,
    chat_retriever,
    create_memory_agent,
)
from langchain_genmem.core.errors import ValidationError
from langchain_genmem.llm.sub_questions import SubQuestionRetriever

LENA = "User said to Ada: My sister Lena lives in Porto."
LAPTOP = "User said to Ada: my laptop sits idle at home since the move"
SAID = [  # oldest first, 20 hours apart: the last ones are recent and poignant
    (LENA, 3),
    (LAPTOP, 2),
    ("User said to Ada: I got promoted to head chef today!", 9),
    ("Ada answered User: Congratulations on the promotion, that is huge!", 8),
    ("User said to Ada: my flight to Lisbon leaves on Friday", 7),
    ("Ada answered User: Have a great trip to Lisbon!", 6),
    ("User said to Ada: 我妈妈下个月来看我", 8),
]


class Prompts(BaseCallbackHandler):
    """Records the messages of every chat model call."""

    def __init__(self) -> None:
        self.calls: list[list[BaseMessage]] = []

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.calls.extend(messages)


@pytest.fixture
def stream() -> MemoryStream:
    clock = SimulationClock(datetime(2024, 3, 1, 9, 0))
    stream = MemoryStream("Ada", clock=clock)
    for text, poignancy in SAID:
        stream.add_event(text, subject="User", predicate="say", object="Ada",
                         poignancy=poignancy)
        clock.advance(hours=20)
    return stream


def model() -> FakeListChatModel:
    return FakeListChatModel(responses=["She lives in Porto.", "1. 3\n2. 2\n3. 2"])


def test_the_agents_retriever_is_configured_as_documented(stream):
    retriever = chat_retriever(stream)
    assert CHAT_RETRIEVAL == {"relevance": "hybrid", "lexical_weight": 0.25, "recency_w": 0.0,
                              "importance_w": 0.0, "idle_filter": False,
                              "time_in_query": "narrow"}
    assert retriever.k == 5
    assert {name: getattr(retriever, name) for name in CHAT_RETRIEVAL} == CHAT_RETRIEVAL
    assert retriever.effective_weights().gains == (0.5, 3.0, 2.0)
    persona = chat_retriever(stream, k=3, retrieval={})  # the persona's own settings
    assert persona.k == 3 and persona.relevance is None and persona.recency_w is None
    assert persona.idle_filter is True


def test_the_agent_recalls_what_was_said_not_what_is_recent(stream):
    """Its prompt holds the chat retriever's memories; the simulation's would differ."""
    peek = {"update_access": False, "k": 5}
    expected = GenerativeAgentsRetriever(stream=stream, **CHAT_RETRIEVAL, **peek)
    question = "Where does Lena live?"
    memories = [d.page_content for d in expected.invoke(question)]
    assert memories[0] == LENA
    simulation = GenerativeAgentsRetriever(stream=stream, k=1, update_access=False)
    assert simulation.invoke(question)[0].page_content != LENA  # the test can tell them apart

    prompts = Prompts()
    agent = create_memory_agent(model(), stream, reflect=False)
    out = agent.invoke({"messages": [("user", question)]}, {"callbacks": [prompts]})
    assert [stream.get(i).description for i in out["recalled"]] == memories
    system = DEFAULT_AGENT_SYSTEM_PROMPT.format(
        persona="Ada", user="User", memories="\n".join(f"- {m}" for m in memories))
    assert [(m.type, m.content) for m in prompts.calls[0]] == [
        ("system", system), ("human", question)]
    assert out["messages"][-1].content == "She lives in Porto."


def test_the_agent_recalls_with_a_question_split_by_a_model(stream):
    """The agent takes any retriever whose Documents carry node ids: one that splits."""
    splitter = FakeListChatModel(responses=["1) Lena\n2) 妈妈什么时候来"])
    split = SubQuestionRetriever(retriever=chat_retriever(stream), llm=splitter)
    prompts = Prompts()
    agent = create_memory_agent(model(), stream, retriever=split, reflect=False)
    out = agent.invoke({"messages": [("user", "Who is visiting me, and where does Lena live?")]},
                       {"callbacks": [prompts]})
    recalled = [stream.get(i).description for i in out["recalled"]]
    assert len(recalled) == 5 and LENA in recalled and SAID[-1][0] in recalled
    assert [m.content for m in prompts.calls[0]][-1].startswith(
        "Question: Who is visiting me, and where does Lena live?")  # the split came first
    assert out["messages"][-1].content == "She lives in Porto."


def test_the_agent_keeps_memories_that_say_idle(stream):
    agent = create_memory_agent(model(), stream, k=1, reflect=False)
    out = agent.invoke({"messages": [("user", "what about my laptop?")]})
    assert [stream.get(i).description for i in out["recalled"]] == [LAPTOP]
    simulation = create_memory_agent(model(), stream, k=1, reflect=False, retrieval={})
    out = simulation.invoke({"messages": [("user", "what about my laptop?")]})
    assert LAPTOP not in [stream.get(i).description for i in out["recalled"]]


def test_retrieval_is_checked_naming_the_field(stream):
    with pytest.raises(ValidationError) as e:
        create_memory_agent(model(), stream, retriever=chat_retriever(stream), retrieval={})
    assert e.value.field == "retrieval"
    with pytest.raises(ValidationError) as e:
        create_memory_agent(model(), stream, retrieval={"k": 3})
    assert e.value.field == "retrieval" and "k=" in str(e.value)
    with pytest.raises(ValidationError) as e:
        create_memory_agent(model(), stream, retrieval={"lexical_weight": 2})
    assert e.value.field == "lexical_weight"
    with pytest.raises(ValidationError) as e:
        create_memory_agent(model(), stream, retrieval={"relevanse": "hybrid"})
    assert e.value.field == "relevanse"


def test_the_answer_gets_only_the_newest_turns_that_fit_the_history_budget(tmp_path):
    from langchain_core.language_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from langchain_genmem import CallLimits, MemoryStream, ReflectionSettings
    from langchain_genmem.agent import create_memory_agent

    seen: list[list] = []

    class Recording(GenericFakeChatModel):
        def _generate(self, messages, *args, **kwargs):
            seen.append(messages)
            return super()._generate(messages, *args, **kwargs)

    model = Recording(messages=iter([AIMessage("好的。") for _ in range(20)]))
    stream = MemoryStream("Ada", path=str(tmp_path / "m"))
    settings = ReflectionSettings(limits=CallLimits(history=60))
    agent = create_memory_agent(model, stream, settings=settings, reflect=False,
                                checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    turns = ["我叫山姆，住在波尔图。" * 3, "What is my name?", "我住在哪里？"]
    for turn in turns:
        agent.invoke({"messages": [("user", turn)]}, config)
    answers = [m for m in seen if m[0].content.startswith("You are Ada")]
    assert len(answers) == 3
    last = answers[-1]
    assert last[-1].content == turns[-1]  # the newest question always goes
    assert last[1].type == "human"  # whole turns, starting on a question
    assert turns[0] not in [m.content for m in last]  # the oldest turn is left out
    assert len(agent.get_state(config).values["messages"]) == 6  # the thread keeps them all
