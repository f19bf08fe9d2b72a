"""langgraph.json points at graph factories that build from the run's config or the environment.

An integration test: building ChatOpenAI probes socket options (it opens no connection).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from langchain_genmem import ConfigurationError, MemoryStream

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


def test_a_missing_key_reaches_the_caller_of_a_run(env, monkeypatch, tmp_path):
    # the server builds graphs when it loads them: a factory that raised there gave the caller
    # "An internal error occurred" and left the hint in the server log
    monkeypatch.delenv("OPENAI_API_KEY")
    with MemoryStream("伊莎贝拉", path=str(tmp_path / "store")) as stream:
        stream.add_event("伊莎贝拉在筹备情人节派对", poignancy=8)
    reflection = load(entries()["reflection"])()
    with pytest.raises(ConfigurationError, match="set OPENAI_API_KEY"):
        reflection.invoke({"force": True})
    agent = load(entries()["memory_agent"])()
    with pytest.raises(ConfigurationError, match="set OPENAI_API_KEY.*OPENAI_BASE_URL"):
        agent.invoke({"messages": [("user", "你好")]})


def test_a_run_that_is_not_due_needs_no_key_and_says_why(env, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    out = load(entries()["reflection"])().invoke({})
    trigger = out["trigger"]
    assert out["status"] == "not_due" and trigger["due"] is False
    # value >= threshold means due, for both trigger policies
    assert trigger["value"] < trigger["threshold"] == 150
    assert "reflect --force" in trigger["explanation"]


def test_the_runs_config_chooses_persona_and_store(env, tmp_path):
    from graphs._common import GenmemConfig, settings, stream_from_config

    other = tmp_path / "other-store"
    config = {"configurable": {"persona": "玛丽亚", "path": str(other), "model": "qwen2.5"}}
    stream = stream_from_config(config)
    stream.add_event("玛丽亚在学物理", poignancy=4)
    stream.close()
    assert stream.persona == "玛丽亚" and other.is_dir()
    assert settings(config)["model"] == "qwen2.5"
    assert settings({})["persona"] == "伊莎贝拉"  # the environment, when the config is silent
    defaults = settings(None, env={})
    assert defaults["persona"] == "Ada" and defaults["path"] == ".genmem"
    assert not (tmp_path / "store").exists()  # GENMEM_PATH was not touched

    for name, entry in entries().items():
        graph = load(entry)(config)
        keys = set(graph.get_context_jsonschema()["properties"])
        assert keys == set(GenmemConfig.__annotations__), name
    reflection = load(entries()["reflection"])(config)
    assert reflection.invoke({})["status"] == "not_due"  # 玛丽亚's one memory: no trigger
    assert reflection.get_graph().nodes  # drawn as before


def test_a_configured_model_name_reaches_chatopenai(env):
    from graphs._common import model_from_config

    assert model_from_config({"configurable": {"model": "qwen2.5"}}).model_name == "qwen2.5"
    assert model_from_config({}).model_name == "gpt-4o-mini"
