"""Dates at the edge of Python's calendar get a one-line 4xx or are read as they should be,
never a 500: the service's examples of a fuzzing run, and the library calls under them."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from fastapi.testclient import TestClient

from langchain_genmem.cli import Store
from langchain_genmem.core.errors import ValidationError
from langchain_genmem.core.timeutil import naive, to_epoch
from langchain_genmem.memory.expiry import expiration_of
from langchain_genmem.retrieval.time_window import CALENDAR_END, find_time_window
from langchain_genmem.service import create_app, create_service

NOW = datetime(2023, 2, 14, 9, 0, 0)
PERSONA = "伊莎贝拉"


@pytest.fixture
def client(tmp_path):
    service = create_service(Store(tmp_path / "store", now=NOW))
    with TestClient(create_app(service), raise_server_exceptions=False) as c:
        r = c.post("/memories", json={"persona_name": PERSONA, "poignancy": 4,
                                      "description": "伊莎贝拉在咖啡馆筹备情人节派对"})
        assert r.status_code == 200, r.text
        yield c


@pytest.mark.parametrize("focal", ["9999-12-31", "December 9999", "0001-01-01",
                                   "9999年12月", "on 31 December 9999"])
def test_a_focal_text_naming_the_calendars_edge_retrieves(client, focal):
    r = client.post("/retrieve", json={"persona_name": PERSONA, "focal_text": focal,
                                       "preset": "conversation"})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("path", ["/retrieve", "/forget"])
@pytest.mark.parametrize("when", ["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59"])
def test_a_bound_past_the_calendar_is_a_422_naming_it(client, path, when):
    body = {"persona_name": PERSONA, "created_after": when}
    if path == "/retrieve":
        body["focal_text"] = "派对"
    else:
        body["dry_run"] = True
    r = client.post(path, json=body)
    assert r.status_code == 422, r.text
    message = r.json()["message"]
    assert "created_after: " in message and "outside the calendar" in message
    assert "\n" not in message and r.json()["field"] == "created_after"


@pytest.mark.parametrize(("extra", "field"), [
    ({"created": "0001-01-01T00:00:00+23:59"}, "created"),
    ({"created": "9999-12-31T00:00:00", "expires_in": "30d"}, "expires_in"),
    ({"created": "9999-12-31T23:59:59-23:59"}, "created"),
])
def test_a_memory_past_the_calendar_is_a_422_and_nothing_is_stored(client, extra, field):
    r = client.post("/memories", json={"persona_name": PERSONA, "poignancy": 3,
                                       "description": "边界 edge", **extra})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field, r.text
    assert client.get(f"/personas/{PERSONA}").json()["memories"] == 1


def test_the_library_under_them():
    edge = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone(-timedelta(hours=23, minutes=59)))
    assert to_epoch(edge) == to_epoch(datetime(9999, 12, 31, 23, 59, 59)) + 86340
    with pytest.raises(ValidationError, match="outside the calendar"):
        naive(edge)
    with pytest.raises(ValidationError, match="^expires_in: "):
        expiration_of(datetime(9999, 12, 31), None, timedelta(days=30))
    assert find_time_window("what happened in December 9999?", NOW) is not None
    assert find_time_window("9999-12-31", NOW).end == CALENDAR_END
