"""Reflection: recent memories become thoughts with evidence (seeds 002 and 004).

* :func:`create_reflection_graph`: the reflection as a compiled LangGraph graph.
* :func:`reflect_on_conversation` / :func:`areflect_on_conversation`: the planning thought
  and the memo written after a conversation.
* Seed 004's functions, running the graph's stages one by one
  (:mod:`~langchain_genmem.reflection.stepwise`): :func:`generate_insight`,
  :func:`condense_insights`, :func:`generate_reflection` (and ``a*`` async twins), with
  :func:`~langchain_genmem.parsers.parse_insights`.
* :mod:`~langchain_genmem.reflection.prompts`: the prompts, as ``DEFAULT_*_PROMPT`` constants.
* :mod:`~langchain_genmem.reflection.state`: the graph's input, state and output.

The graph and conversation names load on first use: :mod:`langchain_genmem.importance`
imports :mod:`~langchain_genmem.reflection.prompts`, which runs this package first, so this
package must not import the importance scorer while it loads.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from langchain_genmem.parsers import parse_insights
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

if TYPE_CHECKING:
    from langchain_genmem.reflection.conversation import (
        ConversationReflection,
        areflect_on_conversation,
        reflect_on_conversation,
    )
    from langchain_genmem.reflection.graph import (
        DEFAULT_REFLECTION_PROMPTS,
        PROMPT_FIELDS,
        create_reflection_graph,
    )
    from langchain_genmem.reflection.stepwise import (
        acondense_insights,
        agenerate_insight,
        agenerate_reflection,
        condense_insights,
        generate_insight,
        generate_reflection,
    )

__all__ = [
    "DEFAULT_REFLECTION_PROMPTS",
    "PROMPT_FIELDS",
    "ConversationReflection",
    "Dropped",
    "Insight",
    "QuestionInsights",
    "ReflectionInput",
    "ReflectionOutput",
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

_LAZY = {
    "DEFAULT_REFLECTION_PROMPTS": "graph",
    "PROMPT_FIELDS": "graph",
    "create_reflection_graph": "graph",
    "ConversationReflection": "conversation",
    "areflect_on_conversation": "conversation",
    "reflect_on_conversation": "conversation",
    "generate_insight": "stepwise",
    "agenerate_insight": "stepwise",
    "condense_insights": "stepwise",
    "acondense_insights": "stepwise",
    "generate_reflection": "stepwise",
    "agenerate_reflection": "stepwise",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
