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
knows works here too. A LangGraph server calls the factories for every request (schemas,
drawings, each run), on its event loop: they open the store in a worker thread, once per
process and location (:func:`location`), and keep it open, so no request waits on the disk
or network on the loop and no request opens the store again. Under a LangGraph server whose
store is a :class:`~langchain_genmem.GenerativeAgentsStore` (the shipped ``langgraph.json``:
:mod:`graphs.store`), the graphs keep the persona's memories in that store, in the
namespace ``(persona,)``, unless the run's config names another store (``path``,
``chroma_host`` or ``dsn``). The model's server and key come from the
standard ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` variables (secrets stay out of configs); a
local OpenAI-compatible server (``OPENAI_BASE_URL=http://localhost:11434/v1`` for Ollama)
needs no key. A run that needs a model that is missing or cannot be reached fails with a
:class:`~langchain_genmem.core.errors.ChatModelError`, whose one-line hint the LangGraph server
returns to the caller (it shows the messages of ``RuntimeError`` and a few other standard
types only, "An internal error occurred" for the rest).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from typing_extensions import TypedDict

from langchain_genmem import GenerativeAgentsStore, MemoryStream, ReflectionSettings
from langchain_genmem.backends.chroma import DEFAULT_COLLECTION
from langchain_genmem.core.errors import ConfigurationError, ValidationError
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


SERVER_KEYS = frozenset({"thread_id", "run_id", "assistant_id", "graph_id", "user_id",
                         "checkpoint_id", "checkpoint_ns", "checkpoint_map", "thread_ts",
                         "cron_id", "run_attempt"})
"""``configurable`` keys a LangGraph server or LangGraph itself sets (with those starting
``__``, ``langgraph_``, ``checkpoint_`` or ``x-``, the forwarded headers)."""
SERVER_PREFIXES = ("__", "langgraph_", "checkpoint_", "x-")


def settings(config: RunnableConfig | None, env: Mapping[str, str] | None = None) -> GenmemConfig:
    """The run's settings: ``configurable`` keys, else environment variables, else defaults.

    Raises:
        ValidationError: a ``configurable`` key that is neither the graphs' nor the server's
            (a misspelt ``persona``, say), named with the keys the graphs take.
    """
    env = os.environ if env is None else env
    given: Mapping[str, Any] = (config or {}).get("configurable") or {}
    unknown = sorted(key for key in given if key not in GenmemConfig.__annotations__
                     and key not in SERVER_KEYS and not key.startswith(SERVER_PREFIXES))
    if unknown:
        msg = (f"configurable: unknown key {unknown[0]!r}; the graphs take "
               f"{', '.join(GenmemConfig.__annotations__)}")
        raise ValidationError(msg, field="configurable")

    def pick(key: str, variable: str, default: Any = None) -> Any:
        value = given.get(key)
        return value if value not in (None, "") else env.get(variable) or default

    return GenmemConfig(
        persona=pick("persona", "GENMEM_PERSONA", "Ada"),
        path=pick("path", "GENMEM_PATH", ".genmem"),
        chroma_host=pick("chroma_host", "GENMEM_CHROMA_HOST", ""),
        chroma_port=int(pick("chroma_port", "GENMEM_CHROMA_PORT", 8000)),
        collection=pick("collection", "GENMEM_COLLECTION", DEFAULT_COLLECTION),
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


LOCATION_KEYS = ("path", "chroma_host", "dsn")
"""The ``configurable`` keys that name another store than the server's."""

_PLACES: dict[tuple[Any, ...], StoreLocation] = {}
_STREAMS: dict[tuple[Any, ...], MemoryStream] = {}
_GUARD = threading.Lock()


def location(s: GenmemConfig) -> StoreLocation:
    """The store the settings name, opened once per process and kept open.

    Args:
        s: the run's settings (:func:`settings`).

    Returns:
        The location; the same object for the same store (a relative ``path`` is read
        against the working directory).
    """
    where = (str(Path(s["path"]).absolute()), s["chroma_host"] or None, s["chroma_port"],
             s["collection"], s["dsn"] or None)
    with _GUARD:
        if where not in _PLACES:
            path, host, port, collection, dsn = where
            _PLACES[where] = StoreLocation(Path(path), host, port, collection, dsn=dsn)
        return _PLACES[where]


def stream_from_config(
    config: RunnableConfig | None = None,
    env: Mapping[str, str] | None = None,
    store: Any = None,
) -> MemoryStream:
    """The persona's stream, on the store the run's config (or the environment) names.

    Args:
        config: the run's config.
        env: the environment (None: ``os.environ``).
        store: the LangGraph store the server hands the graphs; a
            :class:`~langchain_genmem.GenerativeAgentsStore` holds the persona's stream
            unless the config names another store.

    Returns:
        The stream, opened once per process, location and persona.
    """
    s = settings(config, env)
    served = served_by(store, config)
    if served is not None:
        return served.stream(served.persona_for((s["persona"],)))
    place = location(s)
    with _GUARD:
        key = (id(place), s["persona"])
        if key not in _STREAMS:
            _STREAMS[key] = place.open(s["persona"], create=True)
        return _STREAMS[key]


def served_by(store: Any, config: RunnableConfig | None) -> GenerativeAgentsStore | None:
    """The server's store, if it is to hold the graphs' memories for this run's config.

    Args:
        store: the store the server hands the graphs (None in process).
        config: the run's config.

    Returns:
        The store, when it is a :class:`~langchain_genmem.GenerativeAgentsStore` and the
        config names no other store (:data:`LOCATION_KEYS`); None otherwise.
    """
    given = (config or {}).get("configurable") or {}
    if not isinstance(store, GenerativeAgentsStore):
        return None
    return None if any(given.get(key) for key in LOCATION_KEYS) else store


def persona_namespace(config: RunnableConfig | None, store: Any) -> tuple[str, ...] | None:
    """The namespace of the persona's items in the server's store, or None to use the stream.

    Args:
        config: the run's config.
        store: the store the server hands the graphs.

    Returns:
        ``(persona,)`` when :func:`served_by` gives the store, else None.
    """
    if served_by(store, config) is None:
        return None
    return (settings(config)["persona"],)


async def built_off_loop(
    build: Callable[[RunnableConfig | None, Any], Any], config: RunnableConfig, runtime: Any
) -> Any:
    """``build(config, store)`` in a worker thread: opening a store reads disk or network.

    Args:
        build: a graph module's ``build``.
        config: the run's config.
        runtime: the server's ``ServerRuntime`` (its ``store`` and why it asks).

    Returns:
        The graph.

    Raises:
        HTTPException: (asked for schemas or a drawing) a bad setting, as a 422 with its
            one-line reason.
        ValidationError: (a run) a bad setting; the server reports it as the run's error.
    """
    try:
        return await asyncio.to_thread(build, config, runtime.store)
    except ValidationError as e:
        if runtime.execution_runtime is not None:
            raise
        from starlette.exceptions import HTTPException  # the server's web framework

        raise HTTPException(422, detail=str(e)) from e


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
