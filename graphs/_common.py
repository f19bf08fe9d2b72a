"""What both deployed graphs share: the persona's stream and the model, from the environment.

``GENMEM_PATH`` (default ``.genmem``) or ``GENMEM_CHROMA_HOST``/``GENMEM_CHROMA_PORT`` choose
the store, ``GENMEM_PERSONA`` (default ``Ada``) the persona; the model comes from the standard
``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` / ``OPENAI_MODEL`` variables.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from langchain_genmem import MemoryStream
from langchain_genmem.errors import ConfigurationError
from langchain_genmem.llm import UnconfiguredChatModel, chat_model_from_env


def stream_from_env(env: Mapping[str, str] | None = None) -> MemoryStream:
    """The persona's stream, on the folder or Chroma server the environment names."""
    env = os.environ if env is None else env
    persona = env.get("GENMEM_PERSONA", "Ada")
    host = env.get("GENMEM_CHROMA_HOST")
    if host:
        import chromadb

        client = chromadb.HttpClient(host=host, port=int(env.get("GENMEM_CHROMA_PORT", "8000")))
        return MemoryStream(persona, client=client)
    return MemoryStream(persona, path=env.get("GENMEM_PATH", ".genmem"))


def model_from_env(env: Mapping[str, str] | None = None) -> Any:
    """``ChatOpenAI`` from the standard variables.

    Without them, a stand-in whose every call raises what to set: the server still loads the
    graph, and the caller of a run that needs the model gets the hint, not "An internal error
    occurred" (with the hint only in the server log).
    """
    try:
        return chat_model_from_env(env)
    except ConfigurationError as e:
        return UnconfiguredChatModel(hint=str(e))
