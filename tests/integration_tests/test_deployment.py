"""langgraph.json points at graph factories that build from the environment.

An integration test: building ChatOpenAI probes socket options (it opens no connection).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from langchain_genmem import ConfigurationError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("GENMEM_PATH", str(tmp_path / "store"))
    monkeypatch.setenv("GENMEM_PERSONA", "伊莎贝拉")


def entries() -> dict[str, str]:
    return json.loads((ROOT / "langgraph.json").read_text("utf-8"))["graphs"]


def load(entry: str):
    path, attr = entry.split(":")
    module = importlib.import_module(path.removeprefix("./").removesuffix(".py").replace("/", "."))
    return getattr(module, attr)


def test_every_deployed_graph_builds(env):
    built = {name: load(entry)() for name, entry in entries().items()}
    assert set(built) == {"memory_agent", "reflection"}
    assert set(built["memory_agent"].get_graph().nodes) >= {"recall", "respond", "remember",
                                                           "reflect"}
    assert set(built["reflection"].get_graph().nodes) >= {"check_trigger", "focal_points",
                                                          "retrieve", "insights", "condense",
                                                          "write_back", "reset_trigger"}


def test_a_missing_key_says_what_to_set(env, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ConfigurationError, match="set OPENAI_API_KEY"):
        load(entries()["reflection"])()
