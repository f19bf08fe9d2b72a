"""``langgraph dev`` entry point: the memory chat agent."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph_sdk.runtime import ServerRuntime

from graphs._common import (
    built_off_loop,
    model_from_config,
    persona_namespace,
    reflection_settings,
    stream_from_config,
    with_config_schema,
)
from langchain_genmem.agent import create_memory_agent


def build(config: RunnableConfig | None = None, store: Any = None) -> Any:
    """The chat agent over the stream and model of the run's config (or environment).

    Args:
        config: the run's config.
        store: the store a LangGraph server hands the graph: a
            :class:`~langchain_genmem.GenerativeAgentsStore` keeps the agent's memories as
            its items in the namespace ``(persona,)``.

    Returns:
        The compiled agent.
    """
    namespace = persona_namespace(config, store)
    agent = create_memory_agent(model_from_config(config),
                                stream_from_config(config, store=store),
                                settings=reflection_settings(config), namespace=namespace,
                                store=None if namespace is None else store)
    return with_config_schema(agent)


async def make_graph(config: RunnableConfig, runtime: ServerRuntime) -> Any:
    """The LangGraph server's factory: :func:`build`, off the event loop."""
    return await built_off_loop(build, config, runtime)
