"""``langgraph dev`` entry point: the reflection graph over the environment's persona."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from graphs._common import model_from_env, stream_from_env
from langchain_genmem.reflection import create_reflection_graph


def make_graph(config: RunnableConfig | None = None) -> Any:
    """Build the reflection graph over the environment's stream and model."""
    return create_reflection_graph(model_from_env(), stream_from_env())
