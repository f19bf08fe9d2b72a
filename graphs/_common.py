"""What both deployed graphs share: the persona's stream and the model, per run's config.

A LangGraph server calls each factory with the run's ``RunnableConfig``; these keys of
``config["configurable"]`` (schema: :class:`GenmemConfig`, shown as the graphs' config schema)
choose the memory, each falling back to an environment variable and then a default:

==============  =====================  ===========  =========================================
key             variable               default      meaning
==============  =====================  ===========  =========================================
``persona``     ``GENMEM_PERSONA``     ``Ada``      whose memory stream
``path``        ``GENMEM_PATH``        ``.genmem``  embedded Chroma folder
``chroma_host`` ``GENMEM_CHROMA_HOST`` (none)       a Chroma server instead of ``path``
``chroma_port`` ``GENMEM_CHROMA_PORT`` ``8000``     its port
``collection``  ``GENMEM_COLLECTION``  ``genmem``   the Chroma collection
``dsn``         ``GENMEM_DSN``         (none)       a PostgreSQL database instead of Chroma
``model``       ``OPENAI_MODEL``       gpt-4o-mini  the chat model's name
``reflection``  (none)                 defaults     reflection settings, an object of
                                                    :class:`~langchain_genmem.ReflectionSettings`
                                                    fields (``{"n_focal_points": 1}``)
==============  =====================  ===========  =========================================

The store is opened as ``genmem`` opens it
(:class:`~langchain_genmem.memory.location.StoreLocation`), so every store the command line
knows works here too. The model's server and key come from the
standard ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` variables (secrets stay out of configs); a
local OpenAI-compatible server (``OPENAI_BASE_URL=http://localhost:11434/v1`` for Ollama)
needs no key. A run that needs a model that is missing or cannot be reached fails with a
:class:`~langchain_genmem.core.errors.ChatModelError`, whose one-line hint the LangGraph server
returns to the caller (it shows the messages of ``RuntimeError`` and a few other standard
types only, "An internal error occurred" for the rest).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from typing_extensions import TypedDict

from langchain_genmem import MemoryStream, ReflectionSettings
from langchain_genmem.core.errors import ConfigurationError
from langchain_genmem.llm.chat import UnconfiguredChatModel, chat_model_from_env
from langchain_genmem.memory.location import StoreLocation


class GenmemConfig(TypedDict, total=False):
    """The ``configurable`` keys of the deployed graphs.

    Attributes:
        persona: whose memory stream (default ``GENMEM_PERSONA``, else ``Ada``).
        path: the embedded Chroma folder (default ``GENMEM_PATH``, else ``.genmem``).
        chroma_host: a Chroma server's host, instead of ``path``.
        chroma_port: the Chroma server's port.
        collection: the Chroma collection.
        dsn: a PostgreSQL database (``postgresql://...``) instead of Chroma.
        model: the chat model's name (default ``OPENAI_MODEL``).
        reflection: :class:`~langchain_genmem.ReflectionSettings` fields (sizes, output form,
            ``limits``...); those not given keep their defaults.
    """

    persona: str
    path: str
    chroma_host: str
    chroma_port: int
    collection: str
    dsn: str
    model: str
    reflection: dict[str, Any]


def settings(config: RunnableConfig | None, env: Mapping[str, str] | None = None) -> GenmemConfig:
    """The run's settings: ``configurable`` keys, else environment variables, else defaults."""
    env = os.environ if env is None else env
    given: Mapping[str, Any] = (config or {}).get("configurable") or {}

    def pick(key: str, variable: str, default: Any = None) -> Any:
        value = given.get(key)
        return value if value not in (None, "") else env.get(variable) or default

    return GenmemConfig(
        persona=pick("persona", "GENMEM_PERSONA", "Ada"),
        path=pick("path", "GENMEM_PATH", ".genmem"),
        chroma_host=pick("chroma_host", "GENMEM_CHROMA_HOST", ""),
        chroma_port=int(pick("chroma_port", "GENMEM_CHROMA_PORT", 8000)),
        collection=pick("collection", "GENMEM_COLLECTION", "genmem"),
        dsn=pick("dsn", "GENMEM_DSN", ""),
        model=pick("model", "OPENAI_MODEL", ""),
        reflection=dict(given.get("reflection") or {}),
    )


def reflection_settings(config: RunnableConfig | None = None) -> ReflectionSettings:
    """The reflection settings of the run's config (``configurable["reflection"]``).

    Raises:
        ValidationError: a field that is unknown or out of range, named in one line.
    """
    return ReflectionSettings(**settings(config, env={})["reflection"])


def stream_from_config(
    config: RunnableConfig | None = None, env: Mapping[str, str] | None = None
) -> MemoryStream:
    """The persona's stream, on the store the run's config (or the environment) names."""
    s = settings(config, env)
    store = StoreLocation(
        Path(s["path"]), s["chroma_host"] or None, s["chroma_port"], s["collection"],
        dsn=s["dsn"] or None,
    )
    return store.open(s["persona"], create=True)


def model_from_config(
    config: RunnableConfig | None = None, env: Mapping[str, str] | None = None
) -> Any:
    """``ChatOpenAI`` from the standard variables, its name from the config.

    Without them, a stand-in whose every call raises what to set: the server still loads the
    graph, runs that need no model work, and the caller of a run that needs one gets the
    hint, not "An internal error occurred" (with the hint only in the server log).
    """
    env = dict(os.environ if env is None else env)
    name = settings(config, env)["model"]
    if name:
        env["OPENAI_MODEL"] = name
    try:
        return chat_model_from_env(env)
    except ConfigurationError as e:
        return UnconfiguredChatModel(hint=str(e))


def with_config_schema(graph: Any) -> Any:
    """Declare :class:`GenmemConfig` as the graph's config (context) schema.

    A LangGraph server shows it as the assistant's ``configurable`` settings; the graph's
    ``get_config_jsonschema()`` and ``get_context_jsonschema()`` return it.
    """
    graph.context_schema = GenmemConfig
    return graph
