"""A chat model from the standard OpenAI variables, for the CLI and the examples.

``OPENAI_API_KEY`` (required), ``OPENAI_BASE_URL`` (any OpenAI-compatible server: OpenAI,
Ollama, vLLM, llama.cpp, LM Studio...) and ``OPENAI_MODEL`` (default ``gpt-4o-mini``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult

from langchain_genmem.errors import ConfigurationError

DEFAULT_MODEL = "gpt-4o-mini"

MISSING_KEY_HINT = (
    "this needs an OpenAI-compatible chat model: set OPENAI_API_KEY (any value for a local "
    "server), and optionally OPENAI_BASE_URL (e.g. http://localhost:11434/v1 for Ollama) and "
    f"OPENAI_MODEL (default {DEFAULT_MODEL})"
)


def chat_model_from_env(env: Mapping[str, str] | None = None, **kwargs: Any) -> Any:
    """``ChatOpenAI`` configured from ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``OPENAI_MODEL``.

    Args:
        env: the variables (default ``os.environ``).
        **kwargs: more ``ChatOpenAI`` arguments (temperature, max_retries...).

    Returns:
        The chat model.

    Raises:
        ConfigurationError: ``OPENAI_API_KEY`` is not set (the message says what to set), or
            langchain-openai is not installed.
    """
    env = os.environ if env is None else env
    if not env.get("OPENAI_API_KEY"):
        raise ConfigurationError(MISSING_KEY_HINT)
    from langchain_genmem.extras import require_extra

    chat_openai = require_extra("langchain_openai", "openai", "the chat model").ChatOpenAI
    options: dict[str, Any] = {"model": env.get("OPENAI_MODEL") or DEFAULT_MODEL,
                               "api_key": env["OPENAI_API_KEY"]}
    if env.get("OPENAI_BASE_URL"):
        options["base_url"] = env["OPENAI_BASE_URL"]
    return chat_openai(**{**options, **kwargs})


class UnconfiguredChatModel(BaseChatModel):
    """Stands in for a chat model that cannot be built yet: every call raises the hint.

    Deployed graphs (``langgraph dev``) are built when the server loads them; a graph factory
    that raised there would leave the caller with "An internal error occurred" and the hint in
    the server log only. With this stand-in the graph builds, runs that need no model (a
    reflection that is not due) work, and a run that needs one fails with the hint itself.

    Attributes:
        hint: what to set, raised as a ConfigurationError.
    """

    hint: str = MISSING_KEY_HINT

    @property
    def _llm_type(self) -> str:
        return "unconfigured"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise ConfigurationError(self.hint)


def model_error(error: BaseException) -> ConfigurationError | None:
    """A one-line hint for an error of the OpenAI client, or None for any other error.

    For callers that print errors as one line (the CLI, scripts): an unreachable server, a
    refused key or an unknown model says which variable to check instead of a traceback.

    Args:
        error: what the chat model raised.

    Returns:
        The hint as a ConfigurationError, or None when the error is not the client's.
    """
    try:
        import openai
    except ImportError:
        return None
    base = os.environ.get("OPENAI_BASE_URL") or "the OpenAI API"
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    if isinstance(error, openai.APIConnectionError):
        msg = f"cannot reach the chat model at {base} ({first}); start it or check OPENAI_BASE_URL"
    elif isinstance(error, openai.AuthenticationError):
        msg = f"the chat model at {base} refused the key ({first}); check OPENAI_API_KEY"
    elif isinstance(error, openai.NotFoundError):
        msg = f"the chat model at {base} has no such model or route ({first}); check " \
              "OPENAI_MODEL and OPENAI_BASE_URL (most servers end in /v1)"
    elif isinstance(error, openai.APIError):
        msg = f"the chat model at {base} failed ({first})"
    else:
        return None
    return ConfigurationError(msg)


def chat_model_or_hint(**kwargs: Any) -> Any | None:
    """:func:`chat_model_from_env`, or None after printing what to set on stderr.

    For scripts: ``model = chat_model_or_hint(); if model is None: return 2``.

    Args:
        **kwargs: more ``ChatOpenAI`` arguments.

    Returns:
        The chat model, or None when it cannot be built.
    """
    try:
        return chat_model_from_env(**kwargs)
    except ConfigurationError as e:
        print(e, file=sys.stderr)
        return None
