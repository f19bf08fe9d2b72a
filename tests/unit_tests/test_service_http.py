"""`genmem serve`'s app in process (FastAPI's TestClient, no sockets): schema, keys, limits,
the PostgreSQL port's retrieval contract, writes, shutdown."""

from __future__ import annotations

import json
import typing
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from pydantic import TypeAdapter
from typer.testing import CliRunner

from langchain_genmem.cli import Store, app, options
from langchain_genmem.core import validation
from langchain_genmem.core.errors import ConfigurationError, ValidationError
from langchain_genmem.core.state import DEFAULT_LEXICAL_WEIGHT
from langchain_genmem.service import (
    ApiKey,
    KeyRing,
    check_listen,
    create_app,
    create_service,
)
from langchain_genmem.service.schemas import MAX_TOP_K, MemoryItem, RetrieveRequest
from tests.support.dify_schema import dify_problems, dify_tools

NOW = datetime(2023, 2, 14, 9, 0, 0)
ADMIN = "admin-key-0123456789abcdef"
ISABELLA_ONLY = "isabella-key-0123456789abcdef"
PERSONA = "伊莎贝拉"
OTHER = "Klaus Mueller"
SEED_NODE_FIELDS = {"id", "node_id", "type", "created_at", "last_accessed", "description",
                    "poignancy", "score", "recency", "relevance", "importance"}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store", now=NOW)


@pytest.fixture
def client(store: Store) -> Iterator[TestClient]:
    keys = KeyRing([ApiKey(ADMIN), ApiKey(ISABELLA_ONLY, frozenset({PERSONA}))])
    with TestClient(create_app(create_service(store), keys=keys)) as c:
        yield c


def add(client: TestClient, persona: str, description: str, poignancy: float, **fields):
    body = {"persona_name": persona, "description": description, "poignancy": poignancy,
            **fields}
    r = client.post("/memories", json=body, headers=bearer(ADMIN))
    assert r.status_code == 200, r.text
    return r.json()["memories"][0]


# ---------------------------------------------------------------------------- schema


def test_the_schema_follows_difys_importer_rules():
    result = CliRunner().invoke(app, ["openapi", "--public-url", "https://memory.example.org/"])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.output)
    assert dify_problems(schema) == []
    assert schema["servers"][0]["url"] == "https://memory.example.org"
    tools = dify_tools(schema)
    assert set(tools) == {"retrieve", "add_memory", "add_memories", "keyword_retrieve",
                          "reflect", "list_personas", "get_persona", "health", "forget",
                          "forget_memory", "forget_persona"}
    assert tools["retrieve"] == {
        "persona_name": "string", "focal_text": "string", "top_k": "integer",
        "recency_w": "number", "relevance_w": "number", "importance_w": "number",
        "recency_decay": "number", "recency_mode": "string",
        "relevance": "string", "lexical_weight": "number", "idle_filter": "boolean",
        "time_in_query": "string", "preset": "string",
        "created_after": "string", "created_before": "string", "types": "string",
        "min_poignancy": "number", "include_superseded": "boolean",
    }
    retrieve = schema["components"]["schemas"]["RetrieveRequest"]["properties"]
    assert retrieve["relevance"]["enum"] == ["dense", "lexical", "hybrid"]
    assert (retrieve["lexical_weight"]["minimum"], retrieve["lexical_weight"]["maximum"]) == (0, 1)
    assert tools["add_memory"]["poignancy"] == "number"
    assert (tools["add_memory"]["expires_in"], tools["add_memory"]["supersedes"]) == (
        "string", "string")
    assert tools["reflect"]["force"] == "boolean"
    assert tools["list_personas"] == {} and tools["get_persona"] == {"name": "string"}
    assert tools["forget"] == {
        "persona_name": "string", "node_ids": "string", "created_after": "string",
        "created_before": "string", "types": "string", "conversation": "string",
        "speaker": "string", "text": "string", "expired": "boolean", "keep_derived": "boolean",
        "dry_run": "boolean",
    }
    assert tools["forget_memory"] == {"name": "string", "node_id": "string",
                                      "keep_derived": "boolean"}
    assert tools["forget_persona"] == {"name": "string", "dry_run": "boolean"}


def test_the_checker_catches_what_dify_cannot_read():
    schema = create_app(create_service(Store(Path("unused")))).openapi()
    del schema["servers"]
    body = schema["components"]["schemas"]["RetrieveRequest"]["properties"]
    body["recency_w"] = {"anyOf": [{"type": "number"}, {"type": "null"}]}
    schema["paths"]["/retrieve"]["post"]["operationId"] = "retrieve_memories_retrieve_post_x" * 2
    schema["paths"]["/personas"]["get"]["parameters"] = [
        {"name": "Authorization", "in": "header", "schema": {"type": "string"}}]
    problems = "\n".join(dify_problems(schema))
    assert "servers[0].url" in problems and "'recency_w' uses anyOf" in problems
    assert "not short" in problems and "'Authorization' looks like auth" in problems


def test_docs_page_lists_every_endpoint_without_a_key_or_the_internet(client):
    r = client.get("/docs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    page = r.text
    assert "SwaggerUIBundle" in page and "url: '/openapi.json'" in page  # the interactive page
    schema = client.get("/openapi.json").json()
    listing = page.split('<div id="swagger-ui">', 1)[1].split("</div>", 1)[0]
    for path, item in schema["paths"].items():  # and the plain listing, no script needed
        for method, op in item.items():
            assert f"<code>{method.upper()} {path}</code> ({op['operationId']}, " in listing
    assert "(retrieve, needs a key)" in listing and "(health, no key needed)" in listing
    for field in ("persona_name", "focal_text", "top_k", "preset", "time_in_query"):
        assert f"<code>{field}</code>" in listing
    assert "/docs" not in schema["paths"]
    assert client.get("/redoc").status_code == 404


def test_without_public_url_the_schema_names_host_and_port():
    result = CliRunner().invoke(app, ["openapi", "--host", "::1", "--port", "9000"])
    assert json.loads(result.output)["servers"] == [{"url": "http://[::1]:9000"}]


# ---------------------------------------------------------------------------- keys


def test_keys_are_required_and_scoped(client):
    body = {"persona_name": OTHER, "focal_text": "research"}
    r = client.post("/retrieve", json=body)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert "API key" in r.json()["message"]
    assert client.post("/retrieve", json=body, headers=bearer("x" * 30)).status_code == 401
    assert client.post("/retrieve", json=body, headers=bearer(ADMIN)).status_code == 200
    assert client.post("/retrieve", json=body, headers={"X-API-Key": ADMIN}).status_code == 200
    r = client.post("/retrieve", json=body, headers=bearer(ISABELLA_ONLY))
    assert r.status_code == 403 and OTHER in r.json()["message"]
    r = client.post("/memories", headers=bearer(ISABELLA_ONLY),
                    json={"persona_name": OTHER, "description": "x", "poignancy": 1})
    assert r.status_code == 403
    assert client.get("/healthz").status_code == 200
    assert client.get("/openapi.json").status_code == 200


def test_a_key_lists_only_its_personas(client):
    add(client, PERSONA, "伊莎贝拉在霍布斯咖啡馆工作", 3)
    add(client, OTHER, "Klaus Mueller is writing a research paper", 5)
    assert client.get("/personas", headers=bearer(ADMIN)).json() == {
        "personas": sorted([OTHER, PERSONA])}
    assert client.get("/personas", headers=bearer(ISABELLA_ONLY)).json() == {
        "personas": [PERSONA]}
    assert client.get(f"/personas/{OTHER}", headers=bearer(ISABELLA_ONLY)).status_code == 403
    stats = client.get(f"/personas/{PERSONA}", headers=bearer(ISABELLA_ONLY)).json()
    assert stats["memories"] == 1 and stats["types"]["event"] == 1
    assert stats["clock"] == "2023-02-14T09:00:00Z"  # with its zone
    assert stats["settings"]["relevance_mode"] == "dense"
    assert stats["settings"]["lexical_weight"] == DEFAULT_LEXICAL_WEIGHT
    r = client.get("/personas/nobody", headers=bearer(ADMIN))
    assert r.status_code == 404 and "nobody" in r.json()["message"]


def test_without_keys_the_server_stays_on_loopback():
    for host in ("127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"):
        check_listen(host, KeyRing())
    for host in ("0.0.0.0", "::", "192.168.1.20", "example.org"):
        with pytest.raises(ConfigurationError, match="refusing to listen beyond 127.0.0.1"):
            check_listen(host, KeyRing())
        check_listen(host, KeyRing([ApiKey(ADMIN)]))
    for command in (["serve"], ["mcp", "--transport", "http"]):
        result = CliRunner().invoke(app, [*command, "--host", "0.0.0.0"])
        assert result.exit_code == 2 and "refusing to listen" in result.output


def test_weak_and_repeated_keys_are_refused(tmp_path):
    with pytest.raises(ConfigurationError, match="at least 16 characters"):
        KeyRing([ApiKey("short")])
    with pytest.raises(ConfigurationError, match="given twice"):
        KeyRing.from_options([ADMIN, ADMIN])
    bad = tmp_path / "keys.json"
    for text, field in [("{", "keys_file"), ('{"keys": []}', "keys_file"),
                        ('{"keys": [{"personas": []}]}', "keys[0].key"),
                        ('{"keys": [{"key": "k", "personas": "A"}]}', "keys[0].personas")]:
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(ValidationError) as e:
            KeyRing.from_options(keys_file=bad)
        assert e.value.field == field
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"keys": [{"key": ISABELLA_ONLY, "personas": [PERSONA]},
                                         {"key": ADMIN}]}), encoding="utf-8")
    ring = KeyRing.from_options(keys_file=good)
    assert ring.authenticate(ISABELLA_ONLY).allows(PERSONA)
    assert not ring.authenticate(ISABELLA_ONLY).allows(OTHER)
    assert ring.authenticate(ADMIN).allows(OTHER) and ring.authenticate("nope") is None


# ---------------------------------------------------------------------------- retrieval


def test_english_and_chinese_memories_come_back_with_seed_001s_fields(client):
    add(client, PERSONA, "伊莎贝拉正在筹备情人节派对", 8, created="2023-02-13 10:00:00",
        keywords="情人节, 派对")
    add(client, PERSONA, "Isabella is brewing coffee at Hobbs Cafe", 2,
        created="2023-02-13T11:00:00", subject="Isabella", predicate="brew", object="coffee")
    add(client, PERSONA, "伊莎贝拉给花浇水", 1, created="2023-02-13 12:00:00")
    r = client.post("/retrieve", headers=bearer(ISABELLA_ONLY),
                    json={"persona_name": PERSONA, "focal_text": "情人节派对", "top_k": 2})
    out = r.json()
    assert r.status_code == 200 and out["status"] == "ok"
    nodes = out["retrieved_nodes"]
    assert len(nodes) == 2 and SEED_NODE_FIELDS <= set(nodes[0])
    assert nodes[0]["description"] == "伊莎贝拉正在筹备情人节派对"
    assert nodes[0]["keywords"] == ["情人节", "派对"] and nodes[0]["id"] == nodes[0]["node_id"]
    assert all(0 <= n[c] <= 1 for n in nodes for c in ("recency", "relevance", "importance"))
    assert nodes[0]["score"] >= nodes[1]["score"]
    assert out["accessed_ids"] == [n["node_id"] for n in nodes]
    assert all(n["last_accessed"] == "2023-02-14T09:00:00Z" for n in nodes)
    assert out["debug"] == {"total_candidates": 3, "retrieved_count": 2,
                            "min_score": pytest.approx(out["debug"]["min_score"]),
                            "max_score": nodes[0]["score"]}
    assert out["debug"]["min_score"] <= nodes[1]["score"]

    english = client.post("/retrieve", headers=bearer(ADMIN), json={
        "persona_name": PERSONA, "focal_text": "coffee at the cafe", "top_k": 1,
        "recency_w": 0, "importance_w": 0, "relevance_w": 1, "recency_mode": "rank",
        "recency_decay": None}).json()
    assert english["retrieved_nodes"][0]["subject"] == "Isabella"


def test_relevance_signal_lexical_weight_and_idle_filter_pass_through(client):
    add(client, PERSONA, "伊莎贝拉在学习量子物理", 3, created="2023-02-13 10:00:00")
    add(client, PERSONA, "伊莎贝拉在霍布斯咖啡馆煮咖啡", 3, created="2023-02-13 11:00:00")
    add(client, PERSONA, "the idle espresso machine 闲置的咖啡机", 3,
        created="2023-02-13 12:00:00")

    def nodes(**change) -> list[dict]:
        r = client.post("/retrieve", headers=bearer(ADMIN), json={
            "persona_name": PERSONA, "focal_text": "量子物理", "recency_w": 0,
            "importance_w": 0, **change})
        assert r.status_code == 200, r.text
        return r.json()["retrieved_nodes"]

    lexical = nodes(relevance="lexical")
    assert lexical[0]["description"] == "伊莎贝拉在学习量子物理"
    assert all(n["relevance"] == pytest.approx(n["lexical"]) for n in lexical)
    assert lexical[0]["bm25"] > 0 and lexical[0]["cosine"] is None  # no query embedding
    dense = nodes(relevance="dense")
    assert all(n["relevance"] == pytest.approx(n["dense"]) for n in dense)
    for weight, part in ((1, "lexical"), (0, "dense")):  # the ends of the hybrid
        hybrid = nodes(relevance="hybrid", lexical_weight=weight)
        assert [n["relevance"] for n in hybrid] == pytest.approx([n[part] for n in hybrid])
        assert all(-1 <= n["cosine"] <= 1 and n["bm25"] >= 0 for n in hybrid)
    assert len(nodes()) == 2  # the original's idle filter, on by default
    kept = nodes(idle_filter=False)
    assert len(kept) == 3
    assert "the idle espresso machine 闲置的咖啡机" in {n["description"] for n in kept}
    # null is the persona's setting, as for the weights
    assert [n["node_id"] for n in nodes(relevance=None, lexical_weight=None)] == [
        n["node_id"] for n in nodes()]


def test_retrieval_time_and_kind_filters_at_day_boundaries(client):
    add(client, PERSONA, "深夜的派对筹备 late party planning", 4, created="2023-02-12 23:59:59")
    add(client, PERSONA, "午夜的派对 midnight party", 6, created="2023-02-13 00:00:00")
    add(client, PERSONA, "派对很成功 the party went well", 9, created="2023-02-13 23:59:59",
        type="thought")

    def found(**filters) -> tuple[list[str], str]:
        r = client.post("/retrieve", headers=bearer(ADMIN), json={
            "persona_name": PERSONA, "focal_text": "派对 party", **filters})
        assert r.status_code == 200, r.text
        out = r.json()
        return [n["description"] for n in out["retrieved_nodes"]], out["message"]

    day, message = found(created_after="2023-02-13", created_before="2023-02-14T00:00:00")
    assert set(day) == {"午夜的派对 midnight party", "派对很成功 the party went well"}
    assert message == "2 of 2 memories (1 left out by the filter)"
    assert found(created_before="2023-02-13")[0] == ["深夜的派对筹备 late party planning"]
    assert found(types="thought")[0] == ["派对很成功 the party went well"]
    assert set(found(types="event, thought", min_poignancy=5)[0]) == set(day)
    none, why = found(created_after="2023-02-14")
    assert none == [] and why.endswith("(3 left out by the filter)")


@pytest.mark.parametrize(("change", "field"), [
    ({"created_after": "tomorrow"}, "created_after"),
    ({"created_after": "2023-02-14", "created_before": "2023-02-13"}, "created_before"),
    ({"types": "event,dream"}, "types"),
    ({"min_poignancy": "high"}, "min_poignancy"),
])
def test_bad_retrieval_filters_are_422_naming_the_field(client, change, field):
    body = {"persona_name": PERSONA, "focal_text": "派对", **change}
    add(client, PERSONA, "派对", 3)
    r = client.post("/retrieve", json=body, headers=bearer(ADMIN))
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field and r.json()["message"].startswith(f"{field}: ")


def test_an_unknown_or_empty_persona_is_no_candidates(client):
    r = client.post("/retrieve", headers=bearer(ADMIN),
                    json={"persona_name": "nobody", "focal_text": "anything"})
    assert r.status_code == 200
    out = r.json()
    assert out["status"] == "no_candidates" and out["retrieved_nodes"] == []
    assert out["debug"] == {"total_candidates": 0, "retrieved_count": 0, "min_score": 0.0,
                            "max_score": 0.0}
    add(client, "chatty", "a chat about the party", 3, type="chat")  # chats are no candidates
    out = client.post("/retrieve", headers=bearer(ADMIN),
                      json={"persona_name": "chatty", "focal_text": "party"}).json()
    assert out["status"] == "no_candidates" and "chatty" in out["message"]
    assert client.get("/personas", headers=bearer(ADMIN)).json()["personas"] == ["chatty"]


@pytest.mark.parametrize(("change", "field"), [
    ({"top_k": -1}, "top_k"),
    ({"top_k": MAX_TOP_K + 1}, "top_k"),
    ({"top_k": "many"}, "top_k"),
    ({"focal_text": ""}, "focal_text"),
    ({"focal_text": "   "}, "focal_text"),
    ({"focal_text": "x" * 4001}, "focal_text"),
    ({"persona_name": "p" * 201}, "persona_name"),
    ({"recency_w": -1}, "recency_w"),
    ({"recency_decay": 0}, "recency_decay"),
    ({"recency_mode": "days"}, "recency_mode"),
    ({"relevance": "sparse"}, "relevance"),
    ({"relevance": 1}, "relevance"),
    ({"lexical_weight": 1.5}, "lexical_weight"),
    ({"lexical_weight": -0.1}, "lexical_weight"),
    ({"lexical_weight": "half"}, "lexical_weight"),
    ({"idle_filter": "maybe"}, "idle_filter"),
    ({"api_key": ADMIN}, "api_key"),
])
def test_bad_retrieval_input_is_422_naming_the_field(client, change, field):
    body = {"persona_name": PERSONA, "focal_text": "派对", **change}
    r = client.post("/retrieve", json=body, headers=bearer(ADMIN))
    assert r.status_code == 422
    assert r.json()["field"] == field and r.json()["message"].startswith(f"{field}: ")


def test_a_body_that_is_not_json_is_422_on_the_body(client):
    r = client.post("/retrieve", content=b'{"persona_name": ', headers={
        **bearer(ADMIN), "content-type": "application/json"})
    assert r.status_code == 422 and r.json()["field"] == "body"
    assert r.json()["message"] == "body: JSON decode error"


def test_a_body_over_the_limit_is_413(store):
    small = create_app(create_service(store), max_body_bytes=200)
    with TestClient(small) as c:
        r = c.post("/retrieve", json={"persona_name": PERSONA, "focal_text": "长" * 100})
        assert r.status_code == 413 and "200 bytes" in r.json()["message"]

        def chunks():
            yield b'{"persona_name": "a", "focal_text": "'
            yield b"x" * 300
            yield b'"}'

        r = c.post("/retrieve", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413


# ---------------------------------------------------------------------------- writes


def test_a_batch_given_as_json_text_is_read_as_its_array(client):
    memories = [{"description": "伊莎贝拉在霍布斯咖啡馆煮咖啡", "poignancy": 3,
                 "keywords": "咖啡，咖啡馆"},
                {"type": "thought", "description": "伊莎贝拉喜欢她的咖啡馆", "poignancy": 6,
                 "evidence": "node_1"}]
    as_text = json.dumps(memories, ensure_ascii=False)  # what a tool passing strings sends
    r = client.post("/memories/batch", headers=bearer(ADMIN),
                    json={"persona_name": PERSONA, "memories": as_text})
    assert r.status_code == 200, r.text
    stored = r.json()["memories"]
    assert [m["description"] for m in stored] == [m["description"] for m in memories]
    assert stored[0]["keywords"] == ["咖啡", "咖啡馆"] and stored[1]["evidence"] == ["node_1"]
    for bad in ('[{"description": "伊莎贝拉"', "伊莎贝拉", '{"description": "伊莎贝拉"}', "[]"):
        r = client.post("/memories/batch", headers=bearer(ADMIN),
                        json={"persona_name": PERSONA, "memories": bad})
        assert r.status_code == 422 and r.json()["field"] == "memories", (bad, r.text)
    r = client.post("/memories/batch", headers=bearer(ADMIN), json={
        "persona_name": PERSONA, "memories": json.dumps([{"description": "x", "poignancy": 11}])})
    assert r.status_code == 422 and r.json()["field"] == "memories.0.poignancy"
    assert client.get(f"/personas/{PERSONA}", headers=bearer(ADMIN)).json()["memories"] == 2


def test_k_has_one_rule_everywhere(client):
    add(client, PERSONA, "伊莎贝拉在霍布斯咖啡馆煮咖啡", 3)
    schema = client.get("/openapi.json").json()["components"]["schemas"]
    assert schema["RetrieveRequest"]["properties"]["top_k"]["minimum"] == validation.K_MIN
    assert schema["KeywordRequest"]["properties"]["limit"]["minimum"] == validation.K_MIN
    assert validation.top_k(validation.K_MIN) == 0  # the library's rule: k >= 0
    out = client.post("/retrieve", headers=bearer(ADMIN), json={
        "persona_name": PERSONA, "focal_text": "咖啡", "top_k": 0}).json()
    assert out["status"] == "ok" and out["retrieved_nodes"] == [] and out["accessed_ids"] == []
    out = client.post("/keyword-retrieve", headers=bearer(ADMIN), json={
        "persona_name": PERSONA, "subject": "伊莎贝拉", "limit": 0}).json()
    assert out["status"] == "ok" and out["events"] == []
    r = client.post("/retrieve", headers=bearer(ADMIN), json={
        "persona_name": PERSONA, "focal_text": "咖啡", "top_k": -1})
    assert r.status_code == 422 and r.json()["field"] == "top_k"
    assert typing.get_args(options.K)[1].min == validation.K_MIN  # the command line's -k
    from langchain_genmem.operations.derive import parameters
    from langchain_genmem.service import mcp

    k = next(p for p in parameters(RetrieveRequest, mcp.RECALL) if p.name == "k")
    assert TypeAdapter(k.annotation).json_schema()["minimum"] == validation.K_MIN


def test_a_batch_is_written_all_or_nothing(client):
    first = add(client, PERSONA, "伊莎贝拉开了咖啡馆", 4)
    batch = [{"description": "伊莎贝拉邀请了玛丽亚", "poignancy": 5},
             {"type": "thought", "description": "伊莎贝拉喜欢社交", "poignancy": 6,
              "evidence": f"{first['node_id']}，node_2"},
             {"type": "thought", "description": "cites the future", "poignancy": 6,
              "evidence": "node_99"}]
    r = client.post("/memories/batch", headers=bearer(ADMIN),
                    json={"persona_name": PERSONA, "memories": batch})
    assert r.status_code == 422 and "node_99" in r.json()["message"]
    assert client.get(f"/personas/{PERSONA}", headers=bearer(ADMIN)).json()["memories"] == 1

    r = client.post("/memories/batch", headers=bearer(ADMIN),
                    json={"persona_name": PERSONA, "memories": batch[:2]})
    out = r.json()
    assert r.status_code == 200 and out["count"] == 2
    thought = out["memories"][1]
    assert thought["evidence"] == ["node_1", "node_2"] and thought["depth"] == 1
    r = client.post("/memories/batch", headers=bearer(ADMIN),
                    json={"persona_name": PERSONA, "memories": []})
    assert r.status_code == 422 and r.json()["field"] == "memories"
    r = client.post("/memories/batch", headers=bearer(ADMIN), json={
        "persona_name": PERSONA, "memories": [{"description": "x", "poignancy": 1}] * 501})
    assert r.status_code == 422 and r.json()["field"] == "memories"


@pytest.mark.parametrize(("change", "field"), [
    ({"poignancy": 11}, "poignancy"),
    ({"type": "dream"}, "type"),
    ({"description": " "}, "description"),
    ({"created": "yesterday"}, "created"),
    ({"subject": "s" * 501}, "subject"),
])
def test_bad_memory_input_is_422_naming_the_field(client, change, field):
    body = {"persona_name": PERSONA, "description": "记忆", "poignancy": 3, **change}
    r = client.post("/memories", json=body, headers=bearer(ADMIN))
    assert r.status_code == 422 and r.json()["field"] == field, r.json()


def test_without_a_chat_model_poignancy_is_required_and_reflect_is_503(client):
    r = client.post("/memories", headers=bearer(ADMIN),
                    json={"persona_name": PERSONA, "description": "记忆", "poignancy": None})
    assert r.status_code == 422 and r.json()["field"] == "poignancy"
    assert "no chat model" in r.json()["message"]
    add(client, PERSONA, "伊莎贝拉在看书", 3)
    r = client.post("/reflect", headers=bearer(ADMIN), json={"persona_name": PERSONA})
    assert r.status_code == 503 and "OPENAI_API_KEY" in r.json()["message"]


def test_one_reflection_per_persona_at_a_time(store):
    from langchain_core.language_models import FakeListChatModel

    service = create_service(store, model=FakeListChatModel(responses=["1. 问题"]))
    with TestClient(create_app(service)) as c:
        c.post("/memories", json={"persona_name": PERSONA, "description": "记忆", "poignancy": 2})
        lock = service.streams.reflection_lock(PERSONA)
        with lock:  # a reflection of this persona is running
            r = c.post("/reflect", json={"persona_name": PERSONA, "force": True})
        assert r.status_code == 409 and "already running" in r.json()["message"]
        out = c.post("/reflect", json={"persona_name": PERSONA}).json()
        assert out["status"] == "not_due" and out["llm_calls"] == 0
        assert not lock.locked()


def test_a_reflection_that_writes_nothing_says_why(store):
    from langchain_core.language_models import FakeListChatModel

    # no question can be read in the reply: nothing is written, and the response says why
    service = create_service(store, model=FakeListChatModel(responses=["……"]))
    with TestClient(create_app(service)) as c:
        c.post("/memories", json={"persona_name": PERSONA, "description": "伊莎贝拉在看书",
                                  "poignancy": 2})
        out = c.post("/reflect", json={"persona_name": PERSONA, "force": True}).json()
    assert out["status"] == "no_questions" and out["thoughts"] == []
    assert out["reasons"] and all(isinstance(r, str) and r for r in out["reasons"])
    assert out["reasons"][0].startswith("focal_points: ")


def test_keyword_retrieval_finds_chinese_keywords(client):
    add(client, PERSONA, "伊莎贝拉在咖啡馆筹备派对", 5, subject="伊莎贝拉", predicate="筹备",
        object="派对")
    add(client, PERSONA, "伊莎贝拉在浇花", 1, subject="伊莎贝拉", predicate="浇", object="花")
    out = client.post("/keyword-retrieve", headers=bearer(ADMIN), json={
        "persona_name": PERSONA, "subject": "某人", "predicate": "", "object": "派对"}).json()
    assert out["status"] == "ok" and out["event_count"] == 1
    assert out["events"][0]["description"] == "伊莎贝拉在咖啡馆筹备派对"
    out = client.post("/keyword-retrieve", headers=bearer(ADMIN), json={
        "persona_name": "nobody", "subject": "x"}).json()
    assert out["status"] == "no_candidates"


# ---------------------------------------------------------------------------- threads, shutdown


def test_interleaved_writes_and_retrievals_lose_and_repeat_nothing(store):
    service = create_service(store)
    writes, readers = 40, 4

    def write(i: int) -> str:
        memory = MemoryItem(description=f"第{i}件事: event number {i}", poignancy=1 + i % 10)
        return service.add(PERSONA, [memory]).memories[0].node_id

    def read(i: int) -> str:
        out = service.retrieve(RetrieveRequest(persona_name=PERSONA, focal_text=f"event {i}",
                                               top_k=5))
        assert out.status in ("ok", "no_candidates")
        assert len(set(out.accessed_ids)) == len(out.accessed_ids)
        return out.status

    with ThreadPoolExecutor(max_workers=8) as pool:
        jobs = [pool.submit(write, i) for i in range(writes)]
        jobs += [pool.submit(read, i) for i in range(writes * readers // 4)]
        results = [j.result() for j in jobs]
    ids = results[:writes]
    assert sorted(ids, key=lambda x: int(x[5:])) == [f"node_{n}" for n in range(1, writes + 1)]
    service.close()
    reopened = Store(store.path).open(PERSONA)
    assert len(reopened) == writes
    assert sorted(n.description for n in reopened.nodes()) == sorted(
        f"第{i}件事: event number {i}" for i in range(writes))


def test_shutdown_flushes_access_times(store):
    app_ = create_app(create_service(store))
    with TestClient(app_) as c:
        c.post("/memories", json={"persona_name": PERSONA, "description": "记得", "poignancy": 2,
                                  "created": "2023-02-13 08:00:00"})
        with app_.state.service.streams.writing(PERSONA) as stream:
            stream.flush_interval = 3600  # no timer flush
        out = c.post("/retrieve", json={"persona_name": PERSONA, "focal_text": "记得"}).json()
        assert out["accessed_ids"] == ["node_1"]
        stored = Store(store.path).backend().read_nodes(PERSONA, 1, 1)[0].node
        assert stored.last_accessed == datetime(2023, 2, 13, 8)  # not written yet
    stored = Store(store.path).backend().read_nodes(PERSONA, 1, 1)[0].node
    assert stored.last_accessed == NOW


# ---------------------------------------------------------------------------- edges


@pytest.mark.parametrize("name", ["a/b", "伊莎贝拉/日记", "玛丽亚 洛佩兹", "50% sure"])
def test_every_persona_name_a_write_takes_is_reachable_by_get(client, name):
    add(client, name, f"{name} 在咖啡馆", 3)
    quoted = quote(name, safe="")
    r = client.get(f"/personas/{quoted}", headers=bearer(ADMIN))
    assert r.status_code == 200, r.text
    assert r.json()["persona"] == name and r.json()["memories"] == 1
    assert name in client.get("/personas", headers=bearer(ADMIN)).json()["personas"]


def test_times_come_back_with_their_zone_and_the_same_instant(client):
    node = add(client, PERSONA, "伊莎贝拉在德里喝茶", 3, created="2023-02-13T10:00:00+05:00")
    assert node["created"] == "2023-02-13T05:00:00Z"  # the instant, in UTC, zone shown
    naive = add(client, PERSONA, "伊莎贝拉在浇花", 1, created="2023-02-13 08:00:00")
    assert naive["created"] == "2023-02-13T08:00:00Z"  # a time without zone is taken as UTC
    out = client.post("/retrieve", headers=bearer(ADMIN),
                      json={"persona_name": PERSONA, "focal_text": "喝茶", "top_k": 2}).json()
    for found in out["retrieved_nodes"]:
        for key in ("created_at", "last_accessed"):
            assert datetime.fromisoformat(found[key]).tzinfo is not None


def test_every_status_the_service_answers_is_declared(client):
    paths = client.get("/openapi.json").json()["paths"]
    declared = {(path, method): set(op["responses"]) for path, ops in paths.items()
                for method, op in ops.items()}
    for (path, _method), codes in declared.items():
        if path != "/healthz":
            assert {"401", "403", "413", "422", "503"} <= codes, path
    assert "404" in declared[("/personas/{name}", "get")]
    assert "404" in declared[("/personas/{name}", "delete")]
    assert "404" in declared[("/personas/{name}/memories/{node_id}", "delete")]
    assert "404" in declared[("/forget", "post")]
    assert {"409", "502"} <= declared[("/reflect", "post")]
    # and the answers really are among them
    assert client.get("/personas/nobody", headers=bearer(ADMIN)).status_code == 404
    assert client.delete("/personas/nobody", headers=bearer(ADMIN)).status_code == 404


def test_the_conversation_preset_ranks_as_the_chat_agent_and_fields_given_win(client):
    add(client, PERSONA, "伊莎贝拉上周日去爬山了", 2, created="2023-02-12 10:00:00")
    add(client, PERSONA, "伊莎贝拉在霍布斯咖啡馆煮咖啡", 9, created="2023-02-13 11:00:00")
    add(client, PERSONA, "the idle hiking boots 闲置的登山鞋", 3, created="2023-02-13 12:00:00")

    def nodes(**change) -> list[dict]:
        r = client.post("/retrieve", headers=bearer(ADMIN), json={
            "persona_name": PERSONA, "focal_text": "爬山 hiking", **change})
        assert r.status_code == 200, r.text
        return r.json()["retrieved_nodes"]

    chat = nodes(preset="conversation")
    assert len(chat) == 3  # idle memories kept
    assert all(n["score"] == pytest.approx(n["relevance"] * chat[0]["score"]
                                           / chat[0]["relevance"]) for n in chat)  # relevance only
    assert len(nodes()) == 2  # the simulation preset keeps the original's idle filter
    assert len(nodes(preset="conversation", idle_filter=True)) == 2  # a field given wins
    bad = client.post("/retrieve", headers=bearer(ADMIN), json={
        "persona_name": PERSONA, "focal_text": "x", "preset": "chat"})
    assert bad.status_code == 422 and "preset" in bad.text


def test_an_unexpected_failure_is_a_500_in_the_one_error_shape_with_its_traceback_logged(
    store, monkeypatch, caplog,
):
    from langchain_genmem.service.operations import MemoryService

    def broken(self, request):
        raise IndexError("index 2011 is out of bounds for axis 0 with size 2008")

    monkeypatch.setattr(MemoryService, "retrieve", broken)
    app = create_app(create_service(store), keys=KeyRing([ApiKey(ADMIN)]))
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.post("/retrieve", headers=bearer(ADMIN),
                   json={"persona_name": "玛丽亚", "focal_text": "咖啡"})
    assert r.status_code == 500
    assert r.json() == {"status": "error", "field": None,
                        "message": "internal error: the server failed this request (see its log)"}
    assert "2011" not in r.text  # nothing of the failure's own text reaches the client
    logged = [rec for rec in caplog.records if rec.levelname == "ERROR" and rec.exc_info]
    assert logged and "POST /retrieve failed" in logged[0].getMessage()
