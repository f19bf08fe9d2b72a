"""`genmem serve` as a real process on 127.0.0.1: the issue's done-when test, a bounded load
test, and reflection through ChatOpenAI against the scripted OpenAI server."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from langchain_genmem.cli import Store, app
from tests.support.benchmarks import run_benchmark
from tests.support.dify_schema import dify_problems, dify_tools
from tests.support.genmem_server import GenmemServer
from tests.support.processes import pid_is_running

ADMIN = "admin-key-0123456789abcdef"
ISABELLA_KEY = "isabella-key-0123456789abcdef"
KLAUS_KEY = "klaus-key-0123456789abcdef"
ISABELLA = "伊莎贝拉"
KLAUS = "Klaus Mueller"
NOW = "2023-02-14 09:00:00"
SEED_NODE_FIELDS = {"id", "node_id", "type", "created_at", "last_accessed", "description",
                    "poignancy", "score", "recency", "relevance", "importance"}


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def keys_file(tmp_path: Path) -> Path:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"keys": [
        {"key": ADMIN},
        {"key": ISABELLA_KEY, "personas": [ISABELLA]},
        {"key": KLAUS_KEY, "personas": [KLAUS]},
    ]}), encoding="utf-8")
    return path


@pytest.mark.slow
def test_genmem_serve_end_to_end(tmp_path):
    store = tmp_path / "store"
    with GenmemServer(store, "--keys-file", str(keys_file(tmp_path)), "--create",
                      global_args=["--now", NOW]) as srv, httpx.Client(base_url=srv.url,
                                                                      timeout=60) as http:
        schema = http.get("/openapi.json").json()
        assert dify_problems(schema) == []
        assert schema["servers"][0]["url"] == srv.url
        assert {"retrieve", "add_memory", "add_memories"} <= set(dify_tools(schema))

        memories = [
            {"description": "伊莎贝拉正在霍布斯咖啡馆筹备情人节派对", "poignancy": 8,
             "created": "2023-02-13 10:00:00", "keywords": "情人节，派对"},
            {"description": "Isabella is brewing coffee for the morning customers",
             "poignancy": 2, "created": "2023-02-13T07:00:00", "subject": "Isabella",
             "predicate": "brew", "object": "coffee"},
        ]
        for m in memories:
            r = http.post("/memories", json={"persona_name": ISABELLA, **m},
                          headers=auth(ISABELLA_KEY))
            assert r.status_code == 200, r.text
        r = http.post("/memories/batch", headers=auth(ADMIN), json={
            "persona_name": ISABELLA, "memories": [
                {"description": "伊莎贝拉给花浇水", "poignancy": 1},
                {"type": "thought", "description": "伊莎贝拉希望大家都来参加派对",
                 "poignancy": 6, "evidence": "node_1"}]})
        assert r.status_code == 200 and r.json()["count"] == 2

        body = {"persona_name": ISABELLA, "focal_text": "情人节派对", "top_k": 3,
                "recency_w": None, "relevance_w": 1, "importance_w": 1, "recency_decay": 0.99,
                "recency_mode": "hours"}
        out = http.post("/retrieve", json=body, headers=auth(ISABELLA_KEY)).json()
        assert out["status"] == "ok" and out["message"]
        nodes = out["retrieved_nodes"]
        assert len(nodes) == 3 and all(SEED_NODE_FIELDS <= set(n) for n in nodes)
        assert nodes[0]["description"] == "伊莎贝拉正在霍布斯咖啡馆筹备情人节派对"
        assert out["accessed_ids"] == [n["node_id"] for n in nodes]
        assert out["debug"]["total_candidates"] == 4 and out["debug"]["retrieved_count"] == 3
        assert out["debug"]["max_score"] == nodes[0]["score"] >= out["debug"]["min_score"]
        english = http.post("/retrieve", headers=auth(ADMIN), json={
            "persona_name": ISABELLA, "focal_text": "making coffee", "top_k": 1,
            "importance_w": 0, "recency_w": 0}).json()
        assert english["retrieved_nodes"][0]["subject"] == "Isabella"
        unknown = http.post("/retrieve", headers=auth(ADMIN),
                            json={"persona_name": KLAUS, "focal_text": "paper"}).json()
        assert unknown["status"] == "no_candidates"

        assert http.post("/retrieve", json=body).status_code == 401
        assert http.post("/retrieve", json=body, headers=auth("x" * 20)).status_code == 401
        denied = http.post("/retrieve", json=body, headers=auth(KLAUS_KEY))
        assert denied.status_code == 403 and ISABELLA in denied.json()["message"]
        bad = http.post("/retrieve", json={**body, "top_k": 10_000}, headers=auth(ADMIN))
        assert bad.status_code == 422 and bad.json()["field"] == "top_k"
        pid = srv.pid
    # SIGTERM: uvicorn shuts down gracefully (the lifespan closes the streams), then
    # re-raises the signal, so the exit status is -15
    assert srv.returncode in (0, -15) and "Traceback" not in srv.last_output
    assert "1 persona stream(s) closed, access times flushed" in srv.last_output
    assert not pid_is_running(pid)
    stream = Store(store).open(ISABELLA)
    assert len(stream) == 4
    assert all(str(stream.get(i).last_accessed) == NOW for i in out["accessed_ids"])


@pytest.mark.slow
def test_many_clients_interleaving_writes_and_retrievals(tmp_path):
    """8 clients at once, each writing 6 memories and retrieving after each: bounded counts."""
    clients, writes = 8, 6
    store = tmp_path / "store"
    with GenmemServer(store, "--api-key", ADMIN, "--create") as srv:

        def client(c: int) -> list[str]:
            ids = []
            with httpx.Client(base_url=srv.url, headers=auth(ADMIN), timeout=120) as http:
                for i in range(writes):
                    r = http.post("/memories", json={
                        "persona_name": ISABELLA, "description": f"客人{c}点了第{i}杯咖啡",
                        "poignancy": 1 + (c + i) % 10})
                    assert r.status_code == 200, r.text
                    ids.append(r.json()["memories"][0]["node_id"])
                    out = http.post("/retrieve", json={"persona_name": ISABELLA,
                                                        "focal_text": f"第{i}杯咖啡",
                                                        "top_k": 5}).json()
                    assert out["status"] == "ok", out
                    assert len(set(out["accessed_ids"])) == len(out["accessed_ids"])
            return ids

        with ThreadPoolExecutor(max_workers=clients) as pool:
            ids = [i for batch in pool.map(client, range(clients)) for i in batch]
        total = clients * writes
        assert sorted(ids) == sorted(f"node_{n}" for n in range(1, total + 1))
        stats = httpx.get(f"{srv.url}/personas/{ISABELLA}", headers=auth(ADMIN)).json()
        assert stats["memories"] == total and stats["types"]["event"] == total
    stream = Store(store).open(ISABELLA)
    assert sorted(n.description for n in stream.nodes()) == sorted(
        f"客人{c}点了第{i}杯咖啡" for c in range(clients) for i in range(writes))


@pytest.mark.slow
def test_serve_over_a_chroma_server(tmp_path, chroma_server):
    """The store options of every genmem command choose the backend: here `chroma run`."""
    options = ["--chroma-host", chroma_server.host, "--chroma-port", str(chroma_server.port),
               "--collection", f"serve-{tmp_path.name}"[:60]]
    refused = CliRunner().invoke(app, [*options, "serve", "--api-key", ADMIN])
    assert refused.exit_code == 2 and refused.output.startswith(
        f"error: --collection: collection {options[-1]!r} on the Chroma server at "), refused.output
    assert "--create" in refused.output
    with GenmemServer(tmp_path / "unused", "--api-key", ADMIN, "--create",
                      global_args=options) as srv, \
            httpx.Client(base_url=srv.url, headers=auth(ADMIN), timeout=60) as http:
        r = http.post("/memories", json={"persona_name": KLAUS, "poignancy": 6,
                                          "description": "Klaus Mueller 在写关于城市化的论文"})
        assert r.status_code == 200, r.text
        out = http.post("/retrieve", json={"persona_name": KLAUS, "focal_text": "论文"}).json()
        assert out["status"] == "ok" and out["accessed_ids"] == ["node_1"]
    assert not (tmp_path / "unused").exists()
    stored = Store(tmp_path, chroma_server.host, chroma_server.port, options[-1]).open(KLAUS)
    assert [n.description for n in stored.nodes()] == ["Klaus Mueller 在写关于城市化的论文"]


QUESTIONS = "1. 伊莎贝拉为什么要办派对?\n2. 伊莎贝拉和客人的关系如何?"
RULES = [
    {"when": "rate the likely poignancy of the following event", "reply": "Rating: 7"},
    {"when": "most salient high-level questions", "reply": QUESTIONS},
    {"when": "high-level insights can you infer",
     "reply": "1. 伊莎贝拉喜欢把人聚在一起 (because of 0, 1)\n"
              "2. 伊莎贝拉很在乎客人 (because of 2)"},
    {"when": "Turn each of the following",
     "reply": "1. (伊莎贝拉, 喜欢, 聚会)\n2. (伊莎贝拉, 在乎, 客人)\n3. (伊莎贝拉, 喜欢, 聚会)"
              "\n4. (伊莎贝拉, 在乎, 客人)"},
    {"when": "poignancy of each of the following", "reply": "1. 6\n2. 5\n3. 6\n4. 5"},
]


@pytest.mark.slow
def test_reflect_and_rating_through_chatopenai(tmp_path, scripted_openai, monkeypatch):
    openai = scripted_openai(RULES)
    for name, value in openai.env().items():
        monkeypatch.setenv(name, value)  # the child inherits them
    store = tmp_path / "store"
    with GenmemServer(store, "--api-key", ADMIN, "--create", global_args=["--now", NOW]) as srv, \
            httpx.Client(base_url=srv.url, headers=auth(ADMIN), timeout=120) as http:
        rated = http.post("/memories", json={"persona_name": ISABELLA,
                                             "description": "伊莎贝拉决定办情人节派对"})
        assert rated.status_code == 200, rated.text
        assert rated.json()["memories"][0]["poignancy"] == 7
        more = [{"description": d, "poignancy": 5} for d in
                ("伊莎贝拉邀请了玛丽亚", "伊莎贝拉装饰了咖啡馆", "伊莎贝拉给老客人打折")]
        assert http.post("/memories/batch", json={"persona_name": ISABELLA,
                                                  "memories": more}).status_code == 200
        not_due = http.post("/reflect", json={"persona_name": ISABELLA}).json()
        assert not_due["status"] == "not_due" and not_due["llm_calls"] == 0
        out = http.post("/reflect", json={"persona_name": ISABELLA, "force": True}).json()
        assert out["status"] == "reflected", out
        assert out["focal_points"] == ["伊莎贝拉为什么要办派对?", "伊莎贝拉和客人的关系如何?"]
        thoughts = {t["description"]: t for t in out["thoughts"]}
        assert set(thoughts) == {"伊莎贝拉喜欢把人聚在一起", "伊莎贝拉很在乎客人"}
        assert all(t["type"] == "thought" and t["evidence"] for t in thoughts.values())
        stats = http.get(f"/personas/{ISABELLA}").json()
        assert stats["types"]["thought"] == 2 and stats["trigger"]["importance_ele_n"] == 0
    paths = [r["path"] for r in openai.requests()]
    assert paths and all(p.endswith("/chat/completions") for p in paths)


@pytest.mark.slow
def test_bench_personas_mode_stays_within_the_open_limit():
    # three times as many personas as may be open: most are closed and opened again; the
    # embedding is the cheap one (what is measured is the server's bound, not the model)
    out = run_benchmark("bench_service.py", "--personas", "12", "--max-open", "4", "--every", "4",
                        "--fake-embeddings", timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    table = lines.index("| personas | RSS MB | s per hundred | open |")
    rows = [line.strip("|").split("|") for line in lines[table + 2: table + 6]]
    assert [int(r[0]) for r in rows] == [0, 4, 8, 12]
    assert all(int(r[3]) <= 4 for r in rows)
    assert "most personas open at once: 4 (limit 4)" in out.stdout
    recalled = next(line for line in lines if line.startswith("memories recalled"))
    counts = [int(part.rsplit(": ", 1)[1]) for part in recalled.split(": ", 1)[1].split(", ")]
    assert counts and all(n == 10 for n in counts)  # closed personas answer with all they had
