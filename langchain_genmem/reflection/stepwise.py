"""Reflection step by step, as the stepwise design's: look at the insights, edit, write back.

The stepwise design reflects with plain functions a notebook calls one after the other::

    questions, insights_list = generate_insight(stream, model, context_window=15, threshold=3)
    insights_list[0][0] = ("Maria Lopez is preparing for an exam", [2, 5])   # edit freely
    thoughts = generate_reflection(stream, insights_list)

These functions run the stages of the reflection graph
(:class:`~langchain_genmem.reflection.stages.Stages`; the rules of each are told in
:func:`~langchain_genmem.reflection.graph.create_reflection_graph`), so for the same model
replies they write the same thoughts as ``create_reflection_graph(model, stream,
settings=DESIGN_SETTINGS)`` (:data:`DESIGN_SETTINGS`). The graph also reports what
it dropped and why; these functions log those records at INFO level
(``logging.getLogger("langchain_genmem.reflection.stepwise")``) and return that design's shapes:

* questions: ``list[str]``;
* insights: one list per question of ``(insight, pointers)`` pairs, where the pointers are
  the numbers of the evidence memories in the stream (``node_7`` is 7): the design's
  ``Reflection.pointers``, stable across questions, which :func:`generate_reflection` maps
  back to node ids. (The model cites the statements as numbered in its prompt, from 0;
  those numbers are translated, and a number the prompt did not show is dropped.)

Importance: the stepwise design rates memories from 0.1 to 1.0, the original (and the stream) from 1
to 10. ``importance_scale="unit"`` (the default of :func:`generate_insight`, whose
``threshold=3`` is the design's) compares the window's sum of poignancy / 10 with the
threshold; ``"poignancy"`` compares the stored values. What is stored never changes; the
DataFrame views (:mod:`langchain_genmem.dataframe`) take the same ``importance_scale``.

Every function has an async twin (``agenerate_insight``, ``acondense_insights``,
``agenerate_reflection``) that makes the same calls through ``abatch``/``ainvoke``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig

from langchain_genmem.core.errors import ValidationError
from langchain_genmem.core.nodes import ImportanceScale, MemoryNode, importance_divisor, node_number
from langchain_genmem.llm.calls import Call, ModelCaller
from langchain_genmem.llm.importance import ImportanceScorer
from langchain_genmem.llm.parsers import parse_insights
from langchain_genmem.memory.stream import MemoryStream
from langchain_genmem.reflection.graph import (
    GRAPH_PROMPTS,
    check_model,
    check_stream,
    make_stages,
    prompt_set,
)
from langchain_genmem.reflection.settings import UNSET, ReflectionSettings
from langchain_genmem.reflection.stages import (
    Stages,
    cited_line,
    condense_request,
    write_back,
)
from langchain_genmem.reflection.state import Dropped, Insight, QuestionInsights
from langchain_genmem.reflection.steps import Runner, Step, drop
from langchain_genmem.retrieval.retrievers import GenerativeAgentsRetriever

__all__ = [
    "InsightPair",
    "acondense_insights",
    "agenerate_insight",
    "agenerate_reflection",
    "condense_insights",
    "generate_insight",
    "generate_reflection",
]

logger = logging.getLogger(__name__)

DESIGN_SETTINGS = ReflectionSettings(trigger="window", window=15, threshold=3.0, relevance_min=0.5)
"""The settings of :func:`generate_insight` when none are given: the stepwise design's window
of 15 memories, threshold 3 (on its 0.1-1.0 importance) and ``relevance > 0.5``."""

InsightPair = tuple[str, list[int]]
"""One insight as the design writes it: its text and the numbers of its evidence memories."""


def _log(dropped: Sequence[Dropped]) -> None:
    for record in dropped:
        logger.info("reflection dropped %s", record)


# --- generate_insight ------------------------------------------------------------------------


def _insight_step(
    stages: Stages, force: bool
) -> Step[tuple[list[str], list[QuestionInsights]] | None]:
    """The graph's stages from the trigger to the condensing, one after the other."""
    report, memories = stages.trigger()
    if not (report["due"] or force):
        return None
    questions, dropped = yield from stages.focal_points(memories)
    per_question: list[QuestionInsights] = []
    if questions:
        found = yield from stages.retrieve(questions)
        per_question, lost = yield from stages.insights(found)
        per_question, condensed = yield from stages.condense(per_question)
        dropped += lost + condensed
    _log(dropped)
    return questions, per_question


def _seed_shape(
    done: tuple[list[str], list[QuestionInsights]] | None,
) -> tuple[list[str], list[list[InsightPair]]] | None:
    """Questions, and per question its (insight, evidence node numbers) pairs."""
    if done is None:
        return None
    questions, per_question = done
    by_question = {entry["question"]: entry["insights"] for entry in per_question}
    insights = [
        [(x["text"], [node_number(i) for i in x["evidence"]]) for x in by_question.get(q, [])]
        for q in questions
    ]
    return questions, insights


def _insight_setup(
    arguments: dict[str, Any],
) -> tuple[Runner, Step[tuple[list[str], list[QuestionInsights]] | None]]:
    """The runner and the stages of :func:`generate_insight`, from its arguments."""
    given = _graph_names(arguments)
    stream, model = given.pop("stream"), given.pop("model")
    retriever, prompts = given.pop("retriever"), given.pop("prompts")
    force = bool(given.pop("force"))
    scale = importance_divisor(given.pop("importance_scale"))
    settings = given.pop("settings")
    del given["config"]
    settings = ReflectionSettings.merged(settings or DESIGN_SETTINGS, trigger="window", **given)
    stages = make_stages(model, stream, retriever=retriever, settings=settings,
                         prompts=prompts, scale=scale)
    return Runner(model, stream, None, settings), _insight_step(stages, force)


def generate_insight(
    stream: MemoryStream,
    model: BaseChatModel,
    *,
    settings: ReflectionSettings | None = None,
    context_window: int = UNSET,
    threshold: float | None = UNSET,
    n_questions: int = UNSET,
    relevance_min: float | None = UNSET,
    k: int = UNSET,
    n_insights: int = UNSET,
    max_insights: int = UNSET,
    importance_scale: ImportanceScale = "unit",
    retriever: GenerativeAgentsRetriever | None = None,
    prompts: Mapping[str, str] | None = None,
    force: bool = False,
    config: RunnableConfig | None = None,
) -> tuple[list[str], list[list[InsightPair]]] | None:
    """The design's ``generate_insight``: questions about recent memories, insights per question.

    The design's steps, each a stage of the reflection graph:

    1. the newest ``context_window`` events and thoughts (idle ones and chats never count);
    2. the trigger: None (no model call) when their importance sums to less than
       ``threshold``, on ``importance_scale`` (the design's 0.1-1.0, so ``threshold=3``);
    3. ``n_questions`` high-level questions about them (one call);
    4. per question, the best ``k`` memories whose normalised relevance is above
       ``relevance_min`` (the design's ``relevance > 0.5``); they are marked accessed once;
    5. per question, insights citing those memories (one call each, concurrently);
    6. a question with more than ``max_insights`` insights is condensed (one call).

    Nothing is written: look at the result, edit it, then :func:`generate_reflection`.

    Args:
        stream: the persona's memory stream.
        model: any LangChain chat model.
        settings: the reflection's settings (the trigger is always the window); None for
            :data:`DESIGN_SETTINGS` (window 15, threshold 3, relevance above 0.5). The
            keyword arguments below override its fields.
        context_window: how many recent memories the trigger sums and the questions see
            (``settings.window``).
        threshold: the trigger's threshold on ``importance_scale``; None for the persona's
            ``importance_trigger_max`` (``settings.threshold``).
        n_questions: questions to ask (``settings.n_focal_points``).
        relevance_min: keep only evidence whose relevance is above this; None keeps all.
        k: memories retrieved per question.
        n_insights: insights asked per question.
        max_insights: the most insights kept per question (5 in the design).
        importance_scale: ``"unit"`` (the design's 0.1-1.0) or ``"poignancy"`` (1-10).
        retriever: the retriever (its weights and recency mode); None uses the persona's.
        prompts: overrides of the reflection prompts by name (see
            :data:`~langchain_genmem.reflection.graph.DEFAULT_REFLECTION_PROMPTS`).
        force: go on even if the trigger has not fired.
        config: a runnable config for the model calls (callbacks, tags, concurrency).

    Returns:
        ``(questions, insights_list)`` in the design's shapes (see the module docstring):
        one list of ``(insight, pointers)`` per question, empty when it gave nothing
        usable; or None when the trigger has not fired.

    Raises:
        ValidationError: a bad argument (the message names it).

    Example:
        .. code-block:: python

            found = generate_insight(stream, model, context_window=15, threshold=3)
            if found is not None:
                questions, insights_list = found
    """
    runner, step = _insight_setup(dict(locals()))
    done, _, skipped = runner.run(step, config)
    _log(skipped)
    return _seed_shape(done)


async def agenerate_insight(
    stream: MemoryStream,
    model: BaseChatModel,
    *,
    settings: ReflectionSettings | None = None,
    context_window: int = UNSET,
    threshold: float | None = UNSET,
    n_questions: int = UNSET,
    relevance_min: float | None = UNSET,
    k: int = UNSET,
    n_insights: int = UNSET,
    max_insights: int = UNSET,
    importance_scale: ImportanceScale = "unit",
    retriever: GenerativeAgentsRetriever | None = None,
    prompts: Mapping[str, str] | None = None,
    force: bool = False,
    config: RunnableConfig | None = None,
) -> tuple[list[str], list[list[InsightPair]]] | None:
    """Async :func:`generate_insight`: the same calls and result."""
    runner, step = _insight_setup(dict(locals()))
    done, _, skipped = await runner.arun(step, config)
    _log(skipped)
    return _seed_shape(done)


def _graph_names(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The design's argument names as the graph's (``context_window`` is ``window``...)."""
    renamed = {"context_window": "window", "n_questions": "n_focal_points"}
    return {renamed.get(name, name): value for name, value in settings.items()}


# --- condense_insights -----------------------------------------------------------------------


def _insight_pairs(value: Any, field: str) -> list[InsightPair]:
    """Check one sequence of (text, numbers) pairs, naming the first bad entry."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        msg = f"{field}: expected a list of (insight, [numbers]) pairs, got {value!r:.80}"
        raise ValidationError(msg, field=field)
    return [_insight_pair(pair, f"{field}[{i}]") for i, pair in enumerate(value)]


def _insight_pair(pair: Any, field: str) -> InsightPair:
    ok = isinstance(pair, Sequence) and not isinstance(pair, str) and len(pair) == 2
    text, numbers = pair if ok else (None, None)
    if not isinstance(text, str) or not text.strip():
        msg = f"{field}: expected an (insight, [numbers]) pair with a text, got {pair!r:.80}"
        raise ValidationError(msg, field=field)
    if isinstance(numbers, (str, bytes)) or not isinstance(numbers, Sequence) or any(
        isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in numbers
    ):
        msg = f"{field}: expected the evidence as a list of integers >= 0, got {numbers!r:.80}"
        raise ValidationError(msg, field=field)
    return text.strip(), list(dict.fromkeys(numbers))


def _condense_input(insight_list: Any) -> list[InsightPair]:
    if isinstance(insight_list, str):
        pairs = parse_insights(insight_list)
        if not pairs:
            msg = f"insight_list: no insight found in {insight_list!r:.80}"
            raise ValidationError(msg, field="insight_list")
        return pairs
    pairs = _insight_pairs(insight_list, "insight_list")
    if not pairs:
        raise ValidationError("insight_list: empty, nothing to condense", field="insight_list")
    return pairs


def _condense_call(
    insight_list: Any,
    max_insights: int,
    question: str,
    prompts: Mapping[str, str] | None,
    settings: ReflectionSettings | None,
) -> tuple[list[InsightPair], Call, ReflectionSettings]:
    chosen = ReflectionSettings.merged(settings, max_insights=max_insights)
    pairs = _condense_input(insight_list)
    prompt_pair = prompt_set(prompts, GRAPH_PROMPTS)
    call = condense_request(prompt_pair, "", pairs, chosen.max_insights, question)
    return pairs, call, chosen


def _condensed(text: str, given: Sequence[InsightPair], max_insights: int) -> str:
    """The condensed bullets, numbered from 1, each ending with its citations.

    As the graph's condense stage: a bullet without a citation is dropped, at most
    ``max_insights`` are kept, and an unreadable reply keeps the first insights as given.
    """
    parsed = parse_insights(text)
    _log([drop("condense", "no_evidence", text=t) for t, numbers in parsed if not numbers])
    kept = [(t, numbers) for t, numbers in parsed if numbers] or list(given)
    kept = kept[:max_insights]
    return "\n".join(f"{i}. {cited_line(t, numbers)}" for i, (t, numbers) in enumerate(kept, 1))


def condense_insights(
    insight_list: str | Sequence[tuple[str, Sequence[int]]],
    model: BaseChatModel,
    *,
    settings: ReflectionSettings | None = None,
    max_insights: int = UNSET,
    question: str = "",
    prompts: Mapping[str, str] | None = None,
    config: RunnableConfig | None = None,
) -> str:
    """The stepwise design's ``condense_insights``: at most five numbered bullets, citations kept.

    One call with the design's condense prompts (the graph's ``condense`` and
    ``condense_system``). The insights are sent numbered from 1, each with its numbers in
    square brackets. The reply is read leniently: a bullet without a citation is dropped,
    at most ``max_insights`` are kept, and an unreadable reply gives back the first
    ``max_insights`` insights as they were. Citations are kept as the model gave them.

    Args:
        insight_list: the insights as text ("1. insight [7, 52]" a line) or as
            ``(insight, [numbers])`` pairs (one question's list from :func:`generate_insight`).
        model: any LangChain chat model.
        settings: the call's bounds and output form, and ``max_insights``; None for the
            defaults.
        max_insights: the most bullet points (5 in the design; overrides
            ``settings.max_insights``).
        question: the focal point, for prompts that show ``{question}``.
        prompts: overrides of ``condense`` and ``condense_system``.
        config: a runnable config for the model call.

    Returns:
        The bullets, "1. insight [7, 52, 47]" one a line;
        :func:`~langchain_genmem.llm.parsers.parse_insights` turns them into pairs again.

    Raises:
        ValidationError: no insight given, a bad pair or ``max_insights``.
    """
    check_model(model)
    pairs, call, chosen = _condense_call(insight_list, max_insights, question, prompts, settings)
    [reply] = ModelCaller(model, chosen.limits, chosen.output).batch([call], config)
    return _condensed(reply, pairs, chosen.max_insights)


async def acondense_insights(
    insight_list: str | Sequence[tuple[str, Sequence[int]]],
    model: BaseChatModel,
    *,
    settings: ReflectionSettings | None = None,
    max_insights: int = UNSET,
    question: str = "",
    prompts: Mapping[str, str] | None = None,
    config: RunnableConfig | None = None,
) -> str:
    """Async :func:`condense_insights`: the same call and result."""
    check_model(model)
    pairs, call, chosen = _condense_call(insight_list, max_insights, question, prompts, settings)
    [reply] = await ModelCaller(model, chosen.limits, chosen.output).abatch([call], config)
    return _condensed(reply, pairs, chosen.max_insights)


# --- generate_reflection ---------------------------------------------------------------------


def _groups(insights_list: Any) -> list[list[InsightPair]]:
    """One list of pairs per question; a flat list of pairs is one question."""
    if isinstance(insights_list, (str, bytes)) or not isinstance(insights_list, Sequence):
        msg = (
            "insights_list: expected a list of lists of (insight, [numbers]), "
            f"got {insights_list!r:.80}"
        )
        raise ValidationError(msg, field="insights_list")
    flat = any(isinstance(entry, Sequence) and len(entry) == 2 and isinstance(entry[0], str)
               for entry in insights_list)
    if flat:
        return [_insight_pairs(insights_list, "insights_list")]
    return [_insight_pairs(group, f"insights_list[{i}]") for i, group in enumerate(insights_list)]


def _questions(questions: Any, groups: Sequence[Any]) -> list[str]:
    if questions is None:
        return [""] * len(groups)
    if isinstance(questions, str) or not isinstance(questions, Sequence) or not all(
        isinstance(q, str) for q in questions
    ):
        msg = f"questions: expected a list of texts, got {questions!r:.80}"
        raise ValidationError(msg, field="questions")
    if len(questions) != len(groups):
        msg = f"questions: {len(questions)} given for {len(groups)} lists of insights"
        raise ValidationError(msg, field="questions")
    return list(questions)


def _per_question(
    stream: MemoryStream, insights_list: Any, questions: Any
) -> list[QuestionInsights]:
    """The insights with their pointers mapped to node ids, every pointer checked first."""
    groups = _groups(insights_list)
    asked = _questions(questions, groups)
    per_question: list[QuestionInsights] = []
    for i, (question, group) in enumerate(zip(asked, groups, strict=True)):
        insights: list[Insight] = []
        for j, (text, numbers) in enumerate(group):
            field = f"insights_list[{i}][{j}]"
            if not numbers:
                msg = f"{field}: {text!r:.60} has no pointer; a thought needs evidence"
                raise ValidationError(msg, field=field)
            missing = [n for n in numbers if f"node_{n}" not in stream]
            if missing:
                msg = (
                    f"{field}: pointers {missing} are not memories of {stream.persona!r} "
                    f"(its memories are numbered 1 to {len(stream)})"
                )
                raise ValidationError(msg, field=field)
            evidence = [f"node_{n}" for n in numbers]
            insights.append(
                Insight(text=text, evidence=evidence, cited=numbers, dropped_numbers=[])
            )
        per_question.append(
            QuestionInsights(question=question, retrieved=[], insights=insights, condensed=False)
        )
    return per_question


def _reflection_setup(
    stream: MemoryStream,
    insights_list: Any,
    model: BaseChatModel | None,
    questions: Sequence[str] | None,
    importance: ImportanceScorer | None,
    prompts: Mapping[str, str] | None,
    settings: ReflectionSettings | None,
) -> tuple[Runner, Step[tuple[list[MemoryNode], list[Dropped]]]]:
    check_stream(stream)
    if model is None:
        if not isinstance(stream.importance, ImportanceScorer):
            msg = (
                "model: generate_reflection needs a chat model for the thoughts' triples and "
                "importance; pass model=, or create the stream with "
                "importance=ImportanceScorer(model)"
            )
            raise ValidationError(msg, field="model")
        model, importance = stream.importance.model, importance or stream.importance
    check_model(model)
    chosen = prompt_set(prompts, GRAPH_PROMPTS)
    per_question = _per_question(stream, insights_list, questions)
    runner = Runner(model, stream, importance, ReflectionSettings.merged(settings))
    return runner, write_back(stream, chosen, per_question)


def generate_reflection(
    stream: MemoryStream,
    insights_list: Sequence[Sequence[tuple[str, Sequence[int]]]],
    model: BaseChatModel | None = None,
    *,
    questions: Sequence[str] | None = None,
    importance: ImportanceScorer | None = None,
    prompts: Mapping[str, str] | None = None,
    config: RunnableConfig | None = None,
    settings: ReflectionSettings | None = None,
) -> list[MemoryNode]:
    """The stepwise design's ``generate_reflection``: write the insights as thoughts (reflections).

    The graph's write-back: every pointer becomes the node id of that memory (``7`` is
    ``node_7``); an insight repeated across questions (without case and spacing) is written
    once with the evidence of all; then ONE batched triple call, ONE batched importance call
    and ONE all-or-nothing ``stream.add_many``. Each thought is created at the stream's
    clock, expires 30 days later, takes its keywords from its triple, and has depth 1 + its
    deepest evidence. An unreadable triple falls back to (persona, ``"reflect"``, the
    question, or ``"reflection"`` without ``questions``).

    Every pointer is checked before any call: nothing is written if one is wrong.

    Args:
        stream: the persona's memory stream.
        insights_list: per question, ``(insight, pointers)`` pairs, as
            :func:`generate_insight` returns them (edited or not); a flat list of pairs
            (one question's, or :func:`~langchain_genmem.llm.parsers.parse_insights` of
            :func:`condense_insights`) works too.
        model: the chat model of the triples and importance; None uses the model of the
            stream's importance scorer.
        questions: the questions of ``insights_list``, one per list: the topic of a
            fallback triple, as in the graph.
        importance: the poignancy scorer; None uses the stream's (when ``model`` is None)
            or ``ImportanceScorer(model)``.
        prompts: an override of the ``triples`` prompt.
        config: a runnable config for the model calls.
        settings: the calls' bounds, output form and budget; None for the defaults.

    Returns:
        The thoughts written, in order (the design's ``Reflection`` objects: ``evidence`` are
        the pointers as node ids, ``poignancy`` the importance on 1-10).

    Raises:
        ValidationError: a bad pair, a pointer that is not a memory, an insight without a
            pointer, questions that do not match, or no model to use.
    """
    runner, step = _reflection_setup(stream, insights_list, model, questions, importance, prompts,
                                     settings)
    (nodes, dropped), _, skipped = runner.run(step, config)
    _log(dropped + skipped)
    return nodes


async def agenerate_reflection(
    stream: MemoryStream,
    insights_list: Sequence[Sequence[tuple[str, Sequence[int]]]],
    model: BaseChatModel | None = None,
    *,
    questions: Sequence[str] | None = None,
    importance: ImportanceScorer | None = None,
    prompts: Mapping[str, str] | None = None,
    config: RunnableConfig | None = None,
    settings: ReflectionSettings | None = None,
) -> list[MemoryNode]:
    """Async :func:`generate_reflection`: the same calls and result."""
    runner, step = _reflection_setup(stream, insights_list, model, questions, importance, prompts,
                                     settings)
    (nodes, dropped), _, skipped = await runner.arun(step, config)
    _log(dropped + skipped)
    return nodes
