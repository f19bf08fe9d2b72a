"""``langgraph dev`` entry point: the reflection graph over the configured persona."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph_sdk.runtime import ServerRuntime

from graphs._common import (
    built_off_loop,
    model_from_config,
    reflection_settings,
    stream_from_config,
    with_config_schema,
)
from langchain_genmem.reflection import create_reflection_graph


def build(config: RunnableConfig | None = None, store: Any = None) -> Any:
    """The reflection graph over the stream and model of the run's config (or environment).

    Args:
        config: the run's config.
        store: the store a LangGraph server hands the graph: a
            :class:`~langchain_genmem.GenerativeAgentsStore` holds the persona's stream.

    Returns:
        The compiled graph.
    """
    graph = create_reflection_graph(model_from_config(config),
                                    stream_from_config(config, store=store),
                                    settings=reflection_settings(config))
    return with_config_schema(graph)


async def make_graph(config: RunnableConfig, runtime: ServerRuntime) -> Any:
    """The LangGraph server's factory: :func:`build`, off the event loop."""
    return await built_off_loop(build, config, runtime)
