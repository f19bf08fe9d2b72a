"""Expiry and corrections through `genmem serve`'s app in process (FastAPI's TestClient, no
sockets): `expires_in` and `supersedes` on POST /memories and the batch, /retrieve's
`include_superseded`, POST /forget with `expired`, the periodic sweep of open personas, and
the MCP tools' fields."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from langchain_genmem.cli import Store
from langchain_genmem.service import ApiKey, KeyRing, create_app, create_service, mcp
from langchain_genmem.service.expiry import ExpirySweeper
from langchain_genmem.service.operations import MemoryService
from tests.unit_tests.test_service_http import ADMIN, NOW, PERSONA, bearer

OLD_HOME = "伊莎贝拉住在北京"
NEW_HOME = "伊莎贝拉搬到了上海"


@pytest.fixture
def service(tmp_path: Path) -> MemoryService:
    return create_service(Store(tmp_path / "store", now=NOW))


@pytest.fixture
def client(service: MemoryService) -> Iterator[TestClient]:
    with TestClient(create_app(service, keys=KeyRing([ApiKey(ADMIN)]))) as c:
        yield c


def post(client: TestClient, path: str, body: dict, status: int = 200) -> dict:
    r = client.post(path, headers=bearer(ADMIN), json={"persona_name": PERSONA, **body})
    assert r.status_code == status, r.text
    return r.json()


def found(client: TestClient, focal: str, **fields: object) -> list[str]:
    out = post(client, "/retrieve", {"focal_text": focal, "top_k": 50,
                                     "types": "event,thought,chat", **fields})
    return [n["description"] for n in out["retrieved_nodes"]]


def test_memories_take_expires_in_as_seconds_or_a_duration(client) -> None:
    one = post(client, "/memories", {"description": "伊莎贝拉今天值班", "poignancy": 3,
                                     "expires_in": 3600})
    batch = post(client, "/memories/batch", {"memories": [
        {"description": "伊莎贝拉的考试在周五", "poignancy": 5, "expires_in": "2d"},
        {"description": "Isabella parks on level 3", "poignancy": 2, "expires_in": "90m",
         "created": (NOW - timedelta(hours=1)).isoformat()},
    ]})
    expirations = [one["memories"][0]["expiration"],
                   *(m["expiration"] for m in batch["memories"])]
    assert expirations == [(NOW + timedelta(hours=1)).isoformat() + "Z",
                           (NOW + timedelta(days=2)).isoformat() + "Z",
                           (NOW + timedelta(minutes=30)).isoformat() + "Z"]


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"expires_in": "一周"}, "expires_in", "positive number of seconds or a duration"),
    ({"expires_in": -3}, "expires_in", "positive number of seconds or a duration"),
    ({"expires_in": 60, "expiration": NOW.isoformat()}, "expires_in",
     "give expiration or expires_in, not both"),
    ({"supersedes": "node_9"}, "supersedes", "no memory 'node_9'"),
    ({"supersedes": "第一条"}, "supersedes", "'第一条' is not a node id"),
    ({"supersedes": "node_2"}, "supersedes", "'node_2' is this memory itself"),
])
def test_bad_lifetimes_and_corrections_are_422_naming_the_field(client, change, field,
                                                                 words) -> None:
    post(client, "/memories", {"description": OLD_HOME, "poignancy": 5})
    out = post(client, "/memories", {"description": "记忆", "poignancy": 3, **change}, 422)
    assert field in out["field"] and words in out["message"], out
    assert client.get(f"/personas/{PERSONA}", headers=bearer(ADMIN)).json()["memories"] == 1


def test_a_correction_hides_the_old_memory_unless_asked(client) -> None:
    post(client, "/memories", {"description": OLD_HOME, "poignancy": 5})
    post(client, "/memories", {"description": "伊莎贝拉喜欢咖啡", "poignancy": 3})
    post(client, "/memories/batch", {"memories": [
        {"description": NEW_HOME, "poignancy": 5, "supersedes": "node_1"}]})
    assert OLD_HOME not in found(client, "伊莎贝拉住在哪里")
    assert NEW_HOME in found(client, "伊莎贝拉住在哪里")
    assert OLD_HOME in found(client, "伊莎贝拉住在哪里", include_superseded=True)
    post(client, "/forget", {"node_ids": "node_3"})  # the correction goes: the old comes back
    assert OLD_HOME in found(client, "伊莎贝拉住在哪里")


def test_forget_expired_and_the_sweep_of_open_personas(client, service) -> None:
    post(client, "/memories/batch", {"memories": [
        {"description": "伊莎贝拉的临时密码是四七一一", "poignancy": 5, "expires_in": 60,
         "created": (NOW - timedelta(hours=1)).isoformat()},
        {"description": "伊莎贝拉的停车位", "poignancy": 2, "expires_in": 60,
         "created": (NOW - timedelta(hours=1)).isoformat()},
        {"description": OLD_HOME, "poignancy": 5}]})
    assert found(client, "密码") == [OLD_HOME]  # expired: never retrieved
    dry = post(client, "/forget", {"expired": True, "text": "密码", "dry_run": True})
    assert dry["forgotten"] == ["node_1"] and dry["dry_run"] is True
    out = post(client, "/forget", {"expired": True, "text": "密码"})
    assert out["forgotten"] == ["node_1"] and out["remaining"] == 2
    sweeper = ExpirySweeper(service.streams, 3600)
    assert sweeper.sweep() == {PERSONA: 1}  # the parking spot
    assert sweeper.sweep() == {}
    assert client.get(f"/personas/{PERSONA}", headers=bearer(ADMIN)).json()["memories"] == 1
    with pytest.raises(ValueError, match="every: expected a positive number of seconds"):
        ExpirySweeper(service.streams, 0)


def test_the_mcp_tools_take_the_new_fields() -> None:
    assert {"expires_in", "supersedes"} <= set(mcp.REMEMBER)
    assert "include_superseded" in mcp.RECALL
    assert "expired" in mcp.FORGET
