"""A LangGraph agent with GenerativeAgentsStore and LangMem's memory tools, on a scripted model.

The model is LangChain's fake chat model playing a fixed script of tool calls; what the
agent recalls comes from the store through LangMem's ``search_memory`` tool, ranked by the
store, and the test checks the tool's output, not the script. ``examples/store_agent.py``
run twice on one folder stores its memories once and answers the same.
"""

from __future__ import annotations

import importlib.util
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import langmem
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

from langchain_genmem import GenerativeAgentsStore, SimulationClock


class ScriptedToolModel(GenericFakeChatModel):
    """The fake chat model, able to be given tools (it plays its script whatever they are)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedToolModel:
        return self


def call(name: str, args: dict[str, Any], n: int) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call_{n}"}])


# The issue asks for create_react_agent by name; LangGraph 1.x points to langchain's create_agent.
@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
def test_agent_remembers_in_one_thread_and_recalls_in_another(tmp_path):
    clock = SimulationClock(datetime(2023, 2, 13, 9, 0))
    store = GenerativeAgentsStore(
        path=tmp_path / "m", embeddings=DeterministicFakeEmbedding(size=32), clock=clock
    )
    script = iter(
        [
            call("manage_memory", {"content": "用户喜欢饺子 the user loves dumplings"}, 1),
            AIMessage("记住了 noted"),
            call("manage_memory", {"content": "the user works at a bakery"}, 2),
            AIMessage("noted"),
            call("search_memory", {"query": "what food does the user like?"}, 3),
            AIMessage("You love dumplings."),
        ]
    )
    namespace = ("memories", "{user_id}")
    tools = [
        langmem.create_manage_memory_tool(namespace=namespace),
        langmem.create_search_memory_tool(namespace=namespace),
    ]
    agent = create_react_agent(
        ScriptedToolModel(messages=script), tools, store=store, checkpointer=InMemorySaver()
    )

    def turn(thread: str, text: str) -> list[Any]:
        config = {"configurable": {"thread_id": thread, "user_id": "u1"}}
        return agent.invoke({"messages": [("user", text)]}, config)["messages"]

    turn("t1", "记住：我喜欢饺子")
    clock.advance(hours=1)
    turn("t1", "remember: I work at a bakery")
    clock.advance(days=1)
    recalled = turn("t2", "What food do I like?")

    # thread t2 holds only its own turn; what it knows came from the store
    assert [m.type for m in recalled] == ["human", "ai", "tool", "ai"]
    tool = recalled[2]
    assert isinstance(tool, ToolMessage) and tool.name == "search_memory"
    found = json.loads(tool.content)
    assert {f["value"]["content"] for f in found} == {
        "用户喜欢饺子 the user loves dumplings",
        "the user works at a bakery",
    }
    assert all(f["namespace"] == ["memories", "u1"] and f["score"] is not None for f in found)
    scores = [f["score"] for f in found]
    assert scores == sorted(scores, reverse=True)
    # the items are memories of u1's persona, accessed by the recall
    stream = store.stream("memories/u1")
    assert len(stream) == 2
    assert all(n.last_accessed == clock.now for n in stream.nodes())
    store.close()


def load_example(name: str) -> Any:
    """A script of examples/ as a module (the examples are no package)."""
    path = Path(__file__).resolve().parents[2] / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_store_agent_example_run_twice_on_one_folder_stores_nothing_twice(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    example = load_example("store_agent")
    folder = str(tmp_path / "store")
    example.run(folder, own_tools=True)
    first = capsys.readouterr().out
    example.run(folder, own_tools=True)
    second = capsys.readouterr().out

    store = GenerativeAgentsStore(path=folder)
    told = [i.value["content"] for i in store.search(("memories", "maria"), limit=10)]
    store.close()
    assert sorted(told) == sorted(["Klaus invited me to the Valentine's Day party",
                                   "我喜欢吃饺子", "The party moved to Hobbs Cafe"])
    assert "already in" in second and "remember:" not in second
    answers = [line for line in first.splitlines() if "agent: From memory" in line]
    assert answers == [line for line in second.splitlines() if "agent: From memory" in line]
    assert "The party moved to Hobbs Cafe | Klaus invited" in answers[0]
    # the score lines follow a line naming the query they rank for
    ranking = second.splitlines()[-4:]
    assert '"the party"' in ranking[0]
    assert ranking[1].startswith("  score ")
    assert ranking[1].endswith("The party moved to Hobbs Cafe")
