"""The service reads a client's input as written: no boolean taken for a number or a number
for a boolean, and no batch that would keep the server embedding for minutes."""

from __future__ import annotations

from datetime import datetime

import pytest
from fastapi.testclient import TestClient

from langchain_genmem.cli import Store
from langchain_genmem.service import create_app, create_service
from langchain_genmem.service.schemas import LIMITS, MAX_BATCH_CHARS, MAX_TEXT_CHARS

PERSONA = "玛丽亚"


@pytest.fixture
def client(tmp_path):
    service = create_service(Store(tmp_path / "store", now=datetime(2024, 3, 1, 9)))
    with TestClient(create_app(service)) as c:
        assert c.post("/memories", json={"persona_name": PERSONA, "poignancy": 4,
                                         "description": "玛丽亚在图书馆学物理"}).status_code == 200
        yield c


@pytest.mark.parametrize(("path", "body", "field", "message"), [
    ("/keyword-retrieve", {"subject": "玛丽亚", "limit": False}, "limit",
     "limit: expected a number, got false"),
    ("/retrieve", {"focal_text": "物理", "include_superseded": 0}, "include_superseded",
     "include_superseded: expected true or false, got 0"),
    ("/retrieve", {"focal_text": "物理", "top_k": True}, "top_k",
     "top_k: expected a number, got true"),
    ("/retrieve", {"focal_text": "物理", "idle_filter": "yes"}, "idle_filter",
     'idle_filter: expected true or false, got "yes"'),
    ("/memories", {"description": "真", "poignancy": True}, "poignancy",
     "poignancy: expected a number, got true"),
])
def test_a_boolean_is_no_number_and_a_number_no_boolean(client, path, body, field, message):
    r = client.post(path, json={"persona_name": PERSONA, **body})
    assert r.status_code == 422, r.text
    assert (r.json()["field"], r.json()["message"]) == (field, message)


def test_numbers_and_booleans_as_written_still_pass(client):
    r = client.post("/retrieve", json={"persona_name": PERSONA, "focal_text": "物理",
                                       "top_k": 3, "recency_w": 1, "include_superseded": False})
    assert r.status_code == 200, r.text


def test_a_batch_embeds_a_bounded_text_and_the_bound_is_shown(client):
    assert LIMITS["description characters per batch"] == MAX_BATCH_CHARS
    assert client.get("/healthz").json()["limits"]["description characters per batch"] == \
        MAX_BATCH_CHARS
    many = MAX_BATCH_CHARS // MAX_TEXT_CHARS + 1
    r = client.post("/memories/batch", json={"persona_name": "新人", "memories": [
        {"description": "长" * MAX_TEXT_CHARS, "poignancy": 3}] * many})
    assert r.status_code == 422 and r.json()["field"] == "memories", r.text
    assert "a batch embeds at most 100,000" in r.json()["message"]
    assert "新人" not in client.get("/personas").json()["personas"]
    fits = client.post("/memories/batch", json={"persona_name": "新人", "memories": [
        {"description": "短" * 100, "poignancy": 3}] * 500})
    assert fits.status_code == 200, fits.text
