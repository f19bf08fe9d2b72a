"""A chat model from the standard OpenAI variables, for the CLI and the examples.

``OPENAI_API_KEY`` (required), ``OPENAI_BASE_URL`` (any OpenAI-compatible server: OpenAI,
Ollama, vLLM, llama.cpp, LM Studio...) and ``OPENAI_MODEL`` (default ``gpt-4o-mini``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

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
