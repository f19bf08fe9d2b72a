"""The LangGraph server's store: a :class:`~langchain_genmem.GenerativeAgentsStore`.

``langgraph.json`` names :func:`make_store` as the server's store (``"store": {"path":
"./graphs/store.py:make_store"}``), so ``client.store.*`` of ``langgraph_sdk``, Studio's memory
view and the deployed graphs (:mod:`graphs._common`) all read and write one memory. The
store lives where the graphs' default store is: the environment's ``GENMEM_PATH`` (default
``.genmem``), ``GENMEM_CHROMA_HOST``/``GENMEM_CHROMA_PORT``/``GENMEM_COLLECTION`` or
``GENMEM_DSN``, as the ``genmem`` command reads them.

The server passes a custom store none of its ``"store"`` settings, so this factory reads
them where the LangGraph CLI puts them (the ``LANGGRAPH_STORE`` variable): ``index`` (an
``IndexConfig``: ``embed``, ``dims``, ``fields``; default: the bundled embedding model on
the item's ``content``, else its JSON) and ``ttl`` (a ``TTLConfig``). The server runs no TTL
sweeper for a custom store, so the store runs its own, every
``ttl.sweep_interval_minutes`` (default 5). ``GENMEM_RANKING=similarity`` makes a search's
score the cosine similarity (default ``weighted``: see ``docs/langgraph.md``).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from graphs._common import location, settings
from langchain_genmem import GenerativeAgentsStore
from langchain_genmem.core.errors import ConfigurationError

_OPEN: dict[str, Any] = {"store": None, "users": 0}
_GUARD = threading.Lock()


def store_settings(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``"store"`` object of ``langgraph.json``, as the LangGraph CLI hands it on.

    Args:
        env: the environment (None: ``os.environ``).

    Returns:
        The object (``{}`` when the variable is unset).

    Raises:
        ConfigurationError: the variable holds no JSON object.
    """
    text = (os.environ if env is None else env).get("LANGGRAPH_STORE") or "{}"
    try:
        given = json.loads(text)
    except json.JSONDecodeError as e:
        msg = f"LANGGRAPH_STORE: not JSON ({e.msg} at character {e.pos})"
        raise ConfigurationError(msg) from e
    if not isinstance(given, dict):
        msg = "LANGGRAPH_STORE: expected a JSON object like langgraph.json's \"store\""
        raise ConfigurationError(msg)
    return given


def open_store(env: Mapping[str, str] | None = None) -> GenerativeAgentsStore:
    """A store on the environment's location, with ``langgraph.json``'s index and TTL.

    Args:
        env: the environment (None: ``os.environ``).

    Returns:
        The store, its TTL sweeper running; closing it leaves the location open (the
        graphs share it).
    """
    given = store_settings(env)
    ranking = (os.environ if env is None else env).get("GENMEM_RANKING") or "weighted"
    store = GenerativeAgentsStore(backend=location(settings(None, env)).backend(),
                                  index=given.get("index"), ttl=given.get("ttl"),
                                  ranking=ranking)
    store.start_ttl_sweeper()
    return store


def shared_store() -> GenerativeAgentsStore:
    """The process's store, opened by its first user and counted for each one."""
    with _GUARD:
        if _OPEN["store"] is None:
            _OPEN["store"] = open_store()
        _OPEN["users"] += 1
        return _OPEN["store"]


def release_store() -> None:
    """One user is done with the process's store; the last one closes it."""
    with _GUARD:
        _OPEN["users"] -= 1
        if _OPEN["users"] == 0 and _OPEN["store"] is not None:
            _OPEN["store"].close()
            _OPEN["store"] = None


@asynccontextmanager
async def make_store() -> AsyncIterator[GenerativeAgentsStore]:
    """The server's store: opened off the event loop, shared by every loop that asks.

    The server enters this once per thread that serves (its main loop, and each background
    loop with ``BG_JOB_ISOLATED_LOOPS``) and leaves it at shutdown.
    """
    store = await asyncio.to_thread(shared_store)
    try:
        yield store
    finally:
        await asyncio.to_thread(release_store)
