"""Retried writes across replicas: a replica killed mid-write, each failed write sent again
with its idempotency key to the other replica, stores every memory exactly once.

Two `genmem serve` processes over one real PostgreSQL; clients write single memories, each
with its own `Idempotency-Key`, through one replica; meanwhile one replica at a time is
killed (SIGKILL: no reply for the writes in flight, some of which committed) and started
again. A write that fails is sent again, with the same key and body, to the other replica
until one answers. Afterwards every memory is stored once, numbered without gaps, and every
acknowledged write is there under the node id it was acknowledged with. Some writes are
also sent twice on purpose, the second time to the other replica, as a client whose reply
was lost does.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.support.genmem_server import GenmemServer

ADMIN = "admin-key-0123456789abcdef"
PERSONA = "伊莎贝拉"
NOW = "2023-02-14 09:00:00"
CLIENTS, WRITES, KILLS = 4, 25, 2  # WRITES: each client's least; it writes until the kills end
# KILLS: each replica is killed once (the second kill lands while the first one's restart
# serves), each restart a new `genmem serve` process: the costly part of this test
LOST_EVERY = 8  # every 8th write is sent twice, the second time to the other replica
AUTH = {"Authorization": f"Bearer {ADMIN}"}


def replica(folder: Path, dsn: str) -> GenmemServer:
    return GenmemServer(folder, "--api-key", ADMIN, global_args=["--dsn", dsn, "--now", NOW])


class Writer:
    """One client: its writes, each retried on the other replica until acknowledged."""

    def __init__(
        self, client: int, replicas: list[GenmemServer], killed: threading.Event
    ) -> None:
        self.client = client
        self.replicas = replicas
        self.killed = killed  # set once every kill is done: write until then
        self.acknowledged: dict[str, str] = {}  # description -> node id
        self.retries = 0

    def run(self) -> None:
        i = 0
        while i < WRITES or not self.killed.is_set():
            description = f"客人{self.client}的第{i}件事"
            node_id = self.write(description, f"c{self.client}-w{i}", i)
            if i % LOST_EVERY == 0:  # as if its reply was lost: sent again, to the other one
                again = self.write(description, f"c{self.client}-w{i}", i, turn=1)
                assert again == node_id, (description, node_id, again)
            self.acknowledged[description] = node_id
            i += 1

    def write(self, description: str, key: str, i: int, turn: int = 0) -> str:
        body = {"persona_name": PERSONA, "description": description, "poignancy": 1 + i % 9}
        turn += self.client + i  # spread the writes over both replicas
        deadline = time.monotonic() + 60
        while True:
            url = self.replicas[turn % 2].url
            try:
                r = httpx.post(f"{url}/memories", json=body, timeout=30,
                               headers={**AUTH, "Idempotency-Key": key})
                if r.status_code == 200:
                    (memory,) = r.json()["memories"]
                    assert memory["description"] == description, r.text
                    return str(memory["node_id"])
                assert r.status_code == 503, r.text  # the store busy or the replica stopping
            except httpx.TransportError:
                pass  # killed, or not started again yet
            assert time.monotonic() < deadline, f"{key}: no replica acknowledged it"
            self.retries += 1
            turn += 1  # the other replica, with the same key and body
            time.sleep(0.05)


def kill_and_restart(replicas: list[GenmemServer], killed: threading.Event) -> None:
    """SIGKILL one replica at a time, KILLS times, each started again; then set ``killed``."""
    for kill in range(KILLS):
        time.sleep(0.5)  # some writes through both
        victim = replicas[kill % 2]
        os.kill(victim.pid, signal.SIGKILL)
        assert victim._proc is not None
        victim._proc.wait(timeout=30)
        victim._start()  # a new process (and port) over the same database
    killed.set()


@pytest.mark.slow
def test_writes_retried_on_the_other_replica_are_stored_exactly_once(tmp_path, postgres_server):
    dsn = postgres_server.create_database(f"retries_{tmp_path.name}"[:60])
    with replica(tmp_path / "a", dsn) as a, replica(tmp_path / "b", dsn) as b:
        killed = threading.Event()
        writers = [Writer(c, [a, b], killed) for c in range(CLIENTS)]
        with ThreadPoolExecutor(CLIENTS + 1) as pool:
            killing = pool.submit(kill_and_restart, [a, b], killed)
            jobs = [pool.submit(w.run) for w in writers]
            killing.result()
            for job in jobs:
                job.result()
    acknowledged = {d: n for w in writers for d, n in w.acknowledged.items()}
    total = sum(len(w.acknowledged) for w in writers)
    assert len(acknowledged) == total >= CLIENTS * WRITES
    assert sum(w.retries for w in writers) > 0  # the kills did fail writes
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT description, node_id FROM memory_nodes "
                            "WHERE persona_name = %s ORDER BY node_count", (PERSONA,)).fetchall()
        node_count, keys = conn.execute(
            "SELECT node_count, jsonb_array_length(idempotency) FROM genmem_personas "
            "WHERE persona_name = %s", (PERSONA,)).fetchone()
    stored = dict(rows)
    assert len(rows) == len(stored) == total  # each memory once: none lost, none repeated
    assert [n for _, n in rows] == [f"node_{k}" for k in range(1, total + 1)]  # no gap
    assert stored == acknowledged  # each under the id its acknowledgement named
    assert (node_count, keys) == (total, total)
