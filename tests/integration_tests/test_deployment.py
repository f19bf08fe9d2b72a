"""langgraph.json points at graph factories that build from the run's config or the environment.

In process: each graph module's ``build`` (what the server's async factory runs in a worker
thread). An integration test: building ChatOpenAI probes socket options (it opens no
connection). ``tests/integration_tests/test_langgraph_server.py`` runs them in LangGraph's
own server.
"""

from __future__ import annotations

import importlib
import inspect
import json
from pathlib import Path

import pytest

from langchain_genmem import MemoryStream
from langchain_genmem.core.errors import ChatModelError
from tests.support.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
NO_MODEL = ("no chat model: set OPENAI_API_KEY, or point OPENAI_BASE_URL at a local "
            "OpenAI-compatible server (Ollama: http://localhost:11434/v1")


@pytest.fixture
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("GENMEM_PATH", str(tmp_path / "store"))
    monkeypatch.setenv("GENMEM_PERSONA", "伊莎贝拉")
    return tmp_path


def entries() -> dict[str, str]:
    return json.loads((ROOT / "langgraph.json").read_text("utf-8"))["graphs"]


def load(entry: str):
    """The graph module's in-process builder (the server's factory runs it off its loop)."""
    path, attr = entry.split(":")
    module = importlib.import_module(path.removeprefix("./").removesuffix(".py").replace("/", "."))
    assert inspect.iscoroutinefunction(getattr(module, attr))  # the server awaits it
    return module.build


def test_every_deployed_graph_builds(env):
    built = {name: load(entry)() for name, entry in entries().items()}
    assert set(built) == {"memory_agent", "reflection"}
    assert set(built["memory_agent"].get_graph().nodes) >= {"recall", "respond", "remember",
                                                           "reflect"}
    assert set(built["reflection"].get_graph().nodes) >= {"check_trigger", "focal_points",
                                                          "retrieve", "insights", "condense",
                                                          "write_back", "reset_trigger"}


def one_line_hint(error: pytest.ExceptionInfo[ChatModelError]) -> str:
    # the LangGraph API server passes on the message of a RuntimeError (and of a few other
    # standard types); any other error reaches the caller as "An internal error occurred"
    assert isinstance(error.value, RuntimeError)
    assert "\n" not in str(error.value)
    return str(error.value)


def test_a_missing_model_reaches_the_caller_of_a_run(env, monkeypatch, tmp_path):
    # the server builds graphs when it loads them: a factory that raised there gave the caller
    # "An internal error occurred" and left the hint in the server log
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("OPENAI_BASE_URL")
    with MemoryStream("伊莎贝拉", path=str(tmp_path / "store")) as stream:
        stream.add_event("伊莎贝拉在筹备情人节派对", poignancy=8)
    reflection = load(entries()["reflection"])()
    with pytest.raises(ChatModelError) as raised:
        reflection.invoke({"force": True})
    assert one_line_hint(raised).startswith(NO_MODEL)
    agent = load(entries()["memory_agent"])()
    with pytest.raises(ChatModelError) as raised:
        agent.invoke({"messages": [("user", "你好")]})
    assert one_line_hint(raised).startswith(NO_MODEL)


def test_an_unreachable_model_reaches_the_caller_of_a_run(env, monkeypatch):
    url = f"http://127.0.0.1:{free_port()}/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    monkeypatch.delenv("OPENAI_API_KEY")  # a local server needs no key
    agent = load(entries()["memory_agent"])()
    with pytest.raises(ChatModelError) as raised:
        agent.invoke({"messages": [("user", "你好")]})
    assert one_line_hint(raised).startswith(f"cannot reach the chat model at {url}")


def test_a_run_that_is_not_due_needs_no_key_and_says_why(env, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    out = load(entries()["reflection"])().invoke({})
    trigger = out["trigger"]
    assert out["status"] == "not_due" and trigger["due"] is False
    # value >= threshold means due, for both trigger policies
    assert trigger["value"] < trigger["threshold"] == 150
    assert 'the input {"force": true}' in trigger["explanation"]


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


def test_the_runs_config_sets_the_reflection_settings(env):
    from graphs._common import reflection_settings
    from langchain_genmem.core.errors import ValidationError

    config = {"configurable": {"reflection": {"n_focal_points": 1, "output": "text",
                                              "limits": {"answer": 40}}}}
    chosen = reflection_settings(config)
    assert (chosen.n_focal_points, chosen.output, chosen.limits.answer) == (1, "text", 40)
    assert chosen.k == 30 and reflection_settings({}).n_focal_points == 3
    with pytest.raises(ValidationError, match="k: "):
        reflection_settings({"configurable": {"reflection": {"k": 0}}})
    for name in ("reflection", "memory_agent"):
        assert load(entries()[name])(config) is not None


def test_a_configured_model_name_reaches_chatopenai(env):
    from graphs._common import model_from_config

    assert model_from_config({"configurable": {"model": "qwen2.5"}}).model_name == "qwen2.5"
    assert model_from_config({}).model_name == "gpt-4o-mini"


def test_the_servers_store_takes_langgraph_jsons_settings(env, monkeypatch):
    from graphs import chat_agent
    from graphs.store import open_store
    from langchain_genmem.core.errors import ConfigurationError

    monkeypatch.setenv("LANGGRAPH_STORE", json.dumps({
        "index": {"fields": ["title", "notes[*].text"]},
        "ttl": {"default_ttl": 60, "sweep_interval_minutes": 2}}))
    monkeypatch.setenv("GENMEM_RANKING", "similarity")
    store = open_store()
    try:
        assert store.index_config["fields"] == ["title", "notes[*].text"]
        assert store.ttl_config["default_ttl"] == 60 and store.ranking == "similarity"
        store.put(("伊莎贝拉",), "party", {"title": "情人节派对", "notes": [{"text": "二月"}]})
        agent = chat_agent.build({}, store)  # the deployed agent keeps its memories here
        assert agent.store is store
        assert [i.key for i in store.search(("伊莎贝拉",), query="派对")] == ["party"]
        other = chat_agent.build({"configurable": {"path": str(env / "elsewhere")}}, store)
        assert other.store is None  # a run that names another store uses that one
    finally:
        store.close()
    for text, reason in (("{", "LANGGRAPH_STORE: not JSON"), ("[1]", "expected a JSON object")):
        monkeypatch.setenv("LANGGRAPH_STORE", text)
        with pytest.raises(ConfigurationError, match=reason):
            open_store()


def test_a_misspelt_config_key_is_named(env):
    from graphs._common import settings
    from langchain_genmem.core.errors import ValidationError

    with pytest.raises(ValidationError, match="^configurable: unknown key 'persona_name'"):
        settings({"configurable": {"persona_name": "Ada"}})
    served = {"thread_id": "t", "assistant_id": "a", "langgraph_auth_user": None,
              "__pregel_runtime": None, "x-request-id": "r", "checkpoint_ns": ""}
    assert settings({"configurable": {**served, "persona": "Ada"}})["persona"] == "Ada"
