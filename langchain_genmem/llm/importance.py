"""Poignancy (importance) of memories, rated by any LangChain chat model.

The original Generative Agents code asks the model once per memory. :class:`ImportanceScorer`
asks once per batch of memories instead, and falls back to the original one-memory prompt
only for what a batched reply left unreadable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from langchain_genmem.core.errors import ParseError, ValidationError
from langchain_genmem.core.nodes import NODE_TYPES
from langchain_genmem.core.text import clean_text
from langchain_genmem.llm.parsers import format_numbered, parse_rating, parse_ratings
from langchain_genmem.llm.prompts import (
    DEFAULT_BATCH_IMPORTANCE_PROMPT,
    DEFAULT_IMPORTANCE_PROMPTS,
    DEFAULT_IMPORTANCE_SYSTEM_PROMPT,
)

__all__ = ["IDLE_MARKER", "ImportanceScorer", "reply_text"]

IDLE_MARKER = "is idle"
"""An event whose description holds this text scores 1 without a call (as in the original)."""

IDLE_SCORE = 1.0


def reply_text(message: BaseMessage) -> str:
    """Return the text of a model reply, whether its content is a string or a block list.

    The text is cleaned (:func:`~langchain_genmem.core.text.clean_text`: lone surrogates
    replaced, NUL removed), so what a caller keeps of a reply (in records, in state that a
    checkpointer serialises) is valid Unicode.

    Args:
        message: the model's reply.

    Returns:
        The text parts of the reply, joined.
    """
    content = message.content
    if isinstance(content, str):
        return clean_text(content)
    return clean_text(
        "".join(
            part if isinstance(part, str) else str(part.get("text", ""))
            for part in content
            if isinstance(part, str) or part.get("type") == "text"
        )
    )


class _Scoring:
    """One ``score_many`` job, advanced round by round; it never calls a model itself.

    Round one asks for every batch of pending items; each later round re-asks, one at a
    time, the items a batched reply left unreadable. A group of one item always uses the
    per-type prompt, and a reply without a number for it raises ``ParseError``.
    """

    def __init__(
        self, scorer: ImportanceScorer, persona: str, items: Sequence[tuple[str, str]]
    ) -> None:
        self.scorer = scorer
        self.persona = persona
        self.items = [_check_item(index, item) for index, item in enumerate(items)]
        self.scores: list[float | None] = [
            IDLE_SCORE if kind == "event" and IDLE_MARKER in text else None
            for kind, text in self.items
        ]
        pending = [index for index, score in enumerate(self.scores) if score is None]
        size = scorer.batch_size
        self.groups = [pending[start : start + size] for start in range(0, len(pending), size)]

    def requests(self) -> list[list[BaseMessage]]:
        """Return the messages of this round's calls, counted on the scorer (none: done)."""
        self.scorer.calls += len(self.groups)
        return [self._messages(group) for group in self.groups]

    def _messages(self, group: list[int]) -> list[BaseMessage]:
        scorer = self.scorer
        fields = {"persona": self.persona, "persona_description": scorer.persona_description}
        if len(group) == 1:
            kind, text = self.items[group[0]]
            prompt = scorer.prompts[kind].format(description=text, **fields)
        else:
            marked = [f"[{self.items[index][0]}] {self.items[index][1]}" for index in group]
            memories = format_numbered(marked, start=1)
            prompt = scorer.batch_prompt.format(n=len(group), memories=memories, **fields)
        return [SystemMessage(scorer.system_prompt), HumanMessage(prompt)]

    def accept(self, replies: Sequence[BaseMessage]) -> None:
        """Read this round's replies, in the order of :meth:`requests`."""
        retry: list[list[int]] = []
        for group, reply in zip(self.groups, replies, strict=False):
            text = reply_text(reply)
            if len(group) == 1:
                self.scores[group[0]] = float(self._read_one(group[0], text))
                continue
            for index, rating in zip(group, parse_ratings(text, len(group)), strict=False):
                if rating is None:
                    retry.append([index])
                else:
                    self.scores[index] = float(rating)
        self.groups = retry

    def _read_one(self, index: int, text: str) -> int:
        try:
            return parse_rating(text)
        except ParseError as error:
            kind, description = self.items[index]
            shown = description if len(description) <= 80 else description[:80] + "…"
            msg = (
                f"items[{index}]: the model gave no rating from 1 to 10 for the {kind} "
                f"{shown!r}; check the model or the importance prompt"
            )
            raise ParseError(msg, reply=text) from error

    def result(self) -> list[float]:
        """Return the ratings once no request is left (every item is rated by then)."""
        return cast("list[float]", self.scores)


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
    decimals rounded half up, other numbers clamped to 1..10.

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

        Raises:
            ValidationError: an unknown node type in ``prompts`` or a batch size below 1.
        """
        unknown = sorted(set(prompts or {}) - set(NODE_TYPES))
        if unknown:
            msg = f"prompts: unknown node types {unknown}; expected some of {list(NODE_TYPES)}"
            raise ValidationError(msg, field="prompts")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            msg = f"batch_size: expected an integer >= 1, got {batch_size!r}"
            raise ValidationError(msg, field="batch_size")
        self.model = model
        self.prompts: dict[str, str] = {**DEFAULT_IMPORTANCE_PROMPTS, **(prompts or {})}
        self.batch_prompt = batch_prompt or DEFAULT_BATCH_IMPORTANCE_PROMPT
        self.system_prompt = system_prompt or DEFAULT_IMPORTANCE_SYSTEM_PROMPT
        self.batch_size = batch_size
        self.persona_description = persona_description
        self.calls = 0

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
            One rating per item, in item order, as floats from 1 to 10.

        Raises:
            ValidationError: an item is not a (known type, text) pair.
            ParseError: the model gave no number for an item asked alone.
        """
        job = _Scoring(self, persona, items)
        while requests := job.requests():
            job.accept(self.model.batch(requests, config))
        return job.result()

    async def ascore_many(
        self,
        persona: str,
        items: Sequence[tuple[str, str]],
        *,
        config: RunnableConfig | None = None,
    ) -> list[float]:
        """Async :meth:`score_many`: the same requests and results, through ``abatch``."""
        job = _Scoring(self, persona, items)
        while requests := job.requests():
            job.accept(await self.model.abatch(requests, config))
        return job.result()

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
