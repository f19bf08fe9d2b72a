"""How a reflection stage asks for work, and the runner that does it, sync or async.

Each model-calling stage of reflection is written once, as a generator that yields what it
needs and gets the results back: :class:`Ask` (model calls), :class:`Score` (importance
ratings), :class:`Retrieve` (evidence for questions) and :class:`Write` (one stream write).
:class:`Runner` serves those requests with ``batch``/``score_many``/``invoke``/``add_many``
in :meth:`Runner.run` and with ``abatch``/``ascore_many``/``ainvoke``/``aadd_many`` in
:meth:`Runner.arun`, so the sync and async paths of the graph
(:mod:`~langchain_genmem.reflection.graph`), of the step-by-step functions
(:mod:`~langchain_genmem.reflection.stepwise`) and of the thoughts after a conversation
(:mod:`~langchain_genmem.reflection.conversation`) run the same code.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig, ensure_config

from langchain_genmem.core.errors import ParseError
from langchain_genmem.llm.importance import ImportanceScorer, reply_text
from langchain_genmem.memory.stream import MemoryStream
from langchain_genmem.reflection.state import Dropped, ReflectionState
from langchain_genmem.retrieval.retrievers import GenerativeAgentsRetriever

__all__ = [
    "Ask",
    "GraphNode",
    "Retrieve",
    "Runner",
    "Score",
    "Step",
    "Write",
    "aretrieve_evidence",
    "drop",
    "excerpt",
    "messages",
    "retrieve_evidence",
]

T = TypeVar("T")


def messages(system: str, human: str) -> list[BaseMessage]:
    """The messages of one call: the system prompt (when not empty) and the human prompt."""
    return [SystemMessage(system), HumanMessage(human)] if system else [HumanMessage(human)]


class GraphNode(Runnable[Any, Any]):
    """A graph node with a sync body and an optional async one, run as the node itself.

    LangGraph records one run per node; the body runs inside it without a run of its own
    (as ``StateGraph.add_node`` does for a plain function). ``invoke`` calls ``func``;
    ``ainvoke`` awaits ``afunc``, or calls ``func`` in the event loop when there is none.
    A body that takes a ``config`` parameter gets the run's config; the run's store and
    config are also available inside it from ``langgraph.config.get_store()`` and
    ``get_config()``.

    Args:
        func: the sync body, ``func(state)`` or ``func(state, config)``.
        afunc: the async body, with the same parameters; None runs ``func``.
        name: the node's name.
    """

    def __init__(
        self,
        func: Callable[..., Any],
        afunc: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
    ) -> None:
        self.func = func
        self.afunc = afunc
        self.name = name or getattr(func, "__name__", None)
        self._wants_config = "config" in inspect.signature(func).parameters

    def _args(self, state: Any, config: RunnableConfig | None) -> tuple[Any, ...]:
        return (state, ensure_config(config)) if self._wants_config else (state,)

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:  # noqa: A002
        """Run the sync body."""
        return self.func(*self._args(input, config))

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any  # noqa: A002
    ) -> Any:
        """Run the async body (the sync one in the event loop when there is none)."""
        if self.afunc is None:
            return self.func(*self._args(input, config))
        return await self.afunc(*self._args(input, config))


# --- requests the stages make, and the runner that serves them -------------------------------


@dataclass(frozen=True)
class Ask:
    """Call the model once per request (concurrently); the stage gets the reply texts."""

    requests: list[list[BaseMessage]]


@dataclass(frozen=True)
class Score:
    """Rate (type, text) items with the importance scorer.

    The stage gets the ratings, or the scorer's ``ParseError`` when it found no rating for
    an item even asked alone.
    """

    items: list[tuple[str, str]]


@dataclass(frozen=True)
class Write:
    """Add memories to the stream in one all-or-nothing write; the stage gets the nodes."""

    items: list[dict[str, Any]]



@dataclass(frozen=True)
class Retrieve:
    """Retrieve the evidence of each question; the stage gets one list of node ids per question.

    Attributes:
        retriever: the retriever (used as it is: the stage decides about access times).
        questions: the focal points.
        k: memories per question.
        relevance_min: keep only memories whose normalised relevance is above this
            (the stepwise design's ``relevance > 0.5``); None keeps all.
    """

    retriever: GenerativeAgentsRetriever
    questions: list[str]
    k: int
    relevance_min: float | None = None


Step = Generator[Ask | Score | Retrieve | Write, Any, T]


def _evidence_ids(docs: Sequence[Document], k: int, relevance_min: float | None) -> list[str]:
    """The node ids of the best ``k`` documents whose relevance is above ``relevance_min``."""
    if relevance_min is not None:
        docs = [d for d in docs if d.metadata["relevance"] > relevance_min]
    return [d.metadata["node_id"] for d in docs[:k]]


def _retrieval_k(retriever: GenerativeAgentsRetriever, k: int, relevance_min: float | None) -> int:
    """How many to ask for: ``k``, or every memory when a filter must see them all first."""
    return k if relevance_min is None else max(k, len(retriever.memory_stream))


def retrieve_evidence(
    retriever: GenerativeAgentsRetriever,
    question: str,
    k: int,
    relevance_min: float | None,
    config: RunnableConfig | None = None,
) -> list[str]:
    """The node ids of the evidence of one question, best first.

    As the stepwise design's
    ``retrieve_memories(query, filter_statement)``, the filter applies to every
    scored memory and the best ``k`` that pass are kept (relevance is normalised over all
    candidates, so it is the same number the retriever's documents carry).

    Args:
        retriever: the retriever.
        question: the focal point.
        k: how many.
        relevance_min: keep only memories whose relevance is above this; None keeps all.
        config: a runnable config for the retriever run.

    Returns:
        Node ids, best first.
    """
    docs = retriever.invoke(question, config, k=_retrieval_k(retriever, k, relevance_min))
    return _evidence_ids(docs, k, relevance_min)


async def aretrieve_evidence(
    retriever: GenerativeAgentsRetriever,
    question: str,
    k: int,
    relevance_min: float | None,
    config: RunnableConfig | None = None,
) -> list[str]:
    """Async :func:`retrieve_evidence`."""
    wanted = _retrieval_k(retriever, k, relevance_min)
    docs = await retriever.ainvoke(question, config, k=wanted)
    return _evidence_ids(docs, k, relevance_min)


class _CallCounter(BaseCallbackHandler):
    """Counts the model calls started under the config it is added to (thread-safe)."""

    run_inline = True

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def _count(self) -> None:
        with self._lock:
            self.calls += 1

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], **kwargs: Any
    ) -> None:
        """Count one chat model call."""
        self._count()

    def on_llm_start(self, serialized: dict[str, Any], prompts: list[str], **kwargs: Any) -> None:
        """Count one text model call."""
        self._count()


def _with_counter(config: RunnableConfig | None, counter: _CallCounter) -> RunnableConfig:
    """Return ``config`` with ``counter`` added to its callbacks (inherited by child runs)."""
    config = config or {}
    callbacks = config.get("callbacks")
    if callbacks is None:
        merged: Any = [counter]
    elif isinstance(callbacks, list):
        merged = [*callbacks, counter]
    else:
        merged = callbacks.copy()
        merged.add_handler(counter, inherit=True)
    return {**config, "callbacks": merged}  # type: ignore[typeddict-item]


def _text(reply: Any) -> str:
    return reply if isinstance(reply, str) else reply_text(reply)


class Runner:
    """Serves the requests of a stage with a model, a scorer and a stream; counts model calls.

    Args:
        model: the chat model of :class:`Ask`.
        stream: the stream of :class:`Write`.
        importance: the scorer of :class:`Score`.
    """

    def __init__(
        self, model: BaseChatModel, stream: MemoryStream, importance: ImportanceScorer
    ) -> None:
        self.model = model
        self.stream = stream
        self.importance = importance

    def run(self, step: Step[T], config: RunnableConfig | None) -> tuple[T, int]:
        """Run a stage to its end; return its result and how many model calls it made."""
        counter = _CallCounter()
        config = _with_counter(config, counter)
        try:
            request = next(step)
            while True:
                request = step.send(self._serve(request, config))
        except StopIteration as done:
            return done.value, counter.calls

    async def arun(self, step: Step[T], config: RunnableConfig | None) -> tuple[T, int]:
        """Async :meth:`run`."""
        counter = _CallCounter()
        config = _with_counter(config, counter)
        try:
            request = next(step)
            while True:
                request = step.send(await self._aserve(request, config))
        except StopIteration as done:
            return done.value, counter.calls

    def _serve(self, request: Ask | Score | Retrieve | Write, config: RunnableConfig) -> Any:
        if isinstance(request, Retrieve):
            r = request
            return [retrieve_evidence(r.retriever, q, r.k, r.relevance_min, config)
                    for q in r.questions]
        if isinstance(request, Ask):
            replies = self.model.batch(request.requests, config) if request.requests else []
            return [_text(reply) for reply in replies]
        if isinstance(request, Score):
            try:
                return self.importance.score_many(self.stream.persona, request.items, config=config)
            except ParseError as error:
                return error
        return self.stream.add_many(request.items)

    async def _aserve(
        self, request: Ask | Score | Retrieve | Write, config: RunnableConfig
    ) -> Any:
        if isinstance(request, Retrieve):
            r = request
            found = [aretrieve_evidence(r.retriever, q, r.k, r.relevance_min, config)
                     for q in r.questions]
            return list(await asyncio.gather(*found))
        if isinstance(request, Ask):
            replies = await self.model.abatch(request.requests, config) if request.requests else []
            return [_text(reply) for reply in replies]
        if isinstance(request, Score):
            persona = self.stream.persona
            try:
                return await self.importance.ascore_many(persona, request.items, config=config)
            except ParseError as error:
                return error
        return await self.stream.aadd_many(request.items)

    def node(
        self, name: str, stage: Callable[[ReflectionState], Step[dict[str, Any]]]
    ) -> GraphNode:
        """A graph node running ``stage``, sync and async, adding its calls to ``llm_calls``."""

        def func(state: ReflectionState, config: RunnableConfig) -> dict[str, Any]:
            update, calls = self.run(stage(state), config)
            return {**update, "llm_calls": state["llm_calls"] + calls}

        async def afunc(state: ReflectionState, config: RunnableConfig) -> dict[str, Any]:
            update, calls = await self.arun(stage(state), config)
            return {**update, "llm_calls": state["llm_calls"] + calls}

        return GraphNode(func, afunc, name=name)


def drop(stage: str, reason: str, **about: Any) -> Dropped:
    """A :class:`Dropped` record; ``about`` holds question, text and numbers when known."""
    return Dropped(stage=stage, reason=reason, **about)  # type: ignore[typeddict-item]


def excerpt(text: str, limit: int = 200) -> str:
    """The start of a reply, for the records."""
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "…"
