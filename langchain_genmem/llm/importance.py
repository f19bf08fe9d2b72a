"""Poignancy (importance) of memories, rated by any LangChain chat model.

The original Generative Agents code asks the model once per memory. :class:`ImportanceScorer`
asks once per batch of memories instead, and falls back to the original one-memory prompt
only for what a batched reply left unreadable.

A memory the model gave no rating for, even asked alone, is either an error
(``strict=True``, the default: :class:`~langchain_genmem.core.errors.ParseError`) or gets
:data:`~langchain_genmem.llm.limits.FALLBACK_IMPORTANCE` with an :class:`UnratedWarning`
naming it (``strict=False``, what the chat agent and reflection use). Callers that store
such a memory list its id with :func:`mark_unrated`; :func:`unrated_ids` finds them again,
to rate them later.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from langchain_genmem.core.errors import ParseError, ValidationError
from langchain_genmem.core.nodes import NODE_TYPES
from langchain_genmem.core.validation import integer
from langchain_genmem.llm.calls import Call, ModelCaller, OutputForm, reply_text
from langchain_genmem.llm.limits import FALLBACK_IMPORTANCE, CallLimits
from langchain_genmem.llm.parsers import format_numbered, parse_rating, parse_ratings
from langchain_genmem.llm.prompts import (
    DEFAULT_BATCH_IMPORTANCE_PROMPT,
    DEFAULT_IMPORTANCE_PROMPTS,
    DEFAULT_IMPORTANCE_SYSTEM_PROMPT,
    STRUCTURED_BATCH_IMPORTANCE_PROMPT,
    STRUCTURED_IMPORTANCE_PROMPTS,
)
from langchain_genmem.llm.shapes import rating_shape, ratings_shape

__all__ = [
    "IDLE_MARKER",
    "UNRATED_KEY",
    "ImportanceScorer",
    "UnratedWarning",
    "add_rated",
    "arate_with",
    "mark_unrated",
    "rate_with",
    "rated_items",
    "reply_text",
    "unrated_ids",
    "with_fallback",
]

UNRATED_KEY = "genmem_unrated"
"""The key of the persona's state (``state.extra``) listing the ids of memories stored with
the fallback importance. It is stored with the state (Chroma, PostgreSQL) and written to a
Smallville ``scratch.json`` like the other extra values, which the original ignores."""


class UnratedWarning(UserWarning):
    """The model gave no rating for a memory: it got the fallback importance."""

IDLE_MARKER = "is idle"
"""An event whose description holds this text scores 1 without a call (as in the original)."""

IDLE_SCORE = 1.0


class _Scoring:
    """One ``rate_many`` job, advanced round by round; it never calls a model itself.

    Round one asks for every batch of pending items; each later round re-asks, one at a
    time, the items a batched reply left unreadable. A group of one item always uses the
    per-type prompt; a reply without a number for it leaves that item unrated (its reply is
    kept in ``failed``). ``max_calls`` bounds the calls: items left when it is spent stay
    unrated.
    """

    def __init__(
        self,
        scorer: ImportanceScorer,
        persona: str,
        items: Sequence[tuple[str, str]],
        max_calls: int | None = None,
    ) -> None:
        self.scorer = scorer
        self.persona = persona
        self.items = [_check_item(index, item) for index, item in enumerate(items)]
        self.scores: list[float | None] = [
            IDLE_SCORE if kind == "event" and IDLE_MARKER in text else None
            for kind, text in self.items
        ]
        self.failed: dict[int, str] = {}
        self.left = max_calls
        pending = [index for index, score in enumerate(self.scores) if score is None]
        size = scorer.batch_size
        self.groups = [pending[start : start + size] for start in range(0, len(pending), size)]

    def requests(self) -> list[Call]:
        """Return this round's calls, counted on the scorer (none: done)."""
        if self.left is not None:
            for group in self.groups[max(self.left, 0) :]:
                self.failed.update(dict.fromkeys(group, ""))
            self.groups = self.groups[: max(self.left, 0)]
            self.left -= len(self.groups)
        self.scorer.calls += len(self.groups)
        return [self._call(group) for group in self.groups]

    def _call(self, group: list[int]) -> Call:
        scorer = self.scorer
        fields: dict[str, object] = {"persona": self.persona,
                                     "persona_description": scorer.persona_description}
        if len(group) == 1:
            kind, text = self.items[group[0]]
            text_prompt, structured = (p[kind].format(description=text, **fields)
                                       for p in (scorer.prompts, scorer.structured_prompts))
            return Call(scorer.messages(text_prompt), "rating", shape=rating_shape(),
                        structured=scorer.messages(structured))
        marked = [f"[{self.items[index][0]}] {self.items[index][1]}" for index in group]
        fields |= {"n": len(group), "memories": format_numbered(marked, start=1)}
        return Call(
            scorer.messages(scorer.batch_prompt.format(**fields)), "ratings", len(group),
            shape=ratings_shape(len(group)),
            structured=scorer.messages(scorer.structured_batch_prompt.format(**fields)),
        )

    def accept(self, replies: Sequence[str]) -> None:
        """Read this round's reply texts, in the order of :meth:`requests`."""
        retry: list[list[int]] = []
        for group, text in zip(self.groups, replies, strict=False):
            if len(group) == 1:
                try:
                    self.scores[group[0]] = float(parse_rating(text))
                except ParseError:
                    self.failed[group[0]] = text
                continue
            for index, rating in zip(group, parse_ratings(text, len(group)), strict=False):
                if rating is None:
                    retry.append([index])
                else:
                    self.scores[index] = float(rating)
        self.groups = retry

    def error(self, index: int) -> ParseError:
        """The ParseError of an unrated item (strict mode)."""
        kind, description = self.items[index]
        msg = (
            f"items[{index}]: the model gave no rating from 1 to 10 for the {kind} "
            f"{_shown(description)!r}; check the model or the importance prompt"
        )
        return ParseError(msg, reply=self.failed.get(index, ""))


def _shown(description: str) -> str:
    return description if len(description) <= 80 else description[:80] + "…"


def _check_item(index: int, item: tuple[str, str]) -> tuple[str, str]:
    if (
        not isinstance(item, (tuple, list))
        or len(item) != 2
        or item[0] not in NODE_TYPES
        or not isinstance(item[1], str)
    ):
        msg = (
            f"items[{index}]: expected a (node type, description) pair with a type among "
            f"{', '.join(NODE_TYPES)}, got {item!r}"
        )
        raise ValidationError(msg, field="items")
    return (item[0], item[1])


class ImportanceScorer:
    """Rates the poignancy of memories, 1 (mundane) to 10 (poignant), with a chat model.

    Batching: the memories to rate are sent ``batch_size`` at a time in ONE call with the
    batched prompt, which lists them numbered from 1, each marked with its type, and asks
    for one "N. rating" line each. An item that the reply leaves unreadable is then asked
    alone with the per-type prompt of the original Generative Agents code (one call each);
    a batch of one item uses the per-type prompt directly. Events whose description
    contains "is idle" score 1 with no call, as in the original.

    Every call sends a system message (the stepwise design's importance prompt) and a human message.
    The batches of a round go through the model's ``batch``/``abatch``, so they run
    concurrently; pass ``config={"max_concurrency": 1}`` to send them one by one in order.

    Ratings follow :func:`langchain_genmem.llm.parsers.parse_rating`: denominators honoured,
    decimals rounded half up, other numbers clamped to 1..10; a reply that names no single
    rating (one that only repeats the scale) is no rating.

    Calls go through :class:`~langchain_genmem.llm.calls.ModelCaller`: bounded by
    ``limits`` (one rating, or a batch of ratings per memory) and, with ``output="auto"``
    on a server that takes JSON schemas, asked for ``{"rating": N}`` / ``{"ratings":
    [...]}`` with the ``STRUCTURED_*`` twins of the prompts.

    Unrated memories: with ``strict=True`` (the default) :meth:`score_many` raises
    ParseError for a memory the model gave no rating for, even asked alone; with
    ``strict=False`` it returns :data:`~langchain_genmem.llm.limits.FALLBACK_IMPORTANCE`
    for it and warns (:class:`UnratedWarning`, naming the memory). :meth:`rate_many`
    returns None for it, whatever ``strict``.

    Example:
        .. code-block:: python

            from langchain_openai import ChatOpenAI
            from langchain_genmem.llm.importance import ImportanceScorer

            scorer = ImportanceScorer(ChatOpenAI(model="gpt-4o-mini"))
            scorer.score_many("Maria Lopez", [("event", "Maria Lopez is idle"),
                                              ("chat", "Maria: I got the scholarship!")])
            # -> [1.0, 8.0]; scorer.calls == 1 (the idle event needs no call)

    Attributes:
        model: the chat model.
        prompts: the per-type prompts, keyed by node type (``"event"``, ``"thought"``,
            ``"chat"``); fields ``{persona}``, ``{persona_description}``, ``{description}``.
        batch_prompt: the batched prompt; fields ``{persona}``, ``{persona_description}``,
            ``{n}``, ``{memories}``.
        system_prompt: the system message of every call.
        batch_size: the most memories per batched call.
        persona_description: a few sentences about the persona, shown in every prompt.
        strict: raise ParseError for an unrated memory (else the fallback importance).
        caller: how calls are sent (bounds, output form).
        calls: the number of model calls made so far by this scorer.
    """

    def __init__(
        self,
        model: BaseChatModel,
        *,
        prompts: Mapping[str, str] | None = None,
        batch_prompt: str | None = None,
        batch_size: int = 20,
        persona_description: str = "",
        system_prompt: str | None = None,
        limits: CallLimits | None = None,
        output: OutputForm = "auto",
        strict: bool = True,
    ) -> None:
        """Create a scorer.

        Args:
            model: any LangChain chat model.
            prompts: per-type prompts replacing the defaults of
                :mod:`langchain_genmem.llm.prompts` for the types given.
            batch_prompt: the batched prompt; None for the default.
            batch_size: the most memories per call, at least 1 (1 turns batching off).
            persona_description: a few sentences about the persona (may be empty).
            system_prompt: the system message; None for the stepwise design's importance prompt.
            limits: the bounds of its calls; None for the defaults.
            output: ``"auto"``, ``"structured"`` or ``"text"`` (see
                :data:`~langchain_genmem.llm.calls.OutputForm`).
            strict: raise ParseError for a memory left unrated (False: fallback importance).

        Raises:
            ValidationError: an unknown node type in ``prompts`` or a batch size below 1.
        """
        unknown = sorted(set(prompts or {}) - set(NODE_TYPES))
        if unknown:
            msg = f"prompts: unknown node types {unknown}; expected some of {list(NODE_TYPES)}"
            raise ValidationError(msg, field="prompts")
        integer(batch_size, "batch_size", 1)
        self.model = model
        self.prompts: dict[str, str] = {**DEFAULT_IMPORTANCE_PROMPTS, **(prompts or {})}
        self.structured_prompts = {**STRUCTURED_IMPORTANCE_PROMPTS, **(prompts or {})}
        self.batch_prompt = batch_prompt or DEFAULT_BATCH_IMPORTANCE_PROMPT
        self.structured_batch_prompt = batch_prompt or STRUCTURED_BATCH_IMPORTANCE_PROMPT
        self.system_prompt = system_prompt or DEFAULT_IMPORTANCE_SYSTEM_PROMPT
        self.batch_size = batch_size
        self.persona_description = persona_description
        self.strict = strict
        self.caller = ModelCaller(model, limits, output)
        self.calls = 0

    def messages(self, prompt: str) -> list[BaseMessage]:
        """The messages of one call: the system prompt and ``prompt``."""
        return [SystemMessage(self.system_prompt), HumanMessage(prompt)]

    def rate_many(
        self,
        persona: str,
        items: Sequence[tuple[str, str]],
        *,
        config: RunnableConfig | None = None,
        max_calls: int | None = None,
    ) -> list[float | None]:
        """Rate several memories; None for one the model gave no rating for.

        Args:
            persona: the persona's name.
            items: (node type, description) pairs.
            config: a runnable config for the calls.
            max_calls: the most calls to make; items left when they are spent stay None.

        Returns:
            One rating (1 to 10) or None per item, in item order.

        Raises:
            ValidationError: an item is not a (known type, text) pair.
        """
        job = _Scoring(self, persona, items, max_calls)
        while calls := job.requests():
            job.accept(self.caller.batch(calls, config))
        return job.scores

    async def arate_many(
        self,
        persona: str,
        items: Sequence[tuple[str, str]],
        *,
        config: RunnableConfig | None = None,
        max_calls: int | None = None,
    ) -> list[float | None]:
        """Async :meth:`rate_many`: the same calls and result."""
        job = _Scoring(self, persona, items, max_calls)
        while calls := job.requests():
            job.accept(await self.caller.abatch(calls, config))
        return job.scores

    def _finish(self, job: _Scoring) -> list[float]:
        if self.strict:
            for index, score in enumerate(job.scores):
                if score is None:
                    raise job.error(index)
        return with_fallback(job.scores, job.items)

    def score_many(
        self,
        persona: str,
        items: Sequence[tuple[str, str]],
        *,
        config: RunnableConfig | None = None,
    ) -> list[float]:
        """Rate several memories of one persona.

        Args:
            persona: the persona's name.
            items: (node type, description) pairs; the type is ``"event"``,
                ``"thought"`` or ``"chat"``.
            config: a runnable config passed to the model's ``batch`` (callbacks, tags,
                ``max_concurrency``).

        Returns:
            One rating per item, in item order, as floats from 1 to 10 (not strict: the
            fallback importance for an unrated item).

        Raises:
            ValidationError: an item is not a (known type, text) pair.
            ParseError: strict, and the model gave no number for an item asked alone.
        """
        job = _Scoring(self, persona, items)
        while calls := job.requests():
            job.accept(self.caller.batch(calls, config))
        return self._finish(job)

    async def ascore_many(
        self,
        persona: str,
        items: Sequence[tuple[str, str]],
        *,
        config: RunnableConfig | None = None,
    ) -> list[float]:
        """Async :meth:`score_many`: the same requests and results, through ``abatch``."""
        job = _Scoring(self, persona, items)
        while calls := job.requests():
            job.accept(await self.caller.abatch(calls, config))
        return self._finish(job)

    def score(self, persona: str, node_type: str, description: str) -> float:
        """Rate one memory with the per-type prompt (an idle event scores 1 with no call).

        Args:
            persona: the persona's name.
            node_type: ``"event"``, ``"thought"`` or ``"chat"``.
            description: the memory.

        Returns:
            The rating, from 1 to 10.
        """
        return self.score_many(persona, [(node_type, description)])[0]

    async def ascore(self, persona: str, node_type: str, description: str) -> float:
        """Async :meth:`score`."""
        return (await self.ascore_many(persona, [(node_type, description)]))[0]


def with_fallback(
    ratings: Sequence[float | None], items: Sequence[tuple[str, str]]
) -> list[float]:
    """The ratings with :data:`FALLBACK_IMPORTANCE` for each None, warning once per memory.

    Args:
        ratings: what :meth:`ImportanceScorer.rate_many` returned.
        items: the (node type, description) pairs rated.

    Returns:
        One rating per item.
    """
    out: list[float] = []
    for rating, (kind, description) in zip(ratings, items, strict=True):
        if rating is None:
            msg = (
                f"the model gave no rating for the {kind} {_shown(description)!r}; it gets "
                f"the fallback importance {FALLBACK_IMPORTANCE} and is listed as unrated"
            )
            warnings.warn(msg, UnratedWarning, stacklevel=3)
        out.append(FALLBACK_IMPORTANCE if rating is None else rating)
    return out


def rate_with(
    scorer: Any,
    persona: str,
    items: Sequence[tuple[str, str]],
    *,
    config: RunnableConfig | None = None,
    max_calls: int | None = None,
) -> list[float | None]:
    """Ratings from any scorer: None for a memory it could not rate, never an exception.

    An :class:`ImportanceScorer` rates with :meth:`ImportanceScorer.rate_many`; another
    scorer (anything with ``score_many``, as a stream takes) rates all or nothing: its
    ParseError leaves every memory unrated.

    Args:
        scorer: the scorer.
        persona: the persona's name.
        items: (node type, description) pairs.
        config: a runnable config for the calls (ImportanceScorer only).
        max_calls: the most calls to make (ImportanceScorer only).

    Returns:
        One rating or None per item.
    """
    if isinstance(scorer, ImportanceScorer):
        return scorer.rate_many(persona, items, config=config, max_calls=max_calls)
    try:
        return list(scorer.score_many(persona, items))
    except ParseError:
        return [None] * len(items)


async def arate_with(
    scorer: Any,
    persona: str,
    items: Sequence[tuple[str, str]],
    *,
    config: RunnableConfig | None = None,
    max_calls: int | None = None,
) -> list[float | None]:
    """Async :func:`rate_with`."""
    if isinstance(scorer, ImportanceScorer):
        return await scorer.arate_many(persona, items, config=config, max_calls=max_calls)
    try:
        return list(await scorer.ascore_many(persona, items))
    except ParseError:
        return [None] * len(items)


def add_rated(
    stream: Any,
    scorer: Any,
    items: Sequence[Mapping[str, Any]],
    *,
    config: RunnableConfig | None = None,
) -> list[Any]:
    """Add memories, the scorer rating those given without poignancy; never fails to rate.

    A memory the model gives no rating for (even asked alone) is stored with
    :data:`FALLBACK_IMPORTANCE`, an :class:`UnratedWarning` names it, and its id goes to the
    persona's unrated list (:func:`unrated_ids`), whatever the scorer's ``strict``.

    Args:
        stream: the persona's :class:`~langchain_genmem.MemoryStream`.
        scorer: the importance scorer (or any object with ``score_many``).
        items: memories as :meth:`~langchain_genmem.MemoryStream.add_many` takes them.
        config: a runnable config for the rating calls.

    Returns:
        The nodes written, in item order.
    """
    filled, unrated = rated_items(scorer, stream.persona, items, config=config)
    nodes = stream.add_many(filled)
    mark_unrated(stream, [nodes[i].node_id for i in unrated])
    return nodes


def rated_items(
    scorer: Any,
    persona: str,
    items: Sequence[Mapping[str, Any]],
    *,
    config: RunnableConfig | None = None,
) -> tuple[list[dict[str, Any]], list[int]]:
    """The items, those without poignancy rated by the scorer (the fallback where it gives none).

    Args:
        scorer: the importance scorer (or any object with ``score_many``).
        persona: whose memories they are (named in the rating prompt).
        items: memories with ``type`` and ``description``.
        config: a runnable config for the rating calls.

    Returns:
        Copies of the items with a poignancy each, and the positions of those that got
        :data:`FALLBACK_IMPORTANCE` because the model gave no rating.
    """
    wanted = [i for i, item in enumerate(items) if item.get("poignancy") is None]
    # as given, unchecked (None when missing): the scorer refuses a bad pair, naming it
    pairs: list[tuple[Any, Any]] = [(items[i].get("type"), items[i].get("description"))
                                    for i in wanted]
    ratings = rate_with(scorer, persona, pairs, config=config) if pairs else []
    filled = [dict(item) for item in items]
    for i, score in zip(wanted, with_fallback(ratings, pairs), strict=True):
        filled[i]["poignancy"] = score
    return filled, [i for i, r in zip(wanted, ratings, strict=True) if r is None]


def mark_unrated(stream: Any, node_ids: Sequence[str]) -> None:
    """List memories stored with the fallback importance in the persona's state.

    Args:
        stream: the persona's :class:`~langchain_genmem.MemoryStream`.
        node_ids: the ids of the memories (nothing is written for none).
    """
    if node_ids:
        known = unrated_ids(stream)
        stream.set_extra(**{UNRATED_KEY: [*known, *(i for i in node_ids if i not in known)]})


def unrated_ids(stream: Any) -> list[str]:
    """The ids of the persona's memories stored with the fallback importance, oldest first.

    Args:
        stream: the persona's :class:`~langchain_genmem.MemoryStream`.

    Returns:
        Node ids (``stream.get(node_id)`` gives each memory).
    """
    listed = stream.state.extra.get(UNRATED_KEY) or []
    return [i for i in listed if isinstance(i, str)]
