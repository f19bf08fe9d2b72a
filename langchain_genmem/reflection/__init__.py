"""Reflection: recent memories become thoughts with evidence.

* :func:`create_reflection_graph`: the reflection as a compiled LangGraph graph.
* :func:`reflect_on_conversation` / :func:`areflect_on_conversation`: the planning thought
  and the memo written after a conversation.
* The stepwise design's functions, running the graph's stages one by one
  (:mod:`~langchain_genmem.reflection.stepwise`): :func:`generate_insight`,
  :func:`condense_insights`, :func:`generate_reflection` (and ``a*`` async twins), with
  :func:`~langchain_genmem.llm.parsers.parse_insights`.
* :mod:`~langchain_genmem.llm.prompts`: the prompts, as ``DEFAULT_*_PROMPT`` constants.
* :mod:`~langchain_genmem.reflection.state`: the graph's input, state and output.
* :class:`ReflectionSettings`: the knobs of a reflection, declared once; every entry point
  takes ``settings=``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_genmem.core.exports import lazy_exports

if TYPE_CHECKING:
    from langchain_genmem.llm.parsers import parse_insights
    from langchain_genmem.reflection.conversation import (
        ConversationReflection,
        areflect_on_conversation,
        reflect_on_conversation,
    )
    from langchain_genmem.reflection.graph import (
        DEFAULT_REFLECTION_PROMPTS,
        PROMPT_FIELDS,
        STRUCTURED_REFLECTION_PROMPTS,
        create_reflection_graph,
    )
    from langchain_genmem.reflection.settings import ReflectionSettings
    from langchain_genmem.reflection.state import (
        Dropped,
        Insight,
        QuestionInsights,
        ReflectionInput,
        ReflectionOutput,
        ReflectionState,
        ReflectionStatus,
        TriggerPolicy,
        TriggerReport,
    )
    from langchain_genmem.reflection.stepwise import (
        acondense_insights,
        agenerate_insight,
        agenerate_reflection,
        condense_insights,
        generate_insight,
        generate_reflection,
    )

# Loaded on first use, so that importing one module of the package does not import them all.
__getattr__, __dir__ = lazy_exports(__name__, {
    "langchain_genmem.llm.parsers": ["parse_insights"],
    "langchain_genmem.reflection.conversation": [
        "ConversationReflection", "areflect_on_conversation", "reflect_on_conversation",
    ],
    "langchain_genmem.reflection.graph": [
        "DEFAULT_REFLECTION_PROMPTS", "PROMPT_FIELDS", "STRUCTURED_REFLECTION_PROMPTS",
        "create_reflection_graph",
    ],
    "langchain_genmem.reflection.settings": ["ReflectionSettings"],
    "langchain_genmem.reflection.state": [
        "Dropped", "Insight", "QuestionInsights", "ReflectionInput", "ReflectionOutput",
        "ReflectionState", "ReflectionStatus", "TriggerPolicy", "TriggerReport",
    ],
    "langchain_genmem.reflection.stepwise": [
        "acondense_insights", "agenerate_insight", "agenerate_reflection",
        "condense_insights", "generate_insight", "generate_reflection",
    ],
})

__all__ = [
    "DEFAULT_REFLECTION_PROMPTS",
    "PROMPT_FIELDS",
    "STRUCTURED_REFLECTION_PROMPTS",
    "ConversationReflection",
    "Dropped",
    "Insight",
    "QuestionInsights",
    "ReflectionInput",
    "ReflectionOutput",
    "ReflectionSettings",
    "ReflectionState",
    "ReflectionStatus",
    "TriggerPolicy",
    "TriggerReport",
    "acondense_insights",
    "agenerate_insight",
    "agenerate_reflection",
    "areflect_on_conversation",
    "condense_insights",
    "create_reflection_graph",
    "generate_insight",
    "generate_reflection",
    "parse_insights",
    "reflect_on_conversation",
]
