"""The schema states the rules the server enforces: for each stated pattern, the server
accepts what matches it and refuses what does not, so a client built from the schema is
never surprised by a 422 it could not foresee."""

from __future__ import annotations

import re
from datetime import datetime

import pytest
from fastapi.testclient import TestClient

from langchain_genmem.cli import Store
from langchain_genmem.service import create_app, create_service
from langchain_genmem.service.schemas import (
    DURATION_PATTERN,
    NAME_PATTERN,
    NO_NUL_PATTERN,
    NODE_IDS_PATTERN,
    NOT_BLANK_PATTERN,
    TYPES_PATTERN,
)

PERSONA = "伊莎贝拉"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("rules") / "store", now=datetime(2024, 3, 1, 9))
    with TestClient(create_app(create_service(store))) as c:
        for text in ("伊莎贝拉在咖啡馆", "伊莎贝拉在筹备派对", "伊莎贝拉想到了派对"):
            assert c.post("/memories", json={"persona_name": PERSONA, "description": text,
                                             "poignancy": 4}).status_code == 200
        yield c


def test_the_schema_states_the_rules(client):
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    memory, forget = schemas["MemoryRequest"]["properties"], schemas["ForgetRequest"]["properties"]
    retrieve = schemas["RetrieveRequest"]["properties"]
    assert memory["persona_name"]["pattern"] == NAME_PATTERN
    assert memory["conversation"]["pattern"] == memory["speaker"]["pattern"] == NAME_PATTERN
    assert memory["supersedes"]["pattern"] == memory["evidence"]["pattern"] == NODE_IDS_PATTERN
    assert memory["expires_in"]["pattern"] == DURATION_PATTERN
    assert memory["description"]["pattern"] == retrieve["focal_text"]["pattern"] == \
        forget["text"]["pattern"] == NOT_BLANK_PATTERN
    assert memory["subject"]["pattern"] == memory["keywords"]["pattern"] == NO_NUL_PATTERN
    assert forget["node_ids"]["pattern"] == NODE_IDS_PATTERN
    assert forget["types"]["pattern"] == retrieve["types"]["pattern"] == TYPES_PATTERN
    assert "required when the server has no chat model" in memory["poignancy"]["description"]
    assert "after created_after" in forget["created_before"]["description"]
    assert "must come after created_after" in retrieve["created_before"]["description"]


def matches(pattern: str, value: str) -> bool:
    return re.search(pattern, value) is not None


@pytest.mark.parametrize("name", ["伊莎贝拉", "Maria Lopez", "玛丽亚 Lopez", "a\u2028b",
                                  " ", "", "a\tb", "a\x00b", "a\x85b", "  x  "])
def test_a_name_is_refused_exactly_when_the_pattern_says(client, name):
    said = matches(NAME_PATTERN, name)
    r = client.post("/memories", json={"persona_name": name, "description": "规则",
                                       "poignancy": 3})
    assert (r.status_code == 200) == said, (name, r.text)
    r = client.post("/memories", json={"persona_name": PERSONA, "description": "轮次",
                                       "poignancy": 3, "conversation": name or "x",
                                       "speaker": name})
    assert (r.status_code == 200) == said, (name, r.text)


@pytest.mark.parametrize("ids", ["node_1", "node_1, node_2", "node_1，node_2", "node_1;node_3",
                                 " node_2 ", "node_1,,node_2", "node_0", "node_01", "node 1",
                                 "node_1 node_2", "1", "node_x"])
def test_node_ids_are_refused_exactly_when_the_pattern_says(client, ids):
    said = matches(NODE_IDS_PATTERN, ids)
    r = client.post("/forget", json={"persona_name": PERSONA, "node_ids": ids,
                                     "dry_run": True})
    assert (r.status_code == 200) == said, (ids, r.text)


@pytest.mark.parametrize("types", ["event", "event,thought", "chat、event", " thought ",
                                   "Event", "events", "event thought", ""])
def test_types_are_refused_exactly_when_the_pattern_says(client, types):
    said = matches(TYPES_PATTERN, types)
    r = client.post("/forget", json={"persona_name": PERSONA, "types": types, "dry_run": True})
    assert (r.status_code == 200) == said, (types, r.text)


@pytest.mark.parametrize("text", ["30d", "1d12h", " 2h ", "3600", "0.5", " ", "", "0", "0d",
                                  "1e3", "inf", "一周", "١٢h", "30d\n"])
def test_expires_in_is_refused_exactly_when_the_pattern_says(client, text):
    said = matches(DURATION_PATTERN, text)
    r = client.post("/memories", json={"persona_name": PERSONA, "description": "到期",
                                       "poignancy": 3, "expires_in": text})
    assert (r.status_code == 200) == said, (text, r.text)


@pytest.mark.parametrize("text", ["咖啡", " 咖啡 ", " ", "\u3000", "\x1c", "a\x00b"])
def test_free_texts_are_refused_exactly_when_the_pattern_says(client, text):
    said = matches(NOT_BLANK_PATTERN, text)
    for path, body in (("/memories", {"persona_name": PERSONA, "description": text,
                                      "poignancy": 3}),
                       ("/retrieve", {"persona_name": PERSONA, "focal_text": text}),
                       ("/forget", {"persona_name": PERSONA, "text": text, "dry_run": True})):
        r = client.post(path, json=body)
        assert (r.status_code == 200) == said, (path, text, r.text)
    if "\x00" in text:
        assert "must not hold the control character NUL" in r.json()["message"]


@pytest.mark.parametrize(("method", "path"), [("GET", "/retrieve"), ("OPTIONS", "/personas/x"),
                                              ("PATCH", "/personas/伊莎贝拉/memories/node_1")])
def test_a_method_not_served_lists_every_method_the_path_has(client, method, path):
    r = client.request(method, path)
    allowed = "POST" if path == "/retrieve" else "DELETE, GET"  # {name:path} takes a/b too
    assert r.status_code == 405 and r.headers["allow"] == allowed
    assert r.json()["message"].endswith(f"allowed: {allowed}")


def test_a_body_that_is_not_text_is_a_422_naming_the_body(client):
    r = client.post("/retrieve", content=b"\xff\xfe{", headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["field"] == "body"
