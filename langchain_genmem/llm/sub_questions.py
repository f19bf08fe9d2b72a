"""A recall that asks a chat model to split its question, then fuses what each part finds.

A question like "which races did she run, and what were her times?" gathers its answer from
turns said weeks apart, and one embedding of the whole question ranks the turns about its
main subject first. :class:`SubQuestionRetriever` wraps a
:class:`~langchain_genmem.GenerativeAgentsRetriever`:

1. The whole question is ranked as the wrapped retriever ranks it, ``pool`` deep (its
   filters, its time in the question, in process or in the database).
2. One bounded model call (:data:`~langchain_genmem.llm.prompts.DEFAULT_SUB_QUESTIONS_PROMPT`,
   structured where the server takes JSON schemas) asks for at most ``max_sub_questions``
   self-contained queries, read leniently
   (:func:`~langchain_genmem.llm.parsers.parse_focal_points`).
3. Each query ranks the same pool only (``node_ids``), so a query never brings in a memory the
   question's filters or named period left out.
4. The rankings are fused by weighted reciprocal rank (:func:`fuse_rankings`): the whole
   question with ``question_weight``, the queries sharing a weight of 1.

A reply with no readable query leaves the whole question's ranking as it is. An unreachable
model raises :class:`~langchain_genmem.core.errors.ChatModelError`, as every model call of
the package does. Access times are recorded, when the wrapped retriever records them, for
the memories returned only.

It is an option, never the default: the measured chat default needs no model, and on the
labelled conversational set no split of a question without a model helped
(``docs/quality.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.messages import HumanMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from pydantic import ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from langchain_genmem.core import validation
from langchain_genmem.llm.calls import Call, ModelCaller
from langchain_genmem.llm.limits import CallLimits, OutputForm
from langchain_genmem.llm.parsers import parse_focal_points, text_key
from langchain_genmem.llm.prompts import (
    DEFAULT_SUB_QUESTIONS_PROMPT,
    STRUCTURED_SUB_QUESTIONS_PROMPT,
)
from langchain_genmem.llm.shapes import questions_shape
from langchain_genmem.retrieval.retrievers import GenerativeAgentsRetriever

__all__ = [
    "MAX_SUB_QUESTIONS",
    "RRF_K",
    "SubQuestionRetriever",
    "fuse_rankings",
    "read_sub_questions",
    "sub_questions_call",
]

MAX_SUB_QUESTIONS = 3
"""The most queries one question is split into, by default."""

RRF_K = 60
"""The rank offset of reciprocal-rank fusion (the usual 60): a memory at rank ``r`` (from 0)
of a ranking adds ``weight / (RRF_K + r + 1)``."""


def sub_questions_call(question: str, n: int) -> Call:
    """The model call that splits ``question`` into at most ``n`` queries (both forms)."""
    fields = {"question": question, "n": n}
    return Call(
        [HumanMessage(DEFAULT_SUB_QUESTIONS_PROMPT.format(**fields))],
        "questions",
        shape=questions_shape(n),
        structured=[HumanMessage(STRUCTURED_SUB_QUESTIONS_PROMPT.format(**fields))],
    )


def read_sub_questions(reply: str, question: str, n: int) -> list[str]:
    """The queries of a reply: at most ``n``, none repeating the question itself.

    Args:
        reply: the model's reply (text form, or the structured form read back as text).
        question: the question that was split.
        n: the most queries kept.

    Returns:
        The queries in reply order; empty when none is readable.
    """
    same = text_key(question)
    return [q for q in parse_focal_points(reply) if text_key(q) != same][: max(n, 0)]


def fuse_rankings(rankings: Sequence[Sequence[str]], weights: Sequence[float]) -> list[str]:
    """Weighted reciprocal-rank fusion of rankings of ids.

    Args:
        rankings: each a list of ids, best first.
        weights: one weight per ranking.

    Returns:
        Every id that appears, by fused score, best first; ties keep the order of first
        appearance (the first ranking's order first).
    """
    scores: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for place, key in enumerate(ranking):
            scores[key] = scores.get(key, 0.0) + weight / (RRF_K + place + 1)
    order = {key: i for i, key in enumerate(scores)}
    return sorted(scores, key=lambda key: (-scores[key], order[key]))


class SubQuestionRetriever(BaseRetriever):
    """Recall for questions whose answer is spread over many memories (module docstring).

    Example:
        .. code-block:: python

            from langchain_genmem import GenerativeAgentsRetriever
            from langchain_genmem.agent import CHAT_RETRIEVAL
            from langchain_genmem.llm.sub_questions import SubQuestionRetriever

            recall = SubQuestionRetriever(
                retriever=GenerativeAgentsRetriever(stream=stream, k=10, **CHAT_RETRIEVAL),
                llm=chat_model,
            )
            docs = recall.invoke("Which races did Maya run, and what were her times?")
            docs[0].metadata["sub_questions"]

    Attributes:
        retriever: the retriever that ranks the question and each query.
        llm: the chat model that splits the question.
        max_sub_questions: the most queries asked for.
        pool: how deep the whole question is ranked; the queries reorder this pool.
        question_weight: the whole question's weight in the fusion (the queries share 1).
        limits: the bounds of the call (None: the defaults).
        output: ``"auto"``, ``"structured"`` or ``"text"``.
        k: how many documents; None: the wrapped retriever's ``k``.

    Each Document is the wrapped retriever's for the whole question, with ``rank`` its fused
    place and ``sub_questions`` the queries read (empty: the question's own ranking).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    retriever: GenerativeAgentsRetriever
    llm: Any
    max_sub_questions: int = Field(MAX_SUB_QUESTIONS, ge=1, le=8)
    pool: int = Field(100, ge=1, le=1000)
    question_weight: float = Field(1.0, ge=0.0, le=10.0, allow_inf_nan=False)
    limits: CallLimits | None = None
    output: OutputForm = "auto"
    k: int | None = Field(None, ge=1)

    def __init__(self, **data: Any) -> None:
        """Build the retriever; an unknown or bad argument raises a ValidationError naming it."""
        validation.known_arguments(data, set(type(self).model_fields), type(self).__name__)
        try:
            super().__init__(**data)
        except PydanticValidationError as e:
            raise validation.from_pydantic(e, type(self).__name__) from None

    def _caller(self) -> ModelCaller:
        return ModelCaller(self.llm, self.limits, self.output)

    def _quiet(self) -> GenerativeAgentsRetriever:
        """The wrapped retriever, recording no access (the pool and the queries)."""
        return self.retriever.model_copy(update={"update_access": False})

    def _depth(self, k: int | None) -> tuple[int, int]:
        want = k or self.k or self.retriever.k
        return want, max(want, self.pool)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None, **filters: Any,
    ) -> list[Document]:
        want, depth = self._depth(k)
        quiet = self._quiet()
        pool = quiet.invoke(query, k=depth, **filters)
        config: RunnableConfig = {"callbacks": run_manager.get_child()}
        reply = self._caller().batch([sub_questions_call(query, self.max_sub_questions)], config)
        parts = read_sub_questions(reply[0], query, self.max_sub_questions)
        ids = _ids(pool)
        rankings = [quiet.invoke(part, k=len(ids), **{**filters, "node_ids": ids})
                    for part in parts] if ids else []
        chosen = self._chosen(pool, rankings, parts, want)
        if self.retriever.update_access and chosen:
            self.retriever.invoke(query, k=len(chosen), **{**filters, "node_ids": _ids(chosen)})
        return chosen

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None, **filters: Any,
    ) -> list[Document]:
        want, depth = self._depth(k)
        quiet = self._quiet()
        pool = await quiet.ainvoke(query, k=depth, **filters)
        config: RunnableConfig = {"callbacks": run_manager.get_child()}
        reply = await self._caller().abatch(
            [sub_questions_call(query, self.max_sub_questions)], config)
        parts = read_sub_questions(reply[0], query, self.max_sub_questions)
        ids = _ids(pool)
        rankings = [await quiet.ainvoke(part, k=len(ids), **{**filters, "node_ids": ids})
                    for part in parts] if ids else []
        chosen = self._chosen(pool, rankings, parts, want)
        if self.retriever.update_access and chosen:
            await self.retriever.ainvoke(
                query, k=len(chosen), **{**filters, "node_ids": _ids(chosen)})
        return chosen

    def _chosen(
        self, pool: list[Document], rankings: Sequence[list[Document]], parts: list[str],
        k: int,
    ) -> list[Document]:
        """The pool's documents in fused order, the first ``k``, their metadata updated."""
        share = 1.0 / len(rankings) if rankings else 0.0
        fused = fuse_rankings([_ids(pool), *map(_ids, rankings)],
                              [self.question_weight, *[share] * len(rankings)])
        by_id = {d.metadata["node_id"]: d for d in pool}
        chosen = [by_id[key] for key in fused if key in by_id][:k]
        for place, doc in enumerate(chosen):
            doc.metadata.update(rank=place, sub_questions=list(parts))
        return chosen


def _ids(docs: Sequence[Document]) -> list[str]:
    return [d.metadata["node_id"] for d in docs]
