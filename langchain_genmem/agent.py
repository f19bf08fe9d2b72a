"""A LangGraph chat agent with Generative Agents memory.

Each turn: ``recall`` retrieves memories for the user's message (weighted retrieval),
``respond`` answers with them in the system prompt, ``remember`` stores the exchange (one chat
memory and one event per utterance, importance rated by the model in one batched call), and
``reflect`` runs the reflection graph when the trigger has fired.

Every call is bounded (``settings.limits``: the answer's ``max_tokens``, the ratings', the
timeout). A memory the model gives no rating for is stored anyway, with the fallback
importance, an :class:`~langchain_genmem.llm.importance.UnratedWarning` and a place in the
persona's unrated list (:func:`~langchain_genmem.llm.importance.unrated_ids`): the turn
goes on and its answer is shown.

Example:
    .. code-block:: python

        from langchain_openai import ChatOpenAI
        from langchain_genmem import MemoryStream
        from langchain_genmem.agent import create_memory_agent

        stream = MemoryStream("Ada", path=".genmem")
        agent = create_memory_agent(ChatOpenAI(), stream)
        out = agent.invoke({"messages": [("user", "My sister Lena lives in Porto.")]})
        print(out["messages"][-1].content)

Memories persist in the stream's store, so a new process (a new conversation) recalls what
earlier ones were told.

Recall uses :data:`CHAT_RETRIEVAL`, not the simulation's weights: see its note for the
measurement behind it, and ``retrieval=`` (or ``retriever=``) to choose otherwise.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, cast

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    trim_messages,
)
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.store.base import PutOp
from typing_extensions import TypedDict

from langchain_genmem.core.errors import ValidationError
from langchain_genmem.core.recall_sizes import CHAT_RECALL_K
from langchain_genmem.llm.calls import bounded, client_errors
from langchain_genmem.llm.importance import (
    ImportanceScorer,
    add_rated,
    rated_items,
    reply_text,
)
from langchain_genmem.memory.stream import MemoryStream
from langchain_genmem.reflection import create_reflection_graph
from langchain_genmem.reflection.settings import ReflectionSettings
from langchain_genmem.retrieval.presets import CHAT_RETRIEVAL
from langchain_genmem.retrieval.retrievers import GenerativeAgentsRetriever

DEFAULT_AGENT_SYSTEM_PROMPT = (
    "You are {persona}, talking with {user}. You have a long-term memory; these are the "
    "memories that come to mind now, most relevant first:\n{memories}\n\n"
    "Use them when they help, do not invent memories you do not have, and answer in the "
    "language the user writes in."
)
NO_MEMORIES = "(nothing comes to mind yet)"

class AgentState(TypedDict, total=False):
    """State of the memory agent.

    Attributes:
        messages: the conversation (LangGraph's ``add_messages`` reducer).
        recalled: node ids (item keys, with a ``namespace``) recalled for the last user
            message.
        memories: the texts recalled, as the answer's prompt lists them.
        written: node ids (item keys, with a ``namespace``) stored in the last turn.
        reflection: the reflection graph's output, when it ran.
    """

    messages: Annotated[list[AnyMessage], add_messages]
    recalled: list[str]
    memories: list[str]
    written: list[str]
    reflection: dict[str, Any]


def approximate_tokens(messages: Sequence[BaseMessage]) -> int:
    """A model-free count of the tokens of some messages, on the high side for any language.

    A quarter of a token per ASCII character (English words), two per other character (a
    Chinese character is one to three tokens in the tokenisers of small models), and three
    per message for its role.

    Args:
        messages: the messages.

    Returns:
        The estimate.
    """
    text = "".join(reply_text(m) for m in messages)
    ascii_chars = sum(c.isascii() for c in text)
    return math.ceil(ascii_chars / 4) + 2 * (len(text) - ascii_chars) + 3 * len(messages)


def recent_turns(messages: Sequence[BaseMessage], budget: int) -> list[BaseMessage]:
    """The newest messages that fit ``budget`` tokens, as :func:`approximate_tokens` counts.

    Whole messages only, starting on a human turn; the newest one always goes, even alone
    over the budget.

    Args:
        messages: the conversation, oldest first.
        budget: the most tokens to keep.

    Returns:
        The messages kept, oldest first.
    """
    kept = trim_messages(list(messages), max_tokens=budget, strategy="last", start_on="human",
                         token_counter=approximate_tokens, allow_partial=False)
    return kept or list(messages[-1:])


def create_memory_agent(
    model: BaseChatModel,
    stream: MemoryStream,
    *,
    retriever: BaseRetriever | None = None,
    retrieval: Mapping[str, Any] | None = None,
    importance: ImportanceScorer | None = None,
    k: int = CHAT_RECALL_K,
    user: str = "User",
    system_prompt: str = DEFAULT_AGENT_SYSTEM_PROMPT,
    reflect: bool = True,
    settings: ReflectionSettings | None = None,
    checkpointer: Any = None,
    store: Any = None,
    namespace: tuple[str, ...] | None = None,
    name: str = "memory_agent",
) -> Any:
    """Build and compile the chat agent graph: recall → respond → remember → (reflect).

    Args:
        model: the chat model that answers, rates importance and reflects.
        stream: the agent's memory stream (its persona is the agent's name).
        retriever: the retriever to recall with, whose Documents carry ``node_id`` (a
            :class:`~langchain_genmem.GenerativeAgentsRetriever`, or a
            :class:`~langchain_genmem.llm.sub_questions.SubQuestionRetriever` that splits
            each question with a chat model); default :func:`chat_retriever` over
            ``stream`` with ``k`` and ``retrieval``.
        retrieval: the default retriever's arguments (weights, ``relevance``,
            ``lexical_weight``, ``idle_filter``...); None = :data:`CHAT_RETRIEVAL`, measured
            best for a chat; ``{}`` = the persona's own settings (the simulation's).
        importance: the importance scorer; default ``ImportanceScorer(model)`` with the
            settings' bounds and output form. Whatever its ``strict``, a memory it gives
            no rating for gets the fallback importance (the turn goes on).
        k: memories recalled per turn (when no retriever is given).
        user: the user's name in memories and prompts.
        system_prompt: template with ``{persona}``, ``{user}`` and ``{memories}``.
        reflect: run reflection when the stream's trigger has fired.
        settings: the bounds of every call (``limits.answer`` for the answer), the output
            form of the ratings and the reflection's settings; None for the defaults.
        checkpointer: passed to ``compile()`` (keeps the conversation across invocations).
        store: passed to ``compile()``.
        namespace: keep the memories as items of the graph's LangGraph store (``store``,
            or the one a LangGraph server hands the graph) in this namespace: recall
            searches it, and remember puts each utterance there as an item
            (``{"content", "type", "poignancy", "speaker", "conversation"}``), so a client
            of the store sees what the agent remembered and the agent recalls what clients
            put. With a :class:`~langchain_genmem.GenerativeAgentsStore`, pass the
            namespace's stream as ``stream`` (``store.stream(store.persona_for(namespace))``)
            so reflection reads the same memories. None (the default) keeps the memories in
            ``stream``.
        name: the graph's name.

    Returns:
        The compiled graph; input ``{"messages": [...]}``.

    Raises:
        ValidationError: an empty user name, a template without its fields, both
            ``retriever`` and ``retrieval``, a ``retriever`` with a ``namespace``, or a bad
            retrieval argument (naming it).
    """
    if retriever is not None and retrieval is not None:
        msg = "retrieval: give retriever or retrieval, not both (retrieval configures the default)"
        raise ValidationError(msg, field="retrieval")
    if namespace is not None and retriever is not None:
        msg = "retriever: a namespace's memories are recalled by the store's search"
        raise ValidationError(msg, field="retriever")
    if not user.strip():
        msg = "user: expected a non-empty name"
        raise ValidationError(msg, field="user")
    for field in ("{persona}", "{user}", "{memories}"):
        if field not in system_prompt:
            msg = f"system_prompt: the template must contain {field}"
            raise ValidationError(msg, field="system_prompt")
    retriever = retriever or chat_retriever(stream, k=k, retrieval=retrieval)
    settings = ReflectionSettings.merged(settings)
    scorer = importance or ImportanceScorer(
        model, limits=settings.limits, output=settings.output, strict=False
    )
    answering = bounded(model, settings.limits, "answer")
    persona = stream.persona

    def recall(state: AgentState) -> dict[str, Any]:
        text = _last_user_text(state["messages"])
        if not text.strip():  # nothing to recall for (retrieval refuses an empty query)
            return {"recalled": [], "memories": []}
        if namespace is not None:
            hits = get_store().search(namespace, query=text, limit=k)
            return {"recalled": [h.key for h in hits],
                    "memories": [item_text(h.value) for h in hits]}
        docs = retriever.invoke(text)
        return {"recalled": [d.metadata["node_id"] for d in docs],
                "memories": [d.page_content for d in docs]}

    def respond(state: AgentState) -> dict[str, Any]:
        with client_errors(model, settings.limits.timeout):
            return {"messages": [answering.invoke(_prompt(state))]}

    async def arespond(state: AgentState) -> dict[str, Any]:
        with client_errors(model, settings.limits.timeout):
            return {"messages": [await answering.ainvoke(_prompt(state))]}

    def _prompt(state: AgentState) -> list[BaseMessage]:
        recalled = state.get("memories", [])
        memories = format_memories([Document(page_content=text) for text in recalled])
        system = system_prompt.format(persona=persona, user=user, memories=memories)
        return [SystemMessage(system), *recent_turns(state["messages"], settings.limits.history)]

    def remember(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        thread = (config.get("configurable") or {}).get("thread_id")
        items = exchange_memories(persona, user, _last_user_text(state["messages"]),
                                  reply_text(state["messages"][-1]),
                                  conversation=None if thread is None else str(thread))
        if namespace is None:
            return {"written": [n.node_id for n in add_rated(stream, scorer, items)]}
        said = [item for item in items if item["type"] != "chat"]  # items hold utterances
        filled, _ = rated_items(scorer, persona, said, config=config)
        keys = [uuid.uuid4().hex for _ in filled]
        get_store().batch([PutOp(namespace, key, item_value(item))
                           for key, item in zip(keys, filled, strict=True)])
        return {"written": keys}

    def route(state: AgentState) -> Literal["reflect", "__end__"]:
        end = cast(Literal["__end__"], END)  # langgraph types END, "__end__", as a str
        return "reflect" if reflect and stream.committed.reflection_due else end

    def run_reflection(state: AgentState) -> dict[str, Any]:
        graph = create_reflection_graph(model, stream, importance=scorer, settings=settings)
        out = graph.invoke({})
        return {"reflection": dict(out)}

    builder = StateGraph(AgentState)
    builder.add_node("recall", recall)
    builder.add_node("respond", RunnableLambda(respond, afunc=arespond, name="respond"))
    builder.add_node("remember", remember)
    builder.add_node("reflect", run_reflection)
    builder.add_edge(START, "recall")
    builder.add_edge("recall", "respond")
    builder.add_edge("respond", "remember")
    builder.add_conditional_edges("remember", route, ["reflect", END])
    builder.add_edge("reflect", END)
    return builder.compile(checkpointer=checkpointer, store=store, name=name)


def chat_retriever(
    stream: MemoryStream, *, k: int = CHAT_RECALL_K, retrieval: Mapping[str, Any] | None = None
) -> GenerativeAgentsRetriever:
    """The retriever the chat agent recalls with.

    Args:
        stream: the agent's memory stream.
        k: memories recalled per turn.
        retrieval: retriever arguments; None = :data:`CHAT_RETRIEVAL`, ``{}`` = the
            persona's own settings.

    Returns:
        The retriever.

    Raises:
        ValidationError: an argument the retriever does not take, ``stream`` (or its field
            name ``memory_stream``) or ``k`` among them (they are this function's), or a bad
            value, naming it.
    """
    given = dict(CHAT_RETRIEVAL if retrieval is None else retrieval)
    for name in ("stream", "memory_stream", "k"):
        if name in given:
            msg = f"retrieval: {name!r} is set by the agent (pass k= for how many memories)"
            raise ValidationError(msg, field="retrieval")
    return GenerativeAgentsRetriever(memory_stream=stream, k=k, **given)


def exchange_memories(
    persona: str, user: str, said: str, reply: str, *, conversation: str | None = None
) -> list[dict[str, Any]]:
    """The memories one exchange leaves: an event per utterance and the chat itself.

    Events are what weighted retrieval recalls (it skips chats, as the original does); the
    chat node keeps the exchange verbatim, like the original's chat memories. Every one is a
    turn of ``conversation`` said by its speaker, so each utterance is embedded with the
    turns before it and the chat with its utterances (see :mod:`langchain_genmem.memory.turns`).

    Args:
        persona: the agent's name.
        user: the user's name.
        said: what the user said.
        reply: what the agent answered.
        conversation: the conversation's id (the agent passes the LangGraph thread id);
            None: ``"<user> and <persona>"``, one conversation across runs.

    Returns:
        Items for :meth:`MemoryStream.add_many` (without poignancy).
    """
    turn = {"conversation": conversation or f"{user} and {persona}"}
    return [
        {"type": "event", "description": f"{user} said to {persona}: {said}",
         "subject": user, "predicate": "say", "object": persona, "speaker": user, **turn},
        {"type": "event", "description": f"{persona} answered {user}: {reply}",
         "subject": persona, "predicate": "answer", "object": user, "speaker": persona,
         **turn},
        {"type": "chat", "description": f"conversation between {persona} and {user}",
         "subject": persona, "predicate": "chat with", "object": user,
         "filling": [[user, said], [persona, reply]], **turn},
    ]


def item_value(memory: Mapping[str, Any]) -> dict[str, Any]:
    """A memory of :func:`exchange_memories`, rated, as the value of a store item.

    Args:
        memory: the memory (``description``, ``type``, ``poignancy``, turn fields).

    Returns:
        ``{"content", "type", "poignancy"}``, with ``speaker`` and ``conversation`` when the
        memory has them (a :class:`~langchain_genmem.GenerativeAgentsStore` stores it as a
        turn of that conversation).
    """
    value = {"content": memory["description"], "type": memory["type"],
             "poignancy": memory["poignancy"]}
    value.update({name: memory[name] for name in ("speaker", "conversation") if name in memory})
    return value


def item_text(value: Mapping[str, Any]) -> str:
    """The text a store item recalls: its ``content``, else the whole value as JSON.

    Args:
        value: the item's value.

    Returns:
        The text for the prompt.
    """
    content = value.get("content")
    if isinstance(content, str):
        return content
    return json.dumps(value, ensure_ascii=False, default=str)


def format_memories(docs: Sequence[Document]) -> str:
    """Memories as a bulleted list for a prompt.

    Args:
        docs: the recalled documents.

    Returns:
        One ``- description`` line per memory, or a note that none came to mind.
    """
    return "\n".join(f"- {d.page_content}" for d in docs) or NO_MEMORIES


def _last_user_text(messages: Sequence[BaseMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return reply_text(message)
    msg = "messages: the agent needs a user message to answer"
    raise ValidationError(msg, field="messages")




__all__ = [
    "CHAT_RETRIEVAL",
    "DEFAULT_AGENT_SYSTEM_PROMPT",
    "AgentState",
    "chat_retriever",
    "create_memory_agent",
    "exchange_memories",
    "format_memories",
    "item_text",
    "item_value",
]
