"""Reflection: recent memories become thoughts with evidence (seeds 002 and 004).

* :func:`create_reflection_graph`: the reflection as a compiled LangGraph graph.
* :func:`reflect_on_conversation` / :func:`areflect_on_conversation`: the planning thought
  and the memo written after a conversation.
* :mod:`~langchain_genmem.reflection.prompts`: the prompts, as ``DEFAULT_*_PROMPT`` constants.
* :mod:`~langchain_genmem.reflection.state`: the graph's input, state and output.

The graph and conversation names load on first use: :mod:`langchain_genmem.importance`
imports :mod:`~langchain_genmem.reflection.prompts`, which runs this package first, so this
package must not import the importance scorer while it loads.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

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
    "areflect_on_conversation",
    "create_reflection_graph",
    "reflect_on_conversation",
]

_LAZY = {
    "DEFAULT_REFLECTION_PROMPTS": "graph",
    "PROMPT_FIELDS": "graph",
    "create_reflection_graph": "graph",
    "ConversationReflection": "conversation",
    "areflect_on_conversation": "conversation",
    "reflect_on_conversation": "conversation",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
