"""LangGraph's own server, started as users start it, serving this repository's langgraph.json.

``langgraph dev`` runs from ``.venv-langgraph`` with its blocking-call checks on (no
``--allow-blocking``); the tests drive it through ``langgraph_sdk`` and raw HTTP, with a
scripted OpenAI-compatible model (exact prompts), no model at all, and an unreachable one.
Every test ends by reading the server's log for blocking calls on its event loop.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk.errors import UnprocessableEntityError

from tests.support.langgraph_server import LanggraphDev, served_config
from tests.support.openai_server import ScriptedOpenAI

pytestmark = pytest.mark.slow

NO_MODEL = ("no chat model: set OPENAI_API_KEY, or point OPENAI_BASE_URL at a local "
            "OpenAI-compatible server (Ollama: http://localhost:11434/v1")
RULES = [
    {"when": r"rate the likely poignancy of each of the following", "reply": "1. 6\n2. 3"},
    {"when": r"following event for", "reply": "5"},
    {"when": r"Where does my sister live\?", "reply": "你妹妹莉娜住在波尔图。"},
]
DEFAULT_REPLY = "好的。"
TOLD = "我妹妹莉娜住在波尔图 (my sister Lena lives in Porto)"


def human(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI(RULES, default=DEFAULT_REPLY,
                        tmp_path=tmp_path_factory.mktemp("model")) as srv:
        yield srv


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, model: ScriptedOpenAI
           ) -> Iterator[LanggraphDev]:
    folder = tmp_path_factory.mktemp("langgraph")
    env = {"GENMEM_PATH": str(folder / "store"), "GENMEM_PERSONA": "Ada",
           "OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": "test-key",
           "OPENAI_MODEL": "scripted"}
    config = served_config({"ttl": {"refresh_on_read": True, "sweep_interval_minutes": 1}})
    with LanggraphDev(folder / "server", env=env, config=config) as srv:
        yield srv


@pytest.fixture
def client(server: LanggraphDev) -> Iterator[Any]:
    yield server.client()
    assert server.blocking_lines() == [], server.log()[-4000:]


def assistant(client: Any, graph: str) -> str:
    return next(a["assistant_id"] for a in client.assistants.search(graph_id=graph)
                if a["config"].get("configurable", {}) == {})


def test_both_graphs_answer_their_schemas_and_drawings(client):
    for graph, nodes in (("memory_agent", {"recall", "respond", "remember", "reflect"}),
                         ("reflection", {"check_trigger", "focal_points", "write_back"})):
        schemas = client.assistants.get_schemas(assistant(client, graph))
        assert set(schemas["context_schema"]["properties"]) >= {"persona", "path", "model"}
        drawn = {node["id"] for node in client.assistants.get_graph(assistant(client, graph))
                 ["nodes"]}
        assert drawn >= nodes, graph


def test_a_fact_told_on_one_thread_is_recalled_on_another(client, model):
    told = client.threads.create()["thread_id"]
    out = client.runs.wait(told, "memory_agent", input=human(TOLD))
    assert out["messages"][-1]["content"] == DEFAULT_REPLY
    assert len(out["written"]) == 2  # what the user said and what Ada answered, as items
    kept = client.store.search_items(["Ada"], query="莉娜住在哪里", limit=10)["items"]
    said = f"User said to Ada: {TOLD}"
    assert said in [item["value"]["content"] for item in kept]
    [mine] = [item for item in kept if item["value"]["content"] == said]
    assert (mine["value"]["speaker"], mine["value"]["conversation"]) == ("User", told)
    assert mine["value"]["poignancy"] == 6 and mine["key"] in out["written"]

    asked = client.threads.create()["thread_id"]
    out = client.runs.wait(asked, "memory_agent", input=human("Where does my sister live?"))
    assert said in out["memories"]
    assert out["messages"][-1]["content"] == "你妹妹莉娜住在波尔图。"
    [answer] = [r for r in model.requests() if "Where does my sister live?" in
                json.dumps(r["messages"], ensure_ascii=False) and r["rule"] == 2]
    system = answer["messages"][0]["content"]
    assert system.startswith("You are Ada, talking with User. You have a long-term memory")
    assert f"- {said}\n" in system


def test_what_a_client_puts_the_agent_recalls(client):
    client.store.put_item(["Ada"], "tea", {"content": "Ada 最喜欢乌龙茶 (oolong tea)"})
    thread = client.threads.create()["thread_id"]
    out = client.runs.wait(thread, "memory_agent", input=human("你最喜欢什么茶？"))
    assert out["recalled"][0] == "tea"
    assert out["memories"][0] == "Ada 最喜欢乌龙茶 (oolong tea)"


def test_streams_and_background_runs_of_both_graphs(client):
    thread = client.threads.create()["thread_id"]
    events = list(client.runs.stream(thread, "memory_agent", input=human("今天天气怎么样？"),
                                     stream_mode=["values", "messages-tuple"]))
    kinds = {event.event for event in events}
    assert "error" not in kinds and {"values", "messages"} <= kinds, kinds
    run = client.runs.create(thread, "memory_agent", input=human("再说一遍"))
    client.runs.join(thread, run["run_id"])
    assert client.runs.get(thread, run["run_id"])["status"] == "success"
    reflection = client.threads.create()["thread_id"]
    run = client.runs.create(reflection, "reflection", input={"force": True})
    out = client.runs.join(reflection, run["run_id"])
    assert out["status"] == "no_insights"  # the scripted model's "好的。" gives none
    assert client.runs.get(reflection, run["run_id"])["status"] == "success"


def test_the_servers_store_keeps_ttl_and_ranks(client):
    client.store.put_item(["Ada", "notes"], "brief", {"content": "a note that expires"},
                          ttl=0.02)  # 1.2 s
    client.store.put_item(["Ada", "notes"], "kept", {"content": "Porto is by the sea 海边"})
    assert client.store.get_item(["Ada", "notes"], "brief")["value"]["content"]
    ranked = client.store.search_items(["Ada", "notes"], query="Porto by the sea")["items"]
    assert ranked[0]["key"] == "kept" and ranked[0]["score"] > ranked[-1]["score"]
    time.sleep(1.5)
    assert client.store.get_item(["Ada", "notes"], "brief") is None
    found = client.store.search_items(["Ada", "notes"], query="note")["items"]
    assert [item["key"] for item in found] == ["kept"]
    namespaces = client.store.list_namespaces(prefix=["Ada"])["namespaces"]
    assert ["Ada", "notes"] in namespaces
    client.store.delete_item(["Ada", "notes"], "kept")
    assert client.store.get_item(["Ada", "notes"], "kept") is None


@pytest.mark.parametrize(("body", "status", "reason"), [
    ({"namespace": [], "key": "k", "value": {"a": 1}}, 400, "Namespace cannot be empty"),
    ({"namespace": ["Ada"], "key": "k", "value": {"a": 1}, "ttl": 0}, 400,
     "ttl: expected None or a number of minutes > 0, got 0"),
    ({"namespace": ["Ada"], "key": "k", "value": {"a": 1}, "ttl": -5}, 400,
     "ttl: expected None or a number of minutes > 0, got -5"),
    ({"namespace": ["Ada"], "key": "k", "value": "not an object"}, 422, "is not of type"),
    (b'{"namespace": ["Ada"], "key": "k", "value": {"a": NaN}}', 422, "Invalid JSON"),
])
def test_bad_store_input_gets_a_4xx_and_the_next_request_works(server, client, body, status,
                                                                reason):
    with httpx.Client(base_url=server.url, timeout=30) as http:
        sent = (http.put("/store/items", content=body,
                         headers={"content-type": "application/json"})
                if isinstance(body, bytes) else http.put("/store/items", json=body))
        assert sent.status_code == status, sent.text
        assert reason in sent.text and "Traceback" not in sent.text
        assert http.get("/ok").status_code == 200  # the same connection still answers
    assert client.store.get_item(["Ada"], "k") is None  # nothing half-written


def test_an_unknown_config_key_is_named(client):
    thread = client.threads.create()["thread_id"]
    out = client.runs.wait(thread, "reflection", input={}, raise_error=False,
                           config={"configurable": {"persona_name": "Ada"}})
    assert out["__error__"] == {
        "error": "ValidationError",
        "message": "configurable: unknown key 'persona_name'; the graphs take persona, path, "
                   "chroma_host, chroma_port, collection, dsn, model, reflection"}
    bad = client.assistants.create("reflection", config={"configurable": {"reflection":
                                                                          {"k": 0}}})
    with pytest.raises(UnprocessableEntityError, match="k: Input should be greater"):
        client.assistants.get_schemas(bad["assistant_id"])
    client.assistants.delete(bad["assistant_id"])


def test_a_run_without_a_model_gives_the_caller_the_hint(tmp_path: Path):
    # an unreachable model's hint is checked in process (test_deployment.py): same path
    env = {"GENMEM_PATH": str(tmp_path / "store"), "GENMEM_PERSONA": "伊莎贝拉",
           "OPENAI_API_KEY": "", "OPENAI_MODEL": "", "OPENAI_BASE_URL": ""}
    with LanggraphDev(tmp_path / "server", env=env) as server:
        client = server.client()
        thread = client.threads.create()["thread_id"]
        out = client.runs.wait(thread, "memory_agent", input=human("你好"), raise_error=False)
        assert out["__error__"]["error"] == "ChatModelError"
        assert out["__error__"]["message"].startswith(NO_MODEL), out
        assert client.runs.wait(None, "reflection", input={})["status"] == "not_due"
        assert server.blocking_lines() == [], server.log()[-4000:]


def test_a_small_real_model_runs_both_graphs_and_recalls_across_threads(small_model_server,
                                                                         tmp_path: Path):
    # real, messy replies: only what the graphs guarantee is checked, never the words
    env = {"GENMEM_PATH": str(tmp_path / "store"), "GENMEM_PERSONA": "Ada",
           "OPENAI_BASE_URL": small_model_server.base_url, "OPENAI_MODEL": "smollm2",
           "OPENAI_API_KEY": ""}
    with LanggraphDev(tmp_path / "server", env=env) as server:
        client = server.client()
        small = {"configurable": {"reflection": {"limits": {"answer": 48, "ratings": 48,
                                                            "rating": 8}}}}
        told = client.threads.create()["thread_id"]
        out = client.runs.wait(told, "memory_agent", input=human(TOLD), config=small)
        assert len(out["written"]) == 2 and out["messages"][-1]["content"].strip()
        asked = client.threads.create()["thread_id"]
        out = client.runs.wait(asked, "memory_agent", config=small,
                               input=human("莉娜住在哪里？Where does Lena live?"))
        assert f"User said to Ada: {TOLD}" in out["memories"]
        sizes = {"k": 10, "n_focal_points": 1, "n_insights": 1, "max_insights": 1,
                 "max_calls": 4}
        forced = client.runs.wait(None, "reflection", input={"force": True},
                                  config={"configurable": {"reflection": sizes}})
        assert forced["status"] in {"no_questions", "no_insights", "reflected"}, forced
        assert server.blocking_lines() == [], server.log()[-4000:]
