"""langgraph.json points at graph factories that build from the run's config or the environment.

An integration test: building ChatOpenAI probes socket options (it opens no connection). With
``langgraph-cli[inmem]`` installed (the ``langgraph-dev`` extra), a real ``langgraph dev``
serves the graphs and a missing or unreachable model's hint must reach the caller of a run.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import urllib.request
from pathlib import Path

import pytest

from langchain_genmem import MemoryStream
from langchain_genmem.core.errors import ChatModelError
from tests.support.processes import ServerProcess, free_port

ROOT = Path(__file__).resolve().parents[2]
NO_MODEL = ("no chat model: set OPENAI_API_KEY, or point OPENAI_BASE_URL at a local "
            "OpenAI-compatible server (Ollama: http://localhost:11434/v1")


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


# ------------------------------------------------------------------ a real `langgraph dev`


class LanggraphDev(ServerProcess):
    """``langgraph dev`` (in-memory runtime) on a free port of 127.0.0.1, serving langgraph.json.

    The server inherits this process's environment (the test sets it with monkeypatch).
    """

    temp_prefix = "langgraph-dev-"

    def __init__(self, folder: Path) -> None:
        super().__init__(folder, startup_timeout=120)
        self.port = 0

    def _start(self) -> None:
        graphs = {name: str(ROOT / entry.removeprefix("./")) for name, entry in entries().items()}
        config = self.folder / "langgraph.json"
        config.write_text(json.dumps({"dependencies": ["."], "graphs": graphs}), "utf-8")
        self.port = free_port()
        argv = [sys.executable, "-m", "langgraph_cli", "dev", "--host", "127.0.0.1", "--port",
                str(self.port), "--no-browser", "--no-reload", "--config", str(config)]
        self.launch(argv, check=lambda: self.get("/ok") is not None, what="langgraph dev")

    def get(self, path: str) -> object:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
            return json.loads(r.read())

    def run(self, graph: str, state: dict) -> dict:
        body = json.dumps({"assistant_id": graph, "input": state}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/runs/wait", data=body,
                                         headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as r:
            return json.loads(r.read())


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("langgraph_api") is None,
                    reason="needs langgraph-cli[inmem]: pip install -e '.[langgraph-dev]'")
@pytest.mark.parametrize("model", ["missing", "unreachable"])
def test_langgraph_dev_gives_the_caller_the_hint(model, monkeypatch, tmp_path):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)
    url = f"http://127.0.0.1:{free_port()}/v1"
    if model == "unreachable":
        monkeypatch.setenv("OPENAI_BASE_URL", url)
    monkeypatch.setenv("GENMEM_PATH", str(tmp_path / "store"))
    monkeypatch.setenv("GENMEM_PERSONA", "伊莎贝拉")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), *sys.path]))
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    monkeypatch.setenv("LANGGRAPH_CLI_NO_ANALYTICS", "1")
    with LanggraphDev(tmp_path / "server") as server:
        out = server.run("memory_agent", {"messages": [{"role": "user", "content": "你好"}]})
        error = out.get("__error__", out)
        hint = NO_MODEL if model == "missing" else f"cannot reach the chat model at {url}"
        assert error["message"].startswith(hint), out  # not "An internal error occurred"
        assert error["error"] == "ChatModelError"
        assert server.run("reflection", {})["status"] == "not_due"  # needs no model
