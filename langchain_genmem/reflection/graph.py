"""Reflection as a LangGraph graph: from recent memories to thoughts with evidence.

:func:`create_reflection_graph` builds the reflection of Generative Agents (seed 002, stages
1 to 7 but the thoughts after a conversation; seed 004's condensing and window trigger) as a
compiled ``StateGraph``::

    check_trigger → focal_points → retrieve × questions (Send, in parallel)
                  → insights → condense → write_back → reset_trigger

Each model-calling stage is written once, as a generator that yields what it needs (model
calls, importance ratings, a stream write) and gets the results back; :class:`Runner`
serves those requests with ``batch``/``score_many``/``add_many`` in the sync node and with
``abatch``/``ascore_many``/``aadd_many`` in the async one, so both paths run the same code.
The same pieces write the thoughts after a conversation
(:mod:`langchain_genmem.reflection.conversation`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, TypeVar

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph._internal._runnable import RunnableCallable
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Overwrite, Send

from langchain_genmem.errors import ParseError, ValidationError
from langchain_genmem.importance import ImportanceScorer, reply_text
from langchain_genmem.keywords import unique
from langchain_genmem.nodes import MemoryNode
from langchain_genmem.parsers import (
    format_numbered,
    parse_focal_points,
    parse_insights,
    parse_triples,
)
from langchain_genmem.parsers import text_key as _text_key
from langchain_genmem.reflection.prompts import (
    DEFAULT_BATCH_TRIPLE_PROMPT,
    DEFAULT_CONDENSE_PROMPT,
    DEFAULT_CONDENSE_SYSTEM_PROMPT,
    DEFAULT_FOCAL_POINTS_PROMPT,
    DEFAULT_INSIGHTS_PROMPT,
    DEFAULT_INSIGHTS_SYSTEM_PROMPT,
    DEFAULT_MEMO_PROMPT,
    DEFAULT_PLANNING_THOUGHT_PROMPT,
    DEFAULT_QUESTIONS_SYSTEM_PROMPT,
)
from langchain_genmem.reflection.state import (
    Dropped,
    Insight,
    QuestionInsights,
    QuestionTask,
    ReflectionInput,
    ReflectionOutput,
    ReflectionState,
    Retrieved,
    TriggerPolicy,
    TriggerReport,
)
from langchain_genmem.retrievers import GenerativeAgentsRetriever
from langchain_genmem.store import MemoryStream, thought_expiration

__all__ = ["DEFAULT_REFLECTION_PROMPTS", "PROMPT_FIELDS", "create_reflection_graph"]

T = TypeVar("T")

FALLBACK_POIGNANCY = 4.0
# How to reflect when the trigger is not due, in every trigger report.
FORCE_HINT = "force=True, or `genmem reflect --force`, reflects now"
"""The poignancy of a thought the scorer could not rate (the original's fail-safe rating)."""

# --- prompts -------------------------------------------------------------------------------

DEFAULT_REFLECTION_PROMPTS: Mapping[str, str] = MappingProxyType(
    {
        "focal_points": DEFAULT_FOCAL_POINTS_PROMPT,
        "focal_points_system": DEFAULT_QUESTIONS_SYSTEM_PROMPT,
        "insights": DEFAULT_INSIGHTS_PROMPT,
        "insights_system": DEFAULT_INSIGHTS_SYSTEM_PROMPT,
        "condense": DEFAULT_CONDENSE_PROMPT,
        "condense_system": DEFAULT_CONDENSE_SYSTEM_PROMPT,
        "triples": DEFAULT_BATCH_TRIPLE_PROMPT,
        "planning": DEFAULT_PLANNING_THOUGHT_PROMPT,
        "memo": DEFAULT_MEMO_PROMPT,
    }
)
"""The prompts of reflection by name, as ``prompts={...}`` overrides them. A ``*_system``
prompt is the system message of the call of the same name; "" sends none."""

PROMPT_FIELDS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "focal_points": ("statements", "n", "persona"),
        "focal_points_system": ("n", "persona"),
        "insights": ("statements", "n", "question", "persona"),
        "insights_system": ("n", "question", "persona"),
        "condense": ("insights", "n", "question", "persona"),
        "condense_system": ("insights", "n", "question", "persona"),
        "triples": ("statements", "n", "persona"),
        "planning": ("conversation", "persona", "partner"),
        "memo": ("conversation", "persona", "partner"),
    }
)
"""The ``str.format`` fields each prompt may use (see :mod:`langchain_genmem.reflection.prompts`;
``question`` is the focal point, ``partner`` the other speaker)."""

GRAPH_PROMPTS = ("focal_points", "focal_points_system", "insights", "insights_system",
                 "condense", "condense_system", "triples")


def resolve_prompts(given: Mapping[str, str] | None, names: Sequence[str]) -> dict[str, str]:
    """Return the prompts ``names`` with the overrides of ``given``, each checked.

    Args:
        given: overrides by name, or None.
        names: the prompts the caller uses.

    Returns:
        Every prompt of ``names``.

    Raises:
        ValidationError: an unknown name, a prompt that is not a text, an empty human
            prompt, or a field the prompt may not use.
    """
    given = dict(given or {})
    unknown = sorted(set(given) - set(names))
    if unknown:
        msg = f"prompts: unknown names {unknown}; expected some of {list(names)}"
        raise ValidationError(msg, field="prompts")
    out = {name: given.get(name, DEFAULT_REFLECTION_PROMPTS[name]) for name in names}
    for name, template in out.items():
        if not isinstance(template, str) or not (template.strip() or name.endswith("_system")):
            msg = f"prompts[{name!r}]: expected a non-empty text, got {template!r}"
            raise ValidationError(msg, field="prompts")
        fields = PROMPT_FIELDS[name]
        try:
            template.format(**dict.fromkeys(fields, "x"))
        except (KeyError, IndexError, ValueError) as e:
            msg = (
                f"prompts[{name!r}]: cannot be filled ({e!r}); its fields are "
                f"{', '.join('{' + f + '}' for f in fields)}; write literal braces as {{{{ }}}}"
            )
            raise ValidationError(msg, field="prompts") from e
    return out


def messages(system: str, human: str) -> list[BaseMessage]:
    """The messages of one call: the system prompt (when not empty) and the human prompt."""
    return [SystemMessage(system), HumanMessage(human)] if system else [HumanMessage(human)]


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


Step = Generator[Ask | Score | Write, Any, T]


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

    def _serve(self, request: Ask | Score | Write, config: RunnableConfig) -> Any:
        if isinstance(request, Ask):
            replies = self.model.batch(request.requests, config) if request.requests else []
            return [_text(reply) for reply in replies]
        if isinstance(request, Score):
            try:
                return self.importance.score_many(self.stream.persona, request.items, config=config)
            except ParseError as error:
                return error
        return self.stream.add_many(request.items)

    async def _aserve(self, request: Ask | Score | Write, config: RunnableConfig) -> Any:
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
    ) -> RunnableCallable:
        """A graph node running ``stage``, sync and async, adding its calls to ``llm_calls``."""

        def func(state: ReflectionState, config: RunnableConfig) -> dict[str, Any]:
            update, calls = self.run(stage(state), config)
            return {**update, "llm_calls": state["llm_calls"] + calls}

        async def afunc(state: ReflectionState, config: RunnableConfig) -> dict[str, Any]:
            update, calls = await self.arun(stage(state), config)
            return {**update, "llm_calls": state["llm_calls"] + calls}

        return RunnableCallable(func, afunc, name=name, trace=False)


# --- pure helpers ----------------------------------------------------------------------------


def drop(stage: str, reason: str, **about: Any) -> Dropped:
    """A :class:`Dropped` record; ``about`` holds question, text and numbers when known."""
    return Dropped(stage=stage, reason=reason, **about)  # type: ignore[typeddict-item]


def excerpt(text: str, limit: int = 200) -> str:
    """The start of a reply, for the records."""
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "…"


def _candidates(stream: MemoryStream) -> list[MemoryNode]:
    """Events then thoughts, each newest first, without "idle" ones (the original's order)."""
    nodes = stream.nodes("event") + stream.nodes("thought")
    return [n for n in nodes if "idle" not in n.embedding_key]


def read_insights(
    reply: str, shown: Sequence[str], question: str, stage: str
) -> tuple[list[Insight], list[Dropped]]:
    """Read the insights of a reply and map their numbers to the node ids shown.

    Args:
        reply: the model's reply.
        shown: node ids in the order the prompt numbered them, from 0.
        question: the focal point, for the records.
        stage: the stage, for the records.

    Returns:
        The insights with at least one valid number, and what was dropped.
    """
    parsed = parse_insights(reply)
    if not parsed:
        return [], [drop(stage, "unreadable_reply", question=question, text=excerpt(reply))]
    insights: list[Insight] = []
    dropped: list[Dropped] = []
    for text, cited in parsed:
        valid = [n for n in cited if 0 <= n < len(shown)]
        wrong = [n for n in cited if not 0 <= n < len(shown)]
        if wrong:
            dropped.append(
                drop(stage, "evidence_out_of_range", question=question, text=text, numbers=wrong)
            )
        if not valid:
            dropped.append(drop(stage, "no_evidence", question=question, text=text))
            continue
        evidence = [shown[n] for n in valid]
        insights.append(Insight(text=text, evidence=evidence, cited=valid, dropped_numbers=wrong))
    return insights, dropped


@dataclass
class Draft:
    """A thought to write: its text, evidence ids and the topic of its fallback triple."""

    text: str
    evidence: list[str]
    topic: str


def _merge(per_question: Sequence[QuestionInsights]) -> tuple[list[Draft], list[Dropped]]:
    """One draft per distinct insight (without case and spacing), evidence united."""
    drafts: dict[str, Draft] = {}
    dropped: list[Dropped] = []
    for entry in per_question:
        for insight in entry["insights"]:
            key = _text_key(insight["text"])
            first = drafts.get(key)
            if first is None:
                drafts[key] = Draft(insight["text"], list(insight["evidence"]), entry["question"])
                continue
            first.evidence = unique([*first.evidence, *insight["evidence"]])
            dropped.append(
                drop("write_back", "duplicate", question=entry["question"], text=insight["text"])
            )
    return list(drafts.values()), dropped


def write_thoughts(
    stream: MemoryStream, prompts: Mapping[str, str], drafts: Sequence[Draft], stage: str
) -> Step[tuple[list[MemoryNode], list[Dropped]]]:
    """Structure and store thoughts: one triple call, one scoring call, one write.

    The triples come from one batched call (prompt ``"triples"``); a thought whose triple is
    unreadable gets (persona, ``"reflect"``, its topic) and a ``"triple_fallback"`` record.
    Poignancy comes from one ``score_many`` call with the thought prompt; if the scorer
    finds no rating even asking a thought alone, every thought of the write gets
    :data:`FALLBACK_POIGNANCY` and a ``"rating_fallback"`` record. Every thought is
    created at the stream's clock, expires 30 days later (as in the original), and takes
    its keywords from its triple (the stream's rule); the stream computes its depth.

    Args:
        stream: where to write.
        prompts: the prompts, with ``"triples"``.
        drafts: the thoughts, at least one.
        stage: the stage, for the records.

    Returns:
        A stage: the nodes written, in draft order, and the fallback records.
    """
    persona = stream.persona
    statements = format_numbered([draft.text for draft in drafts], start=1)
    fields = {"statements": statements, "n": len(drafts), "persona": persona}
    [reply] = yield Ask([messages("", prompts["triples"].format(**fields))])
    triples = parse_triples(reply, len(drafts), fallback_subject=persona)
    dropped: list[Dropped] = []
    ratings = yield Score([("thought", draft.text) for draft in drafts])
    if isinstance(ratings, ParseError):
        dropped.append(drop(stage, "rating_fallback", text=excerpt(ratings.reply)))
        ratings = [FALLBACK_POIGNANCY] * len(drafts)
    created = stream.clock()
    items: list[dict[str, Any]] = []
    for draft, triple, rating in zip(drafts, triples, ratings, strict=False):
        if triple is None:
            triple = (persona, "reflect", draft.topic)
            dropped.append(drop(stage, "triple_fallback", text=draft.text))
        subject, predicate, obj = triple
        items.append(
            {
                "type": "thought",
                "description": draft.text,
                "subject": subject,
                "predicate": predicate,
                "object": obj,
                "poignancy": rating,
                "created": created,
                "expiration": thought_expiration(created),
                "evidence": draft.evidence,
            }
        )
    nodes = yield Write(items)
    return nodes, dropped


# --- the nodes -------------------------------------------------------------------------------


@dataclass
class _Reflection:
    """The nodes and routers of one reflection graph, sharing its settings."""

    stream: MemoryStream
    retriever: GenerativeAgentsRetriever
    prompts: dict[str, str]
    policy: TriggerPolicy
    window: int
    threshold: float | None
    n_focal_points: int
    n_insights: int
    max_insights: int
    k: int
    force: bool

    def _ask(self, name: str, **fields: Any) -> list[BaseMessage]:
        fields["persona"] = self.stream.persona
        system = self.prompts.get(f"{name}_system", "").format(**fields)
        return messages(system, self.prompts[name].format(**fields))

    def _numbered(self, node_ids: Sequence[str]) -> str:
        """The memories' embedding keys, numbered from 0 as the insights prompt shows them."""
        return format_numbered([self.stream.get(node_id).embedding_key for node_id in node_ids])

    def _trigger(self) -> tuple[TriggerReport, list[MemoryNode]]:
        state = self.stream.state
        candidates = _candidates(self.stream)
        if self.policy == "counters":
            # the original counts importance_trigger_curr down from its max and is due at 0;
            # reported as importance gathered vs the max, so both policies read value >= threshold
            threshold = state.importance_trigger_max
            value = threshold - state.importance_trigger_curr
            due = state.importance_trigger_curr <= 0 and bool(candidates)
            recent = sorted(candidates, key=lambda n: n.last_accessed)
            memories = recent[-(int(state.importance_ele_n) or self.window) :]
            gathered = f"{value:g} of {threshold:g} importance gathered since the last reflection"
        else:
            threshold = state.importance_trigger_max if self.threshold is None else self.threshold
            memories = sorted(candidates, key=lambda n: n.node_count)[-self.window :]
            value = sum(n.poignancy for n in memories)
            due = bool(memories) and value >= threshold
            gathered = (
                f"the newest {len(memories)} memories' poignancy sums to {value:g} "
                f"of {threshold:g}"
            )
        verdict = "due" if due else f"not due until it reaches {threshold:g}; {FORCE_HINT}"
        report = TriggerReport(
            policy=self.policy,
            due=due,
            forced=False,
            value=float(value),
            threshold=float(threshold),
            explanation=f"{gathered}: {verdict}",
        )
        return report, memories

    def check_trigger(self, state: ReflectionState) -> dict[str, Any]:
        """Decide whether to reflect; reset every output key."""
        forced = self.force if state.get("force") is None else bool(state.get("force"))
        report, memories = self._trigger()
        report["forced"] = forced
        return {
            "force": None,
            "status": "running" if report["due"] or forced else "not_due",
            "trigger": report,
            "memories": [n.node_id for n in memories],
            "focal_points": [],
            "insights": [],
            "dropped": [],
            "written": [],
            "llm_calls": 0,
            "original_llm_calls": 0,
            "reset": False,
            "retrieved": Overwrite([]),
        }

    @staticmethod
    def after_check(state: ReflectionState) -> Literal["focal_points", "__end__"]:
        """Go on to the focal points unless the trigger is not due."""
        return END if state["status"] == "not_due" else "focal_points"

    def focal_points(self, state: ReflectionState) -> Step[dict[str, Any]]:
        """Ask for the questions (focal points) about the trigger's memories."""
        memories = [self.stream.get(node_id) for node_id in state["memories"]]
        if not memories:
            return {"status": "no_questions", "dropped": [drop("focal_points", "no_memories")]}
        statements = "".join(f"{node.embedding_key}\n" for node in memories)
        n = self.n_focal_points
        [reply] = yield Ask([self._ask("focal_points", statements=statements, n=n)])
        questions = parse_focal_points(reply)
        dropped = [drop("focal_points", "over_max", text=q) for q in questions[n:]]
        questions = questions[:n]
        if not questions:
            dropped.append(drop("focal_points", "unreadable_reply", text=excerpt(reply)))
        return {
            "status": "running" if questions else "no_questions",
            "focal_points": questions,
            "dropped": dropped,
            "original_llm_calls": 1,
        }

    @staticmethod
    def fan_out(state: ReflectionState) -> list[Send] | Literal["__end__"]:
        """One ``retrieve`` branch per question; the end when there is none."""
        if state["status"] == "no_questions":
            return END
        return [
            Send("retrieve", QuestionTask(index=index, question=question))
            for index, question in enumerate(state["focal_points"])
        ]

    def retrieve(self, task: QuestionTask, config: RunnableConfig) -> dict[str, Any]:
        """Retrieve the evidence of one question (access times left for the join)."""
        docs = self.retriever.invoke(task["question"], config, k=self.k)
        found = Retrieved(
            index=task["index"],
            question=task["question"],
            node_ids=[doc.metadata["node_id"] for doc in docs],
        )
        return {"retrieved": [found]}

    def insights(self, state: ReflectionState) -> Step[dict[str, Any]]:
        """Mark what was retrieved as accessed, once; ask each question for insights."""
        found = sorted(state["retrieved"], key=lambda r: r["index"])
        accessed = unique(node_id for r in found for node_id in r["node_ids"])
        if accessed:
            self.stream.mark_accessed(accessed)
        asked = [r for r in found if r["node_ids"]]
        dropped = [
            drop("insights", "no_retrieved", question=r["question"])
            for r in found
            if not r["node_ids"]
        ]
        requests = [
            self._ask(
                "insights",
                statements=self._numbered(r["node_ids"]),
                n=self.n_insights,
                question=r["question"],
            )
            for r in asked
        ]
        replies = yield Ask(requests)
        per_question: list[QuestionInsights] = []
        for r, reply in zip(asked, replies, strict=False):
            kept, lost = read_insights(reply, r["node_ids"], r["question"], "insights")
            per_question.append(
                QuestionInsights(
                    question=r["question"], retrieved=r["node_ids"], insights=kept, condensed=False
                )
            )
            dropped += lost
        return {"insights": per_question, "dropped": [*state["dropped"], *dropped]}

    def condense(self, state: ReflectionState) -> Step[dict[str, Any]]:
        """Condense the questions that have more than ``max_insights`` insights."""
        out = list(state["insights"])
        todo = [i for i, entry in enumerate(out) if len(entry["insights"]) > self.max_insights]
        if not todo:
            return {}
        requests = []
        for i in todo:
            listed = [
                f"{x['text']} [{', '.join(map(str, x['cited']))}]" for x in out[i]["insights"]
            ]
            requests.append(
                self._ask(
                    "condense",
                    insights=format_numbered(listed, start=1),
                    n=self.max_insights,
                    question=out[i]["question"],
                )
            )
        replies = yield Ask(requests)
        dropped: list[Dropped] = []
        for i, reply in zip(todo, replies, strict=False):
            entry = out[i]
            kept, lost = read_insights(reply, entry["retrieved"], entry["question"], "condense")
            condensed = bool(kept)
            kept = kept or entry["insights"]
            dropped += lost
            dropped += [
                drop("condense", "over_max", question=entry["question"], text=x["text"])
                for x in kept[self.max_insights :]
            ]
            out[i] = {**entry, "insights": kept[: self.max_insights], "condensed": condensed}
        return {"insights": out, "dropped": [*state["dropped"], *dropped]}

    def write_back(self, state: ReflectionState) -> Step[dict[str, Any]]:
        """Write the distinct insights as thoughts, in one stream write."""
        drafts, dropped = _merge(state["insights"])
        nodes: list[MemoryNode] = []
        if drafts:
            nodes, lost = yield from write_thoughts(self.stream, self.prompts, drafts, "write_back")
            dropped += lost
        written = [node.node_id for node in nodes]
        return {
            "status": "reflected" if written else "no_insights",
            "written": written,
            "dropped": [*state["dropped"], *dropped],
            "original_llm_calls": 1 + len(state["focal_points"]) + 2 * len(written),
        }

    def reset_trigger(self, state: ReflectionState) -> dict[str, Any]:
        """Counters policy: set the trigger counters back; the window policy keeps none."""
        if self.policy != "counters":
            return {"reset": False}
        self.stream.reset_reflection_trigger()
        return {"reset": True}


# --- the factory -----------------------------------------------------------------------------


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        msg = f"{name}: expected an integer >= 1, got {value!r}"
        raise ValidationError(msg, field=name)
    return value


def create_reflection_graph(
    model: BaseChatModel,
    stream: MemoryStream,
    *,
    retriever: GenerativeAgentsRetriever | None = None,
    importance: ImportanceScorer | None = None,
    trigger: TriggerPolicy = "counters",
    window: int = 50,
    threshold: float | None = None,
    n_focal_points: int = 3,
    n_insights: int = 5,
    max_insights: int = 5,
    k: int = 30,
    prompts: Mapping[str, str] | None = None,
    force: bool = False,
    checkpointer: Any = None,
    store: Any = None,
    name: str = "reflection",
) -> CompiledStateGraph[ReflectionState, None, ReflectionInput, ReflectionOutput]:
    """Build the reflection of Generative Agents as a compiled LangGraph graph.

    The graph turns a persona's recent memories into thoughts with evidence::

        START → check_trigger ─(not due)→ END
                     │
                focal_points ─(no question)→ END
                     │ Send, one branch per question, in parallel
                  retrieve
                     │ (join)
                  insights → condense → write_back → reset_trigger → END

    * ``check_trigger``: ``"counters"`` (the original): due when the persona's
      ``importance_trigger_curr`` is at or below 0 and it has memories; the focal points are
      asked about its last ``importance_ele_n`` events and thoughts by last access (when
      ``importance_ele_n`` is 0, as after a reset, the last ``window`` instead of the
      original's every memory). ``"window"`` (seed 004): due when the poignancy of the
      newest ``window`` events and thoughts sums to ``threshold`` or more (None: the
      persona's ``importance_trigger_max``); the focal points are asked about those. Idle
      memories never count. Not due (and not forced) ends the run, status ``"not_due"``.
      The window policy keeps no state, as in seed 004: it stays due while the window's sum
      reaches the threshold, and the thoughts a reflection writes are memories of the
      window too.
    * ``focal_points``: one call; the memories' ``embedding_key`` one a line. No usable
      question ends the run with status ``"no_questions"``: nothing written, trigger left as
      is (one cheap call to retry).
    * ``retrieve``: one branch per question, sent with ``langgraph.types.Send`` and run in
      parallel; each takes the best ``k`` memories with the retriever (its recency mode
      and weights) without touching access times, so every branch scores the same state
      and the result does not depend on thread timing. The original retrieves the
      questions one after the other, each seeing the access times the previous one set.
    * ``insights`` (the join): the union of retrieved memories is marked accessed once, at
      the stream's clock; then one call per question (concurrently), its evidence numbered
      from 0 as :func:`~langchain_genmem.parsers.format_numbered` shows it. Cited numbers
      map to those node ids; a number not shown is dropped alone and reported, an insight
      left without valid evidence is not written (reported). An unreadable reply drops
      that question's insights only (the original drops all and writes "this is blank").
    * ``condense``: a question with more than ``max_insights`` insights is condensed by one
      call (seed 004); :func:`~langchain_genmem.parsers.parse_insights` already merges
      repeated insights of one reply, so a question with at most ``max_insights`` has no
      duplicates and costs no call. An unreadable condensed reply keeps the first
      ``max_insights`` insights as they were.
    * ``write_back``: insights repeated across questions (without case and spacing) become
      one thought with the evidence of all; then ONE batched triple call, ONE batched
      importance call and ONE ``stream.add_many`` (all or nothing). Created at the stream's
      clock, expiring 30 days later, keywords from the triple, depth 1 + the deepest
      evidence; an unreadable triple falls back to (persona, ``"reflect"``, the question).
      Nothing usable: status ``"no_insights"``, nothing written.
    * ``reset_trigger``: counters policy: ``stream.reset_reflection_trigger()`` (also after
      ``"no_insights"``, as the original resets after a failed reflection); window: nothing.

    Output (:class:`~langchain_genmem.reflection.state.ReflectionOutput`): ``status``,
    ``trigger``, ``memories``, ``focal_points``, ``insights``, ``dropped``, ``written``,
    ``llm_calls`` (every model call of the run, the scorer's included, counted by a
    callback) and ``original_llm_calls`` (1 + questions + 2 x thoughts written: the
    original's separate triple and poignancy call per thought). Input: ``{"force": True}``
    reflects even if not due; ``{}`` uses the graph's ``force``.

    Args:
        model: any LangChain chat model.
        stream: the persona's memory stream.
        retriever: the retriever of the evidence (over ``stream``); None builds one with
            the persona's weights. It is used with ``update_access=False`` (see above).
        importance: the poignancy scorer; None uses ``ImportanceScorer(model)``.
        trigger: ``"counters"`` or ``"window"``.
        window: memories in the window (window policy, and counters after a reset).
        threshold: the window policy's threshold; None for the persona's trigger max.
        n_focal_points: questions to ask.
        n_insights: insights asked per question.
        max_insights: the most insights kept per question.
        k: memories retrieved per question.
        prompts: overrides of :data:`DEFAULT_REFLECTION_PROMPTS` by name:
            ``focal_points``, ``insights``, ``condense``, ``triples`` and the system
            prompts ``focal_points_system``, ``insights_system``, ``condense_system``.
        force: reflect even when the trigger is not due.
        checkpointer: passed to ``compile()``.
        store: passed to ``compile()``.
        name: the graph's name, passed to ``compile()``.

    Returns:
        The compiled graph; ``invoke``, ``ainvoke`` and ``stream(..., stream_mode="updates")``
        work on it.

    Raises:
        ValidationError: a bad argument (the message names it).

    Example:
        .. code-block:: python

            from langchain_openai import ChatOpenAI
            from langchain_genmem import MemoryStream
            from langchain_genmem.reflection import create_reflection_graph

            graph = create_reflection_graph(ChatOpenAI(model="gpt-4o-mini"), stream)
            out = graph.invoke({"force": True})
            out["status"], out["written"], out["llm_calls"], out["original_llm_calls"]
    """
    # validate
    if not isinstance(model, Runnable):
        msg = f"model: expected a LangChain chat model, got {type(model).__name__}"
        raise ValidationError(msg, field="model")
    if not isinstance(stream, MemoryStream):
        msg = f"stream: expected a MemoryStream, got {type(stream).__name__}"
        raise ValidationError(msg, field="stream")
    if retriever is not None and not (
        isinstance(retriever, GenerativeAgentsRetriever) and retriever.memory_stream is stream
    ):
        msg = "retriever: expected a GenerativeAgentsRetriever over the same stream"
        raise ValidationError(msg, field="retriever")
    if trigger not in ("counters", "window"):
        msg = f"trigger: expected 'counters' or 'window', got {trigger!r}"
        raise ValidationError(msg, field="trigger")
    sizes = {"window": window, "n_focal_points": n_focal_points, "n_insights": n_insights,
             "max_insights": max_insights, "k": k}
    for field, value in sizes.items():
        _positive_int(field, value)
    if threshold is not None and (
        isinstance(threshold, bool) or not isinstance(threshold, (int, float))
    ):
        msg = f"threshold: expected a number or None, got {threshold!r}"
        raise ValidationError(msg, field="threshold")
    # normalise
    if retriever is None:
        retriever = GenerativeAgentsRetriever(stream=stream, k=k, update_access=False)
    else:
        retriever = retriever.model_copy(update={"update_access": False})
    runner = Runner(model, stream, importance or ImportanceScorer(model))
    nodes = _Reflection(
        stream=stream,
        retriever=retriever,
        prompts=resolve_prompts(prompts, GRAPH_PROMPTS),
        policy=trigger,
        window=window,
        threshold=None if threshold is None else float(threshold),
        n_focal_points=n_focal_points,
        n_insights=n_insights,
        max_insights=max_insights,
        k=k,
        force=bool(force),
    )
    # nodes
    builder = StateGraph(
        ReflectionState, input_schema=ReflectionInput, output_schema=ReflectionOutput
    )
    builder.add_node("check_trigger", RunnableCallable(nodes.check_trigger, trace=False))
    builder.add_node("focal_points", runner.node("focal_points", nodes.focal_points))
    builder.add_node("retrieve", RunnableCallable(nodes.retrieve, trace=False))
    builder.add_node("insights", runner.node("insights", nodes.insights))
    builder.add_node("condense", runner.node("condense", nodes.condense))
    builder.add_node("write_back", runner.node("write_back", nodes.write_back))
    builder.add_node("reset_trigger", RunnableCallable(nodes.reset_trigger, trace=False))
    # wire
    builder.add_edge(START, "check_trigger")
    builder.add_conditional_edges("check_trigger", nodes.after_check, ["focal_points", END])
    builder.add_conditional_edges("focal_points", nodes.fan_out, ["retrieve", END])
    builder.add_edge("retrieve", "insights")
    builder.add_edge("insights", "condense")
    builder.add_edge("condense", "write_back")
    builder.add_edge("write_back", "reset_trigger")
    builder.add_edge("reset_trigger", END)
    return builder.compile(checkpointer=checkpointer, store=store, name=name)
