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

from langchain_genmem.llm.calls import Call, ModelCaller
from langchain_genmem.llm.importance import ImportanceScorer, arate_with, rate_with
from langchain_genmem.memory.stream import MemoryStream
from langchain_genmem.reflection.reasons import reasons
from langchain_genmem.reflection.settings import ReflectionSettings
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
    """Make these calls (concurrently); the stage gets the reply texts.

    A call skipped for the budget, or a structured reply that failed, gives "".
    """

    calls: list[Call]


@dataclass(frozen=True)
class Score:
    """Rate (type, text) items with the importance scorer.

    The stage gets one rating or None per item (None: the scorer found no rating for it
    even asked alone, or the budget of calls was spent first).
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


# What each kind of call belongs to, for the records of calls skipped.
_STAGE_OF = {"questions": "focal_points", "insights": "insights", "condense": "condense",
             "triples": "write_back", "sentence": "conversation"}


class Runner:
    """Serves the requests of a stage with a model, a scorer and a stream; counts model calls.

    Calls go through a :class:`~langchain_genmem.llm.calls.ModelCaller` with the settings'
    bounds and output form. A budget (``settings.max_calls``) bounds the calls of one run:
    calls beyond it are not made (their replies are ""), and each request cut short leaves
    a ``"budget_spent"`` record in :attr:`skipped`.

    Args:
        model: the chat model of :class:`Ask`.
        stream: the stream of :class:`Write`.
        importance: the scorer of :class:`Score`; None: ``ImportanceScorer(model)`` with the
            settings' bounds and output form, returning None for an unrated memory.
        settings: the reflection's settings; None for the defaults.
    """

    def __init__(
        self,
        model: BaseChatModel,
        stream: MemoryStream,
        importance: ImportanceScorer | None = None,
        settings: ReflectionSettings | None = None,
    ) -> None:
        self.settings = settings or ReflectionSettings()
        self.model = model
        self.stream = stream
        self.caller = ModelCaller(model, self.settings.limits, self.settings.output)
        self.importance = importance or ImportanceScorer(
            model, limits=self.settings.limits, output=self.settings.output, strict=False
        )

    def run(
        self, step: Step[T], config: RunnableConfig | None, spent: int = 0
    ) -> tuple[T, int, list[Dropped]]:
        """Run a stage to its end.

        Args:
            step: the stage.
            config: a runnable config for the calls.
            spent: calls this run already made (the budget's share used).

        Returns:
            Its result, how many model calls it made, and the calls skipped for the budget.
        """
        budget = _Budget(self.settings.max_calls, spent)
        config = _with_counter(config, budget.counter)
        try:
            request = next(step)
            while True:
                request = step.send(self._serve(request, config, budget))
        except StopIteration as done:
            return done.value, budget.counter.calls, budget.skipped

    async def arun(
        self, step: Step[T], config: RunnableConfig | None, spent: int = 0
    ) -> tuple[T, int, list[Dropped]]:
        """Async :meth:`run`."""
        budget = _Budget(self.settings.max_calls, spent)
        config = _with_counter(config, budget.counter)
        try:
            request = next(step)
            while True:
                request = step.send(await self._aserve(request, config, budget))
        except StopIteration as done:
            return done.value, budget.counter.calls, budget.skipped

    def _serve(
        self, request: Ask | Score | Retrieve | Write, config: RunnableConfig, budget: _Budget
    ) -> Any:
        if isinstance(request, Retrieve):
            r = request
            return [retrieve_evidence(r.retriever, q, r.k, r.relevance_min, config)
                    for q in r.questions]
        if isinstance(request, Ask):
            made = budget.allow(request.calls)
            return budget.pad(self.caller.batch(made, config), request.calls)
        if isinstance(request, Score):
            return self._rated(request, config, budget)
        return self.stream.add_many(request.items)

    async def _aserve(
        self, request: Ask | Score | Retrieve | Write, config: RunnableConfig, budget: _Budget
    ) -> Any:
        if isinstance(request, Retrieve):
            r = request
            found = [aretrieve_evidence(r.retriever, q, r.k, r.relevance_min, config)
                     for q in r.questions]
            return list(await asyncio.gather(*found))
        if isinstance(request, Ask):
            made = budget.allow(request.calls)
            return budget.pad(await self.caller.abatch(made, config), request.calls)
        if isinstance(request, Score):
            return await self._arated(request, config, budget)
        return await self.stream.aadd_many(request.items)

    def _rated(self, request: Score, config: RunnableConfig, budget: _Budget) -> Any:
        ratings = rate_with(self.importance, self.stream.persona, request.items,
                            config=config, max_calls=budget.left())
        return budget.rated(ratings)

    async def _arated(self, request: Score, config: RunnableConfig, budget: _Budget) -> Any:
        ratings = await arate_with(self.importance, self.stream.persona, request.items,
                                   config=config, max_calls=budget.left())
        return budget.rated(ratings)

    def node(
        self, name: str, stage: Callable[[ReflectionState], Step[dict[str, Any]]]
    ) -> GraphNode:
        """A graph node running ``stage``, sync and async, adding its calls to ``llm_calls``."""

        def func(state: ReflectionState, config: RunnableConfig) -> dict[str, Any]:
            spent = state["llm_calls"]
            return _counted(state, *self.run(stage(state), config, spent))

        async def afunc(state: ReflectionState, config: RunnableConfig) -> dict[str, Any]:
            spent = state["llm_calls"]
            return _counted(state, *await self.arun(stage(state), config, spent))

        return GraphNode(func, afunc, name=name)


def _counted(
    state: ReflectionState, update: dict[str, Any], calls: int, skipped: list[Dropped]
) -> dict[str, Any]:
    """A node's update: its calls added to ``llm_calls``, its skipped calls recorded.

    The reasons of everything dropped so far are written out again.
    """
    update = {**update, "llm_calls": state["llm_calls"] + calls}
    if skipped:
        update["dropped"] = [*update.get("dropped", state["dropped"]), *skipped]
    if "dropped" in update:
        update["reasons"] = reasons(update["dropped"])
    return update


class _Budget:
    """The calls one stage may still make, and the record of those it did not make."""

    def __init__(self, max_calls: int | None, spent: int) -> None:
        self.max_calls = max_calls
        self.spent = spent
        self.counter = _CallCounter()
        self.skipped: list[Dropped] = []

    def left(self) -> int | None:
        """Calls left (None: no budget)."""
        if self.max_calls is None:
            return None
        return max(self.max_calls - self.spent - self.counter.calls, 0)

    def allow(self, calls: list[Call]) -> list[Call]:
        """The calls that fit in the budget; a record for the others."""
        left = self.left()
        if left is None or left >= len(calls):
            return calls
        self._skip(calls[0].kind, len(calls) - left)
        return calls[:left]

    def pad(self, replies: list[str], calls: list[Call]) -> list[str]:
        """The replies, with "" for each call skipped."""
        return [*replies, *[""] * (len(calls) - len(replies))]

    def rated(self, ratings: list[float | None]) -> list[float | None]:
        """The scorer's ratings; a record when the budget left some unrated."""
        if self.left() == 0 and None in ratings:
            self._skip("ratings", ratings.count(None))
        return ratings

    def _skip(self, kind: str, count: int) -> None:
        what = "rating" if kind == "ratings" else "call"
        self.skipped.append(drop(
            _STAGE_OF.get(kind, "write_back"), "budget_spent", numbers=[count],
            text=f"{count} {what}{'s' if count > 1 else ''} skipped: the budget of "
                 f"{self.max_calls} model calls was spent",
        ))


def drop(stage: str, reason: str, **about: Any) -> Dropped:
    """A :class:`Dropped` record; ``about`` holds question, text and numbers when known."""
    return Dropped(stage=stage, reason=reason, **about)  # type: ignore[typeddict-item]


def excerpt(text: str, limit: int = 200) -> str:
    """The start of a reply, for the records."""
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "…"
