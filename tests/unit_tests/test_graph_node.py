"""GraphNode: a LangGraph node from public API only, run as the node itself.

What RunnableCallable(func, afunc, trace=False) (LangGraph's private class the reflection
graph used before) gave: the sync body in ``invoke``, the async body awaited in the event
loop in ``ainvoke`` (the sync one there when there is none), the run's config passed, the
store and config reachable inside, one callback run per node, Send fan-out.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config, get_store
from langgraph.graph import END, START, StateGraph
from langgraph.store.memory import InMemoryStore
from langgraph.types import Send
from typing_extensions import TypedDict

from langchain_genmem.reflection.steps import GraphNode


def merge(a: list[str], b: list[str]) -> list[str]:
    return (a or []) + (b or [])


class State(TypedDict, total=False):
    seen: Annotated[list[str], merge]


LOG: list[tuple[Any, ...]] = []


def plain(state: State) -> dict[str, Any]:
    LOG.append(("plain", "sync", threading.current_thread().name,
                get_config()["configurable"].get("user"), get_store() is not None))
    return {"seen": ["plain"]}


def body(state: State, config: RunnableConfig) -> dict[str, Any]:
    LOG.append(("body", "sync", threading.current_thread().name,
                config["configurable"].get("user"), get_store() is not None))
    return {"seen": ["body"]}


async def abody(state: State, config: RunnableConfig) -> dict[str, Any]:
    LOG.append(("body", "async", threading.current_thread().name,
                config["configurable"].get("user"), get_store() is not None))
    await asyncio.sleep(0)
    return {"seen": ["body"]}


def task(arg: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
    return {"seen": [f"task-{arg['item']}"]}


class Runs(BaseCallbackHandler):
    def __init__(self) -> None:
        self.names: list[str] = []

    def on_chain_start(self, serialized, inputs, **kw):
        self.names.append(kw.get("name"))


def graph():
    g = StateGraph(State)
    g.add_node("plain", GraphNode(plain))
    g.add_node("body", GraphNode(body, abody, name="body"))
    g.add_node("task", GraphNode(task))
    g.add_edge(START, "plain")
    g.add_edge("plain", "body")
    g.add_conditional_edges("body", lambda s: [Send("task", {"item": i}) for i in "ab"],
                            ["task"])
    g.add_edge("task", END)
    return g.compile(store=InMemoryStore())


CONFIG = {"configurable": {"user": "u1"}}


def test_invoke_runs_the_sync_bodies_with_config_and_store_and_one_run_per_node():
    LOG.clear()
    runs = Runs()
    out = graph().invoke({}, {**CONFIG, "callbacks": [runs]})
    assert sorted(out["seen"]) == ["body", "plain", "task-a", "task-b"]
    assert [x[:2] + x[3:] for x in LOG] == [("plain", "sync", "u1", True),
                                            ("body", "sync", "u1", True)]
    assert sorted(n for n in runs.names if n in ("plain", "body", "task")) == [
        "body", "plain", "task", "task"]  # the node's own run, none of the body's


async def test_ainvoke_awaits_the_async_body_in_the_loop_and_runs_sync_ones_there_too():
    LOG.clear()
    out = await graph().ainvoke({}, CONFIG)
    assert sorted(out["seen"]) == ["body", "plain", "task-a", "task-b"]
    here = threading.current_thread().name
    assert [x[:2] + x[3:] for x in LOG] == [("plain", "sync", "u1", True),
                                            ("body", "async", "u1", True)]
    assert all(x[2] == here for x in LOG)


def test_updates_name_the_nodes():
    chunks = list(graph().stream({}, CONFIG, stream_mode="updates"))
    assert [next(iter(c)) for c in chunks] == ["plain", "body", "task", "task"]
