"""``langgraph dev`` entry point: the memory chat agent."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from graphs._common import (
    model_from_config,
    reflection_settings,
    stream_from_config,
    with_config_schema,
)
from langchain_genmem.agent import create_memory_agent


def make_graph(config: RunnableConfig | None = None) -> Any:
    """Build the chat agent over the stream and model of the run's config (or environment)."""
    agent = create_memory_agent(model_from_config(config), stream_from_config(config),
                                settings=reflection_settings(config))
    return with_config_schema(agent)
