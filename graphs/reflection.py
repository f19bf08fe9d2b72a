"""``langgraph dev`` entry point: the reflection graph over the configured persona."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from graphs._common import (
    model_from_config,
    reflection_settings,
    stream_from_config,
    with_config_schema,
)
from langchain_genmem.reflection import create_reflection_graph


def make_graph(config: RunnableConfig | None = None) -> Any:
    """Build the reflection graph over the stream and model of the run's config (or env)."""
    graph = create_reflection_graph(model_from_config(config), stream_from_config(config),
                                    settings=reflection_settings(config))
    return with_config_schema(graph)
