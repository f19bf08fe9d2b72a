"""State of the reflection graph: what goes in, what flows between the stages, what comes out.

The graph of :func:`~langchain_genmem.reflection.graph.create_reflection_graph` takes a
:class:`ReflectionInput`, returns a :class:`ReflectionOutput` and keeps a
:class:`ReflectionState` between its nodes. Every key of the output is set by every run
(``check_trigger`` resets them all first), so a checkpointed thread never shows the values of
an earlier run.

What a run dropped, and why, is listed in ``dropped`` as :class:`Dropped` records. Their
``reason`` is one of:

* ``"no_memories"``: there was no memory to ask questions about (focal points stage).
* ``"unreadable_reply"``: the reply held nothing readable; ``text`` is its start.
* ``"over_max"``: a question or an insight beyond ``n_focal_points`` or ``max_insights``.
* ``"no_retrieved"``: retrieval found no memory for a question; it was not asked.
* ``"evidence_out_of_range"``: ``numbers`` were cited but not shown in the prompt; they
  are dropped alone, the insight is kept when other numbers are valid.
* ``"no_evidence"``: an insight with no valid evidence number; it is not written.
* ``"duplicate"``: an insight already given for an earlier question (compared without case
  and spacing); it is written once, with the evidence of both.
* ``"triple_fallback"``: the model's (subject, predicate, object) for ``text`` was
  unreadable; the fallback triple was written instead (the thought itself was written).
* ``"rating_fallback"``: the importance scorer found no rating for the thought ``text``,
  even asking it alone; it got the fallback poignancy (4, the original's fail-safe) and is
  listed as unrated (:func:`~langchain_genmem.llm.importance.unrated_ids`).
* ``"budget_spent"``: the run's budget of model calls (``ReflectionSettings.max_calls``) was
  spent; ``numbers`` holds how many calls (or ratings) of that stage were skipped.

The output's ``reasons`` says the same in words, one line per record
(:func:`~langchain_genmem.reflection.reasons.reasons`).
"""

from __future__ import annotations

import operator
from typing import Annotated, Literal

from typing_extensions import NotRequired, TypedDict

__all__ = [
    "Dropped",
    "Insight",
    "QuestionInsights",
    "QuestionTask",
    "ReflectionInput",
    "ReflectionOutput",
    "ReflectionState",
    "ReflectionStatus",
    "Retrieved",
    "TriggerPolicy",
    "TriggerReport",
]

TriggerPolicy = Literal["counters", "window"]

ReflectionStatus = Literal["running", "not_due", "no_questions", "no_insights", "reflected"]
"""``running`` while a run is under way; then ``not_due`` (the trigger had not fired),
``no_questions`` (no usable focal point: nothing written, trigger left as is),
``no_insights`` (questions asked, nothing usable came back: nothing written, trigger reset)
or ``reflected`` (thoughts written, trigger reset)."""


class TriggerReport(TypedDict):
    """What ``check_trigger`` found.

    Attributes:
        policy: ``"counters"`` or ``"window"``.
        due: whether the trigger had fired.
        forced: whether the run went on regardless (``force``).
        value: the importance gathered; due at or above ``threshold``. Counters: the
            importance since the last reflection, ``importance_trigger_max -
            importance_trigger_curr``; window: the newest memories' poignancy sum.
        threshold: counters: ``importance_trigger_max``; window: the threshold.
        explanation: the above in words, with how to reflect anyway (``force``).
    """

    policy: TriggerPolicy
    due: bool
    forced: bool
    value: float
    threshold: float
    explanation: str


class Insight(TypedDict):
    """One insight of one question, with its evidence.

    Attributes:
        text: the insight.
        evidence: node ids of the cited statements.
        cited: the valid statement numbers cited (as numbered in the prompt, from 0).
        dropped_numbers: cited numbers that the prompt did not show.
    """

    text: str
    evidence: list[str]
    cited: list[int]
    dropped_numbers: list[int]


class QuestionInsights(TypedDict):
    """The insights of one focal point.

    Attributes:
        question: the focal point.
        retrieved: node ids of the statements shown, in prompt order (number 0 first).
        insights: the usable insights.
        condensed: whether the condense call rewrote them.
    """

    question: str
    retrieved: list[str]
    insights: list[Insight]
    condensed: bool


class Dropped(TypedDict):
    """Something a run left out, and why (reasons in the module docstring).

    Attributes:
        stage: the node (``"focal_points"``, ``"insights"``, ``"condense"``,
            ``"write_back"``); after a conversation ``"planning"`` or ``"memo"`` (an
            unusable reply) or ``"conversation"`` (a fallback triple).
        reason: why.
        question: the focal point concerned.
        text: the insight, question or reply concerned.
        numbers: evidence numbers concerned.
    """

    stage: str
    reason: str
    question: NotRequired[str]
    text: NotRequired[str]
    numbers: NotRequired[list[int]]


class QuestionTask(TypedDict):
    """What one ``retrieve`` branch gets through ``Send``."""

    index: int
    question: str


class Retrieved(TypedDict):
    """What one ``retrieve`` branch found."""

    index: int
    question: str
    node_ids: list[str]


class ReflectionInput(TypedDict, total=False):
    """Input of a run.

    Attributes:
        force: reflect even if the trigger has not fired; None or absent uses the graph's
            ``force``.
    """

    force: bool | None


class ReflectionOutput(TypedDict, total=False):
    """Output of a run (the ``genmem reflect`` command reads these keys).

    Attributes:
        status: see :data:`ReflectionStatus`.
        trigger: what ``check_trigger`` found.
        memories: node ids of the memories the focal points were asked about.
        focal_points: the questions asked.
        insights: per question, the insights kept and their evidence.
        dropped: what was dropped, and why.
        written: node ids of the thoughts written.
        llm_calls: model calls of this run (the importance scorer's included).
        original_llm_calls: the calls the original Generative Agents code makes for the
            same reflection: 1 + questions + 2 x thoughts written.
        reset: whether the trigger counters were reset.
        reasons: what was dropped or skipped, one line each (``"insights: the reply for
            the question '...' was empty, cut at its max_tokens or not valid for its
            schema"``); for ``"not_due"`` the trigger's explanation. Why nothing was
            written, when nothing was.
    """

    status: ReflectionStatus
    trigger: TriggerReport
    memories: list[str]
    focal_points: list[str]
    insights: list[QuestionInsights]
    dropped: list[Dropped]
    written: list[str]
    llm_calls: int
    original_llm_calls: int
    reset: bool
    reasons: list[str]


class ReflectionState(ReflectionInput, ReflectionOutput, total=False):
    """Everything the nodes share: the output keys, the input, and each branch's retrieval.

    Attributes:
        retrieved: what the parallel ``retrieve`` branches found (merged by the reducer).
    """

    retrieved: Annotated[list[Retrieved], operator.add]
