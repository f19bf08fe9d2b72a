"""Reflection as a LangGraph graph: from recent memories to thoughts with evidence.

:func:`create_reflection_graph` builds the reflection of Generative Agents (the original's stages
1 to 7 but the thoughts after a conversation; the stepwise design's condensing and
window trigger) as a
compiled ``StateGraph``::

    check_trigger → focal_points → retrieve × questions (Send, in parallel)
                  → insights → condense → write_back → reset_trigger

Each node reads the graph's state, runs one stage of
:class:`~langchain_genmem.reflection.stages.Stages` and writes its result back. The stages
are written once, as generators that yield what they need (model calls, importance ratings,
a stream write; see :mod:`~langchain_genmem.reflection.steps`), served sync or async by the
same runner; the stepwise design's functions (:mod:`~langchain_genmem.reflection.stepwise`)
and the thoughts after a conversation (:mod:`~langchain_genmem.reflection.conversation`)
run the same stages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Overwrite, Send

from langchain_genmem.core.errors import ValidationError
from langchain_genmem.llm.importance import ImportanceScorer
from langchain_genmem.llm.prompts import (
    DEFAULT_BATCH_TRIPLE_PROMPT,
    DEFAULT_CONDENSE_PROMPT,
    DEFAULT_CONDENSE_SYSTEM_PROMPT,
    DEFAULT_FOCAL_POINTS_PROMPT,
    DEFAULT_INSIGHTS_PROMPT,
    DEFAULT_INSIGHTS_SYSTEM_PROMPT,
    DEFAULT_MEMO_PROMPT,
    DEFAULT_PLANNING_THOUGHT_PROMPT,
    DEFAULT_QUESTIONS_SYSTEM_PROMPT,
    STRUCTURED_BATCH_TRIPLE_PROMPT,
    STRUCTURED_CONDENSE_PROMPT,
    STRUCTURED_CONDENSE_SYSTEM_PROMPT,
    STRUCTURED_FOCAL_POINTS_PROMPT,
    STRUCTURED_INSIGHTS_PROMPT,
    STRUCTURED_INSIGHTS_SYSTEM_PROMPT,
    STRUCTURED_MEMO_PROMPT,
    STRUCTURED_PLANNING_THOUGHT_PROMPT,
)
from langchain_genmem.memory.stream import MemoryStream
from langchain_genmem.reflection.settings import UNSET, ReflectionSettings
from langchain_genmem.reflection.stages import PromptSet, Stages
from langchain_genmem.reflection.state import (
    QuestionTask,
    ReflectionInput,
    ReflectionOutput,
    ReflectionState,
    Retrieved,
    TriggerPolicy,
)
from langchain_genmem.reflection.steps import GraphNode, Runner, Step, retrieve_evidence
from langchain_genmem.retrieval.retrievers import GenerativeAgentsRetriever

__all__ = [
    "DEFAULT_REFLECTION_PROMPTS",
    "PROMPT_FIELDS",
    "STRUCTURED_REFLECTION_PROMPTS",
    "create_reflection_graph",
]

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

STRUCTURED_REFLECTION_PROMPTS: Mapping[str, str] = MappingProxyType(
    {
        **DEFAULT_REFLECTION_PROMPTS,
        "focal_points": STRUCTURED_FOCAL_POINTS_PROMPT,
        "insights": STRUCTURED_INSIGHTS_PROMPT,
        "insights_system": STRUCTURED_INSIGHTS_SYSTEM_PROMPT,
        "condense": STRUCTURED_CONDENSE_PROMPT,
        "condense_system": STRUCTURED_CONDENSE_SYSTEM_PROMPT,
        "triples": STRUCTURED_BATCH_TRIPLE_PROMPT,
        "planning": STRUCTURED_PLANNING_THOUGHT_PROMPT,
        "memo": STRUCTURED_MEMO_PROMPT,
    }
)
"""The same prompts in the structured form (a JSON schema shapes the reply); a prompt given
by name in ``prompts={...}`` replaces both forms."""

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
"""The ``str.format`` fields each prompt may use (see :mod:`langchain_genmem.llm.prompts`;
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


def prompt_set(given: Mapping[str, str] | None, names: Sequence[str]) -> PromptSet:
    """The prompts ``names`` in both forms, the overrides of ``given`` checked and used in both.

    Args:
        given: overrides by name, or None.
        names: the prompts the caller uses.

    Returns:
        The prompts.

    Raises:
        ValidationError: as :func:`resolve_prompts`.
    """
    text = resolve_prompts(given, names)
    structured = {name: (given or {}).get(name, STRUCTURED_REFLECTION_PROMPTS[name])
                  for name in names}
    return PromptSet(text=text, structured=structured)


# --- the nodes -------------------------------------------------------------------------------


@dataclass
class _Reflection:
    """The nodes and routers of one reflection graph: its stages, reading and writing state."""

    stages: Stages
    force: bool

    def check_trigger(self, state: ReflectionState) -> dict[str, Any]:
        """Decide whether to reflect; reset every output key."""
        forced = self.force if state.get("force") is None else bool(state.get("force"))
        report, memories = self.stages.trigger()
        report["forced"] = forced
        due = report["due"] or forced
        return {
            "force": None,
            "status": "running" if due else "not_due",
            "reasons": [] if due else [report["explanation"]],
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
        end = cast(Literal["__end__"], END)  # langgraph types END, "__end__", as a str
        return end if state["status"] == "not_due" else "focal_points"

    def focal_points(self, state: ReflectionState) -> Step[dict[str, Any]]:
        """Ask for the questions (focal points) about the trigger's memories."""
        memories = [self.stages.stream.get(node_id) for node_id in state["memories"]]
        questions, dropped = yield from self.stages.focal_points(memories)
        update: dict[str, Any] = {
            "status": "running" if questions else "no_questions",
            "dropped": dropped,
        }
        if memories:
            update |= {"focal_points": questions, "original_llm_calls": 1}
        return update

    @staticmethod
    def fan_out(state: ReflectionState) -> list[Send] | Literal["__end__"]:
        """One ``retrieve`` branch per question; the end when there is none."""
        if state["status"] == "no_questions":
            return cast(Literal["__end__"], END)  # langgraph types END, "__end__", as a str
        return [
            Send("retrieve", QuestionTask(index=index, question=question))
            for index, question in enumerate(state["focal_points"])
        ]

    def retrieve(self, task: QuestionTask, config: RunnableConfig) -> dict[str, Any]:
        """Retrieve the evidence of one question (access times left for the join)."""
        s = self.stages
        chosen = s.settings
        node_ids = retrieve_evidence(s.retriever, task["question"], chosen.k,
                                     chosen.relevance_min, config)
        found = Retrieved(index=task["index"], question=task["question"], node_ids=node_ids)
        return {"retrieved": [found]}

    def insights(self, state: ReflectionState) -> Step[dict[str, Any]]:
        """Mark what was retrieved as accessed, once; ask each question for insights."""
        per_question, dropped = yield from self.stages.insights(state["retrieved"])
        return {"insights": per_question, "dropped": [*state["dropped"], *dropped]}

    def condense(self, state: ReflectionState) -> Step[dict[str, Any]]:
        """Condense the questions that have more than ``max_insights`` insights."""
        per_question, dropped = yield from self.stages.condense(state["insights"])
        if per_question == state["insights"] and not dropped:
            return {}
        return {"insights": per_question, "dropped": [*state["dropped"], *dropped]}

    def write_back(self, state: ReflectionState) -> Step[dict[str, Any]]:
        """Write the distinct insights as thoughts, in one stream write."""
        nodes, dropped = yield from self.stages.write_back(state["insights"])
        written = [node.node_id for node in nodes]
        return {
            "status": "reflected" if written else "no_insights",
            "written": written,
            "dropped": [*state["dropped"], *dropped],
            "original_llm_calls": 1 + len(state["focal_points"]) + 2 * len(written),
        }

    def reset_trigger(self, state: ReflectionState) -> dict[str, Any]:
        """Counters policy: set the trigger counters back; the window policy keeps none."""
        if self.stages.settings.trigger != "counters":
            return {"reset": False}
        self.stages.stream.reset_reflection_trigger()
        return {"reset": True}


# --- the factory -----------------------------------------------------------------------------


def check_model(model: Any) -> None:
    """Refuse anything that is not a LangChain chat model (a Runnable), naming ``model``."""
    if not isinstance(model, Runnable):
        msg = f"model: expected a LangChain chat model, got {type(model).__name__}"
        raise ValidationError(msg, field="model")


def check_stream(stream: Any) -> None:
    """Refuse anything that is not a :class:`~langchain_genmem.MemoryStream`."""
    if not isinstance(stream, MemoryStream):
        msg = f"stream: expected a MemoryStream, got {type(stream).__name__}"
        raise ValidationError(msg, field="stream")


def make_stages(
    model: Any,
    stream: Any,
    *,
    retriever: GenerativeAgentsRetriever | None = None,
    settings: ReflectionSettings,
    prompts: Mapping[str, str] | None = None,
    scale: float = 1.0,
) -> Stages:
    """Check the model, stream and retriever of a reflection and build its :class:`Stages`.

    Args:
        model: the chat model.
        stream: the persona's stream.
        retriever: the evidence retriever (over ``stream``), or None for the persona's.
        settings: the reflection's settings (already checked).
        prompts: overrides of the prompts by name.
        scale: what the window trigger divides the poignancy sum by (``threshold`` is on
            that scale).

    Returns:
        The stages, the retriever copied with ``update_access=False``.

    Raises:
        ValidationError: a bad argument (the message names it).
    """
    check_model(model)
    check_stream(stream)
    if retriever is not None and not (
        isinstance(retriever, GenerativeAgentsRetriever) and retriever.memory_stream is stream
    ):
        msg = "retriever: expected a GenerativeAgentsRetriever over the same stream"
        raise ValidationError(msg, field="retriever")
    if retriever is None:
        retriever = GenerativeAgentsRetriever(memory_stream=stream, k=settings.k,
                                              update_access=False)
    else:
        retriever = retriever.model_copy(update={"update_access": False})
    return Stages(
        stream=stream,
        retriever=retriever,
        prompts=prompt_set(prompts, GRAPH_PROMPTS),
        settings=settings,
        scale=scale,
    )


def create_reflection_graph(
    model: BaseChatModel,
    stream: MemoryStream,
    *,
    settings: ReflectionSettings | None = None,
    retriever: GenerativeAgentsRetriever | None = None,
    importance: ImportanceScorer | None = None,
    trigger: TriggerPolicy = UNSET,
    window: int = UNSET,
    threshold: float | None = UNSET,
    n_focal_points: int = UNSET,
    n_insights: int = UNSET,
    max_insights: int = UNSET,
    k: int = UNSET,
    relevance_min: float | None = UNSET,
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
      original's every memory). ``"window"`` (the stepwise design's): due when the poignancy of the
      newest ``window`` events and thoughts sums to ``threshold`` or more (None: the
      persona's ``importance_trigger_max``); the focal points are asked about those. Idle
      memories never count. Not due (and not forced) ends the run, status ``"not_due"``.
      The window policy keeps no state, as that design's: it stays due while the window's sum
      reaches the threshold, and the thoughts a reflection writes are memories of the
      window too.
    * ``focal_points``: one call; the memories' ``embedding_key`` one a line. No usable
      question ends the run with status ``"no_questions"``: nothing written, trigger left as
      is (one cheap call to retry).
    * ``retrieve``: one branch per question, sent with ``langgraph.types.Send`` and run in
      parallel; each takes the best ``k`` memories with the retriever (its recency mode
      and weights; with ``relevance_min``, the best ``k`` of those whose normalised
      relevance is above it, as that design does) without touching access times, so every branch
      scores the same state and the result does not depend on thread timing. The original
      retrieves the questions one after the other, each seeing the access times the
      previous one set.
    * ``insights`` (the join): the union of retrieved memories is marked accessed once, at
      the stream's clock; then one call per question (concurrently), its evidence numbered
      from 0 as :func:`~langchain_genmem.llm.parsers.format_numbered` shows it. Cited numbers
      map to those node ids; a number not shown is dropped alone and reported, an insight
      left without valid evidence is not written (reported). An unreadable reply drops
      that question's insights only (the original drops all and writes "this is blank").
    * ``condense``: a question with more than ``max_insights`` insights is condensed by one
      call; :func:`~langchain_genmem.llm.parsers.parse_insights` already merges
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
    callback), ``original_llm_calls`` (1 + questions + 2 x thoughts written: the
    original's separate triple and poignancy call per thought) and ``reasons`` (what was
    dropped or skipped, one human-readable line each: why nothing was written when the
    status is ``"no_questions"`` or ``"no_insights"``). Input: ``{"force": True}``
    reflects even if not due; ``{}`` uses the graph's ``force``.

    Calls: every call is bounded (``settings.limits``: ``max_tokens`` of its kind, timeout)
    and asked in ``settings.output``'s form; a run makes at most ``settings.max_calls``
    calls, the steps left when they are spent are skipped (a ``"budget_spent"`` record). A
    thought the model gives no rating for gets the fallback importance and is listed as
    unrated (:func:`~langchain_genmem.llm.importance.unrated_ids`).

    Args:
        model: any LangChain chat model.
        stream: the persona's memory stream.
        settings: the reflection's settings
            (:class:`~langchain_genmem.reflection.settings.ReflectionSettings`); None for
            the defaults.
        retriever: the retriever of the evidence (over ``stream``); None builds one with
            the persona's weights. It is used with ``update_access=False`` (see above).
        importance: the poignancy scorer; None uses ``ImportanceScorer(model)`` with the
            settings' bounds and output form.
        trigger: overrides ``settings.trigger``: ``"counters"`` or ``"window"``.
        window: overrides ``settings.window``.
        threshold: overrides ``settings.threshold``.
        n_focal_points: overrides ``settings.n_focal_points``.
        n_insights: overrides ``settings.n_insights``.
        max_insights: overrides ``settings.max_insights``.
        k: overrides ``settings.k``.
        relevance_min: overrides ``settings.relevance_min`` (the stepwise design's
            per-question ``relevance > 0.5``): every memory is scored, those at or below
            are left out, and the best ``k`` of the rest are kept.
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
    settings = ReflectionSettings.merged(
        settings, trigger=trigger, window=window, threshold=threshold,
        n_focal_points=n_focal_points, n_insights=n_insights, max_insights=max_insights, k=k,
        relevance_min=relevance_min,
    )
    stages = make_stages(model, stream, retriever=retriever, settings=settings, prompts=prompts)
    runner = Runner(model, stream, importance, settings)
    nodes = _Reflection(stages=stages, force=bool(force))
    # nodes
    builder = StateGraph(
        ReflectionState, input_schema=ReflectionInput, output_schema=ReflectionOutput
    )
    builder.add_node("check_trigger", GraphNode(nodes.check_trigger))
    builder.add_node("focal_points", runner.node("focal_points", nodes.focal_points))
    builder.add_node("retrieve", GraphNode(nodes.retrieve))
    builder.add_node("insights", runner.node("insights", nodes.insights))
    builder.add_node("condense", runner.node("condense", nodes.condense))
    builder.add_node("write_back", runner.node("write_back", nodes.write_back))
    builder.add_node("reset_trigger", GraphNode(nodes.reset_trigger))
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
