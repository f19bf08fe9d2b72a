"""Replicas: two `genmem serve` processes over one PostgreSQL database serve the same personas.

Each replica opens its own streams; the database numbers every write (an advisory lock per
persona) and each retrieval first reads the persona's head, so a write through one replica
is found through the other at once. With `--score-in database` the replicas hold no persona
in memory (lazy streams, ranking in SQL).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psycopg
import pytest
from typer.testing import CliRunner

from langchain_genmem.cli import app
from tests.support.genmem_server import GenmemServer

ADMIN = "admin-key-0123456789abcdef"
PERSONA = "伊莎贝拉"
NOW = "2023-02-14 09:00:00"
CLIENTS, WRITES = 3, 5  # per replica


def replica(folder: Path, dsn: str, score_in: str) -> GenmemServer:
    args = ["--api-key", ADMIN] + (["--score-in", score_in] if score_in != "process" else [])
    return GenmemServer(folder, *args, global_args=["--dsn", dsn, "--now", NOW])


def write(url: str, name: str) -> list[str]:
    """One client: WRITES single memories through one replica; the node ids it got."""
    ids = []
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"},
                      timeout=120) as http:
        for i in range(WRITES):
            r = http.post("/memories", json={"persona_name": PERSONA, "poignancy": 1 + i,
                                              "description": f"{name}点了第{i}杯咖啡"})
            assert r.status_code == 200, r.text
            ids.append(r.json()["memories"][0]["node_id"])
    return ids


def retrieve(url: str, focal: str) -> dict:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"},
                      timeout=120) as http:
        r = http.post("/retrieve", json={"persona_name": PERSONA, "focal_text": focal,
                                          "top_k": 3})
        assert r.status_code == 200, r.text
        return r.json()


@pytest.mark.slow
@pytest.mark.parametrize("score_in", ["process", "database"])
def test_two_replicas_write_at_once_and_read_each_others_writes(
    request, tmp_path, postgres_server, score_in
):
    dsn = postgres_server.create_database(f"replicas_{score_in}_{tmp_path.name}"[:60])
    with replica(tmp_path / "a", dsn, score_in) as a, replica(tmp_path / "b", dsn, score_in) as b:
        jobs = [(srv.url, f"{tag}客人{c}") for srv, tag in ((a, "甲"), (b, "乙"))
                for c in range(CLIENTS)]
        with ThreadPoolExecutor(len(jobs)) as pool:
            got = list(pool.map(lambda job: write(*job), jobs))
        total = len(jobs) * WRITES
        ids = [i for client in got for i in client]
        assert sorted(ids, key=lambda i: int(i.split("_")[1])) == [
            f"node_{n}" for n in range(1, total + 1)]  # none lost, none repeated
        for client in got:  # each client's writes in its own order
            assert client == sorted(client, key=lambda i: int(i.split("_")[1]))

        for writer, reader in ((a, b), (b, a)):
            focal = f"克劳斯在图书馆写论文，经由 {writer.port}"
            with httpx.Client(base_url=writer.url, timeout=120,
                              headers={"Authorization": f"Bearer {ADMIN}"}) as http:
                r = http.post("/memories", json={"persona_name": PERSONA, "poignancy": 9,
                                                  "description": focal})
                new = r.json()["memories"][0]["node_id"]
            out = retrieve(reader.url, focal)
            assert out["status"] == "ok", out
            assert out["retrieved_nodes"][0]["node_id"] == new
            assert out["debug"]["total_candidates"] == total + (1 if writer is a else 2)
    with psycopg.connect(dsn) as conn:
        count, distinct, low, high = conn.execute(
            "SELECT count(*), count(DISTINCT description), min(node_count), max(node_count) "
            "FROM memory_nodes WHERE persona_name = %s", (PERSONA,)).fetchone()
        state = conn.execute("SELECT node_count FROM genmem_personas WHERE persona_name = %s",
                             (PERSONA,)).fetchone()
    assert (count, distinct, low, high) == (total + 2, total + 2, 1, total + 2)
    assert state == (total + 2,)


def test_score_in_database_on_a_store_that_cannot_rank_is_refused_in_one_line(tmp_path):
    result = CliRunner().invoke(app, ["--path", str(tmp_path / "store"), "serve",
                                      "--score-in", "database"])
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: score_in 'database'"), result.output
    assert "--dsn" in errors[0] and "Traceback" not in result.output
    assert not (tmp_path / "store").exists()  # nothing made for a refused server
