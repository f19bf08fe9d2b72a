"""Model-facing: what talks to a chat model, below reflection.

Importance (poignancy) scoring, reply parsers and the chat-model glue: the bounds of every
call (:class:`~langchain_genmem.llm.limits.CallLimits`), how calls are sent
(:mod:`~langchain_genmem.llm.calls`) and the JSON shapes of structured replies
(:mod:`~langchain_genmem.llm.shapes`). The former
``llm`` module is :mod:`~langchain_genmem.llm.chat`; its names are importable from
this package as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_genmem.core.exports import lazy_exports

if TYPE_CHECKING:
    from langchain_genmem.llm.chat import (
        DEFAULT_MODEL,
        LOCAL_SERVER_KEY,
        LOCAL_SERVERS,
        MISSING_KEY_HINT,
        UnconfiguredChatModel,
        chat_model_configured,
        chat_model_from_env,
        model_error,
    )
    from langchain_genmem.llm.limits import FALLBACK_IMPORTANCE, CallLimits

# Loaded on first use, so that importing one module of the package does not import them all.
__getattr__, __dir__ = lazy_exports(__name__, {
    "langchain_genmem.llm.chat": [
        "DEFAULT_MODEL", "LOCAL_SERVER_KEY", "LOCAL_SERVERS", "MISSING_KEY_HINT",
        "UnconfiguredChatModel", "chat_model_configured", "chat_model_from_env",
        "model_error",
    ],
    "langchain_genmem.llm.limits": ["FALLBACK_IMPORTANCE", "CallLimits"],
})

__all__ = [
    "DEFAULT_MODEL",
    "FALLBACK_IMPORTANCE",
    "LOCAL_SERVERS",
    "LOCAL_SERVER_KEY",
    "MISSING_KEY_HINT",
    "CallLimits",
    "UnconfiguredChatModel",
    "chat_model_configured",
    "chat_model_from_env",
    "model_error",
]
