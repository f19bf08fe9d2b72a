"""``langgraph dev`` entry point: the memory chat agent."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from graphs._common import model_from_env, stream_from_env
from langchain_genmem.agent import create_memory_agent


def make_graph(config: RunnableConfig | None = None) -> Any:
    """Build the chat agent over the environment's stream and model."""
    return create_memory_agent(model_from_env(), stream_from_env())
