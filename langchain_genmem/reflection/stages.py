"""The stages of reflection, written once: the graph's nodes and the stepwise functions run these.

:class:`Stages` holds the settings of one reflection and has one method per stage: the
trigger check, the focal points, the retrieval, the insights, the condensing and the
write-back. The model-calling stages are generators (see
:mod:`~langchain_genmem.reflection.steps`); :class:`~langchain_genmem.reflection.steps.Runner`
runs them sync or async. :func:`~langchain_genmem.reflection.graph.create_reflection_graph`
wraps each in a graph node that reads and writes the graph's state, and
:mod:`~langchain_genmem.reflection.stepwise` calls them one by one (``generate_insight``,
``condense_insights``, ``generate_reflection``), so both write the same thoughts for the
same model replies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_genmem.core.nodes import MemoryNode
from langchain_genmem.core.text import unique
from langchain_genmem.llm.calls import Call
from langchain_genmem.llm.importance import mark_unrated, with_fallback
from langchain_genmem.llm.limits import FALLBACK_IMPORTANCE, ReplyKind
from langchain_genmem.llm.parsers import (
    format_numbered,
    parse_focal_points,
    parse_insights,
    parse_triples,
)
from langchain_genmem.llm.parsers import text_key as _text_key
from langchain_genmem.llm.shapes import Shape, insights_shape, questions_shape, triples_shape
from langchain_genmem.memory.stats import GATHERED, importance_gathered, trigger_text
from langchain_genmem.memory.stream import MemoryStream, thought_expiration
from langchain_genmem.reflection.settings import ReflectionSettings
from langchain_genmem.reflection.state import (
    Dropped,
    Insight,
    QuestionInsights,
    Retrieved,
    TriggerReport,
)
from langchain_genmem.reflection.steps import Ask, Retrieve, Score, Step, Write, drop, excerpt
from langchain_genmem.reflection.steps import messages as _messages
from langchain_genmem.retrieval.retrievers import GenerativeAgentsRetriever

__all__ = [
    "FALLBACK_POIGNANCY",
    "Draft",
    "PromptSet",
    "Stages",
    "candidates",
    "cited_line",
    "condense_request",
    "read_insights",
    "write_back",
    "write_thoughts",
]

FALLBACK_POIGNANCY = FALLBACK_IMPORTANCE
"""The poignancy of a thought the scorer could not rate: the llm layer's
:data:`~langchain_genmem.llm.limits.FALLBACK_IMPORTANCE` (the original's fail-safe rating)."""

FORCE_HINT = 'force=True (a deployed graph: the input {"force": true}) reflects now'
"""How to reflect when the trigger is not due, in every trigger report."""

DEFAULT_TOPIC = "reflection"
"""The object of a fallback triple when an insight has no question (the step-by-step functions)."""


def candidates(stream: MemoryStream) -> list[MemoryNode]:
    """Events then thoughts, each newest first, without "idle" ones (the original's order)."""
    nodes = stream.nodes("event") + stream.nodes("thought")
    return [n for n in nodes if "idle" not in n.embedding_key]


@dataclass(frozen=True)
class PromptSet:
    """The prompts of reflection by name, in both forms (text and structured).

    Attributes:
        text: the text prompts (the original's formats).
        structured: the prompts asking for the JSON of a schema; a prompt given by name
            replaces both.
    """

    text: Mapping[str, str]
    structured: Mapping[str, str]

    def call(
        self, name: str, persona: str, kind: ReplyKind, shape: Shape, *, items: int = 1,
        **fields: Any,
    ) -> Call:
        """The call of prompt ``name`` (and its ``*_system`` prompt) filled with ``fields``.

        ``items`` is how many items a batch holds (its ``max_tokens``).
        """
        fields["persona"] = persona
        forms = [
            _messages(p.get(f"{name}_system", "").format(**fields), p[name].format(**fields))
            for p in (self.text, self.structured)
        ]
        return Call(forms[0], kind, items, shape=shape, structured=forms[1])


def cited_line(text: str, numbers: Sequence[int]) -> str:
    """An insight in the stepwise form: ``text [7, 52, 47]`` (just the text without numbers)."""
    return f"{text} [{', '.join(map(str, numbers))}]" if numbers else text


def condense_request(
    prompts: PromptSet,
    persona: str,
    insights: Sequence[tuple[str, Sequence[int]]],
    n: int,
    question: str = "",
    shown: int | None = None,
) -> Call:
    """The condense call for some insights: numbered from 1, citations in square brackets.

    Args:
        prompts: the prompts, with ``"condense"`` and ``"condense_system"``.
        persona: the persona's name.
        insights: (text, cited numbers) pairs.
        n: the most bullet points to keep.
        question: the focal point, for prompts that show it.
        shown: how many statements the citations may name (numbers 0 to shown - 1); None:
            the numbers cited.

    Returns:
        The call.
    """
    listed = format_numbered([cited_line(text, cited) for text, cited in insights], start=1)
    cited = sorted({c for _, numbers in insights for c in numbers})
    numbers = list(range(shown)) if shown is not None else cited
    return prompts.call("condense", persona, "condense", insights_shape(numbers or [0], n),
                        insights=listed, n=n, question=question)


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


def merge(per_question: Sequence[QuestionInsights]) -> tuple[list[Draft], list[Dropped]]:
    """One draft per distinct insight (without case and spacing), evidence united."""
    drafts: dict[str, Draft] = {}
    dropped: list[Dropped] = []
    for entry in per_question:
        topic = entry["question"] or DEFAULT_TOPIC
        for insight in entry["insights"]:
            key = _text_key(insight["text"])
            first = drafts.get(key)
            if first is None:
                drafts[key] = Draft(insight["text"], list(insight["evidence"]), topic)
                continue
            first.evidence = unique([*first.evidence, *insight["evidence"]])
            dropped.append(
                drop("write_back", "duplicate", question=entry["question"], text=insight["text"])
            )
    return list(drafts.values()), dropped


def write_thoughts(
    stream: MemoryStream, prompts: PromptSet, drafts: Sequence[Draft], stage: str
) -> Step[tuple[list[MemoryNode], list[Dropped]]]:
    """Structure and store thoughts: one triple call, one scoring call, one write.

    The triples come from one batched call (prompt ``"triples"``); a thought whose triple is
    unreadable gets (persona, ``"reflect"``, its topic) and a ``"triple_fallback"`` record.
    Poignancy comes from one ``score_many`` call with the thought prompt; a thought the
    scorer finds no rating for, even asking it alone, gets :data:`FALLBACK_POIGNANCY`, a
    ``"rating_fallback"`` record, an
    :class:`~langchain_genmem.llm.importance.UnratedWarning` and a place in the persona's
    unrated list (:func:`~langchain_genmem.llm.importance.unrated_ids`). Every thought is
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
    n = len(drafts)
    [reply] = yield Ask([prompts.call("triples", persona, "triples", triples_shape(n), items=n,
                                      statements=statements, n=n)])
    triples = parse_triples(reply, n, fallback_subject=persona)
    ratings = yield Score([("thought", draft.text) for draft in drafts])
    dropped = [drop(stage, "rating_fallback", text=draft.text)
               for draft, rating in zip(drafts, ratings, strict=True) if rating is None]
    scores = with_fallback(ratings, [("thought", draft.text) for draft in drafts])
    created = stream.clock()
    items: list[dict[str, Any]] = []
    for draft, triple, rating in zip(drafts, triples, scores, strict=False):
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
    mark_unrated(stream, [n.node_id for n, r in zip(nodes, ratings, strict=True) if r is None])
    return nodes, dropped


@dataclass
class Stages:
    """The settings of one reflection and its stages.

    The rules of each stage are told in
    :func:`~langchain_genmem.reflection.graph.create_reflection_graph`.

    Attributes:
        stream: the persona's stream.
        retriever: the evidence retriever; used with ``update_access=False``.
        prompts: the prompts by name, checked, in both forms.
        settings: the reflection's settings (trigger, sizes, ``k``, ``relevance_min``;
            the window threshold is on the trigger's scale; None: the persona's
            ``importance_trigger_max``).
        scale: what the window trigger divides the poignancy sum by (10 for the stepwise design's
            0.1-1.0 importance); its value and threshold are on that scale.
    """

    stream: MemoryStream
    retriever: GenerativeAgentsRetriever
    prompts: PromptSet
    settings: ReflectionSettings
    scale: float = 1.0

    def _call(self, name: str, kind: ReplyKind, shape: Shape, **fields: Any) -> Call:
        return self.prompts.call(name, self.stream.persona, kind, shape, **fields)

    def _numbered(self, node_ids: Sequence[str]) -> str:
        """The memories' embedding keys, numbered from 0 as the insights prompt shows them."""
        return format_numbered([self.stream.get(node_id).embedding_key for node_id in node_ids])

    def trigger(self) -> tuple[TriggerReport, list[MemoryNode]]:
        """Whether the trigger has fired, and the memories to ask the questions about."""
        state = self.stream.state
        found = candidates(self.stream)
        if self.settings.trigger == "counters":
            # the original counts importance_trigger_curr down from its max and is due at 0;
            # reported as importance gathered vs the max, so both policies read value >= threshold
            threshold = state.importance_trigger_max
            value = importance_gathered(state)
            due = state.importance_trigger_curr <= 0 and bool(found)
            recent = sorted(found, key=lambda n: n.last_accessed)
            memories = recent[-(int(state.importance_ele_n) or self.settings.window) :]
            what = GATHERED
        else:
            given = self.settings.threshold
            threshold = state.importance_trigger_max / self.scale if given is None else given
            memories = sorted(found, key=lambda n: n.node_count)[-self.settings.window :]
            value = sum(n.poignancy for n in memories) / self.scale
            due = bool(memories) and value >= threshold
            what = f"the newest {len(memories)} memories' poignancy sums to"
        report = TriggerReport(
            policy=self.settings.trigger,
            due=due,
            forced=False,
            value=float(value),
            threshold=float(threshold),
            explanation=trigger_text(value, threshold, due=due, hint=FORCE_HINT, what=what),
        )
        return report, memories

    def focal_points(self, memories: Sequence[MemoryNode]) -> Step[tuple[list[str], list[Dropped]]]:
        """Ask for the questions (focal points) about ``memories``; no memory, no call."""
        if not memories:
            return [], [drop("focal_points", "no_memories")]
        statements = "".join(f"{node.embedding_key}\n" for node in memories)
        n = self.settings.n_focal_points
        call = self._call("focal_points", "questions", questions_shape(n),
                          statements=statements, n=n)
        [reply] = yield Ask([call])
        questions = parse_focal_points(reply)
        dropped = [drop("focal_points", "over_max", text=q) for q in questions[n:]]
        questions = questions[:n]
        if not questions:
            dropped.append(drop("focal_points", "unreadable_reply", text=excerpt(reply)))
        return questions, dropped

    def retrieve(self, questions: Sequence[str]) -> Step[list[Retrieved]]:
        """Retrieve the evidence of every question against the same state."""
        chosen = self.settings
        found = yield Retrieve(self.retriever, list(questions), chosen.k, chosen.relevance_min)
        return [
            Retrieved(index=index, question=question, node_ids=node_ids)
            for index, (question, node_ids) in enumerate(zip(questions, found, strict=True))
        ]

    def insights(
        self, retrieved: Sequence[Retrieved]
    ) -> Step[tuple[list[QuestionInsights], list[Dropped]]]:
        """Mark what was retrieved as accessed, once; ask each question for insights."""
        found = sorted(retrieved, key=lambda r: r["index"])
        accessed = unique(node_id for r in found for node_id in r["node_ids"])
        if accessed:
            self.stream.mark_accessed(accessed)
        asked = [r for r in found if r["node_ids"]]
        dropped = [
            drop("insights", "no_retrieved", question=r["question"])
            for r in found
            if not r["node_ids"]
        ]
        calls = [
            self._call(
                "insights",
                "insights",
                insights_shape(range(len(r["node_ids"])), self.settings.n_insights),
                statements=self._numbered(r["node_ids"]),
                n=self.settings.n_insights,
                question=r["question"],
            )
            for r in asked
        ]
        replies = yield Ask(calls)
        per_question: list[QuestionInsights] = []
        for r, reply in zip(asked, replies, strict=False):
            kept, lost = read_insights(reply, r["node_ids"], r["question"], "insights")
            per_question.append(
                QuestionInsights(
                    question=r["question"], retrieved=r["node_ids"], insights=kept, condensed=False
                )
            )
            dropped += lost
        return per_question, dropped

    def condense(
        self, per_question: Sequence[QuestionInsights]
    ) -> Step[tuple[list[QuestionInsights], list[Dropped]]]:
        """Condense the questions that have more than ``max_insights`` insights."""
        out = list(per_question)
        most = self.settings.max_insights
        todo = [i for i, entry in enumerate(out) if len(entry["insights"]) > most]
        if not todo:
            return out, []
        calls = [
            condense_request(
                self.prompts,
                self.stream.persona,
                [(x["text"], x["cited"]) for x in out[i]["insights"]],
                most,
                out[i]["question"],
                shown=len(out[i]["retrieved"]),
            )
            for i in todo
        ]
        replies = yield Ask(calls)
        dropped: list[Dropped] = []
        for i, reply in zip(todo, replies, strict=False):
            entry = out[i]
            kept, lost = read_insights(reply, entry["retrieved"], entry["question"], "condense")
            condensed = bool(kept)
            kept = kept or entry["insights"]
            dropped += lost
            dropped += [
                drop("condense", "over_max", question=entry["question"], text=x["text"])
                for x in kept[most:]
            ]
            out[i] = {**entry, "insights": kept[:most], "condensed": condensed}
        return out, dropped

    def write_back(
        self, per_question: Sequence[QuestionInsights]
    ) -> Step[tuple[list[MemoryNode], list[Dropped]]]:
        """Write the distinct insights as thoughts, in one stream write."""
        return (yield from write_back(self.stream, self.prompts, per_question))


def write_back(
    stream: MemoryStream, prompts: PromptSet, per_question: Sequence[QuestionInsights]
) -> Step[tuple[list[MemoryNode], list[Dropped]]]:
    """Write the distinct insights of every question as thoughts, in one stream write.

    Insights repeated across questions (without case and spacing) become one thought with
    the evidence of all (a ``"duplicate"`` record each); then :func:`write_thoughts`.

    Args:
        stream: where to write.
        prompts: the prompts, with ``"triples"``.
        per_question: the insights, with their evidence node ids.

    Returns:
        A stage: the thoughts written and what was dropped.
    """
    drafts, dropped = merge(per_question)
    nodes: list[MemoryNode] = []
    if drafts:
        nodes, lost = yield from write_thoughts(stream, prompts, drafts, "write_back")
        dropped += lost
    return nodes, dropped
