"""A LangGraph agent whose long-term memory is a GenerativeAgentsStore.

``create_react_agent(model, tools, store=GenerativeAgentsStore(...))`` with LangMem's
``manage_memory`` and ``search_memory`` tools (or, without ``langmem``, two tools of the same
shape defined here): the agent stores what the user tells it in one conversation thread and
recalls it in another, on a simulation clock that moves a day between the threads. The store
ranks as conversation memories are best found (``CHAT_RETRIEVAL``: hybrid dense and lexical
relevance, recency and importance left out). The last recall asks only about the first day
(``created_before``), the time filter a plain LangGraph store does not have.

    python examples/store_agent.py                 # offline: a scripted stand-in model
    python examples/store_agent.py --path store    # keep the memories in a folder
    python examples/store_agent.py --own-tools     # the tools defined here, not LangMem's

With ``--path``, a second run finds the user's memories in the folder, tells nothing again
and asks the same questions, which get the same answers.

Needs no chat model: a stand-in follows the user's words (``remember: ...`` stores, a question
searches and answers from what the search returned), so the run needs no key and no server;
memories use the bundled offline embedding model.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import warnings
from datetime import datetime
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_config, get_store

from langchain_genmem import GenerativeAgentsStore, SimulationClock
from langchain_genmem.llm.chat import one_line_errors

NAMESPACE = ("memories", "{user_id}")
USER = ("memories", "maria")
DAY_ONE = datetime(2023, 2, 13, 9, 0)
# (hours on the clock before the message, thread, message): two days of telling, then asking
TURNS = [
    (0, "thread-1", "remember: Klaus invited me to the Valentine's Day party"),
    (1, "thread-1", "remember: 我喜欢吃饺子"),
    (24, "thread-1", "remember: The party moved to Hobbs Cafe"),
    (24, "thread-2", "What do you know about the party?"),
    (0, "thread-2", "What did I tell you on the first day?"),
]


class FollowTheUser(BaseChatModel):
    """A stand-in chat model: ``remember: X`` -> store X; a question -> search, then answer."""

    @property
    def _llm_type(self) -> str:
        return "follow-the-user"

    def bind_tools(self, tools: Any, **kwargs: Any) -> FollowTheUser:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    @staticmethod
    def _reply(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            if last.name != "search_memory":
                return AIMessage("Noted.")
            found = [m["value"]["content"] for m in json.loads(last.content)]
            return AIMessage("From memory: " + " | ".join(found) if found else "I don't know.")
        text = str(last.content)
        head, _, rest = text.partition(":")
        if head.strip().lower() == "remember":
            name, args = "manage_memory", {"content": rest.strip()}
        else:
            name, args = "search_memory", {"query": text, "limit": 2}
            if "first day" in text:
                args["filter"] = {"created_before": "2023-02-14"}
        call = {"name": name, "args": args, "id": f"call_{len(messages)}"}
        return AIMessage("", tool_calls=[call])


def memory_tools(own: bool = False) -> list[BaseTool]:
    """LangMem's manage/search memory tools, or two of the same shape (own, or no langmem)."""
    try:
        from langmem import create_manage_memory_tool, create_search_memory_tool
    except ImportError:
        own = True
    if own:
        return [manage_memory, search_memory]
    return [create_manage_memory_tool(namespace=NAMESPACE),
            create_search_memory_tool(namespace=NAMESPACE)]


def _namespace() -> tuple[str, ...]:
    user = get_config()["configurable"]["user_id"]
    return tuple(part.format(user_id=user) for part in NAMESPACE)


@tool
def manage_memory(content: str) -> str:
    """Store a memory about the user."""
    store = get_store()
    key = f"m{len(store.search(_namespace(), limit=1000)) + 1}"
    store.put(_namespace(), key, {"content": content})
    return f"created memory {key}"


@tool
def search_memory(query: str, limit: int = 10, filter: dict | None = None) -> str:  # noqa: A002
    """Search the user's memories."""
    found = get_store().search(_namespace(), query=query, limit=limit, filter=filter)
    return json.dumps([i.dict() for i in found], ensure_ascii=False)


def run(path: str, own_tools: bool = False) -> None:
    """Two threads of one user: tell things on day one and two, ask on day three."""
    from langgraph.prebuilt import create_react_agent

    clock = SimulationClock(DAY_ONE)
    store = GenerativeAgentsStore(path=path, clock=clock)
    with warnings.catch_warnings():  # LangGraph 1.x points create_react_agent to langchain
        warnings.simplefilter("ignore")
        agent = create_react_agent(FollowTheUser(), memory_tools(own_tools), store=store,
                                   checkpointer=InMemorySaver())

    def say(thread: str, text: str) -> None:
        config = {"configurable": {"thread_id": thread, "user_id": USER[-1]}}
        reply = agent.invoke({"messages": [("user", text)]}, config)["messages"][-1].content
        print(f"[{clock.now:%b %d %H:%M}] {thread} user: {text}\n{' ' * 15}agent: {reply}")

    told = store.search(USER, limit=1)
    if told:  # a folder of an earlier run: tell nothing twice
        print(f"[the memories of {USER[-1]} are already in {path}: asking only]")
    for hours, thread, text in TURNS:
        clock.advance(hours=hours)
        if not (told and text.startswith("remember:")):
            say(thread, text)
    query = "the party"
    print(f'the store\'s ranking for "{query}" (store.search, limit=3):')
    for item in store.search(USER, query=query, limit=3):
        print(f"  score {item.score:.3f}  {item.value['content']}")
    store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", help="A folder to keep the memories (default: temporary).")
    parser.add_argument("--own-tools", action="store_true",
                        help="Use the tools defined here instead of LangMem's.")
    args = parser.parse_args()
    with one_line_errors():  # e.g. a store folder another process writes: one line
        if args.path:
            run(args.path, args.own_tools)
        else:
            with tempfile.TemporaryDirectory() as folder:
                run(folder, args.own_tools)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
