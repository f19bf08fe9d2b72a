"""`genmem db start` / `status` / `stop`: a real local PostgreSQL with pgvector, run as the
command line runs it (subprocesses), used through the DSN it prints, stopped by its pid."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from langchain_genmem import MemoryStream
from langchain_genmem.backends.local_postgres import LocalPostgres, first_free_port
from tests.support.processes import free_port, pid_is_running

pytestmark = pytest.mark.slow


def genmem() -> list[str]:
    script = Path(sys.executable).parent / "genmem"
    return [str(script)] if script.exists() else [sys.executable, "-m", "langchain_genmem.cli"]


def db(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*genmem(), "db", *args], cwd=cwd, capture_output=True, text=True,
                          encoding="utf-8", timeout=180, check=False,
                          env={**os.environ, **(env or {})})


@pytest.fixture
def project(tmp_path: Path):
    """A project folder; whatever server a test left running there is stopped by its pid."""
    yield tmp_path
    for folder in (tmp_path / ".genmem" / "postgres", tmp_path / "pg"):
        if folder.exists():
            LocalPostgres(folder).stop()


def test_start_eval_use_and_stop(project: Path) -> None:
    port = free_port()
    shell = subprocess.run(
        ["bash", "-c", f'eval "$({" ".join(genmem())} db start --port {port})"; '
                       'echo "$GENMEM_DSN"'],
        cwd=project, capture_output=True, text=True, timeout=180, check=False,
        env={**os.environ, "GENMEM_DSN": ""})
    assert shell.returncode == 0, shell.stderr
    dsn = shell.stdout.strip()
    assert dsn.startswith("postgresql://postgres:") and f"@127.0.0.1:{port}/genmem" in dsn
    assert (project / ".genmem" / "postgres" / "data" / "PG_VERSION").is_file()  # the default

    again = db("start", cwd=project)  # idempotent: the same server, the same DSN
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"export GENMEM_DSN={dsn}\n"
    assert "already running" in again.stderr

    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT extname FROM pg_extension WHERE extname = 'vector'"
                            ).fetchone() == ("vector",)
        assert conn.execute("SHOW listen_addresses").fetchone() == ("127.0.0.1",)
    with MemoryStream("伊莎贝拉", dsn=dsn) as stream:
        stream.add_event("伊莎贝拉在霍布斯咖啡馆筹备情人节派对", poignancy=8)
        stream.add_event("Maria Lopez is studying physics", poignancy=3)
    found = subprocess.run([*genmem(), "--persona", "伊莎贝拉", "search", "情人节派对", "-k", "1"],
                           cwd=project, capture_output=True, text=True, encoding="utf-8",
                           timeout=180, check=False, env={**os.environ, "GENMEM_DSN": dsn})
    assert found.returncode == 0, found.stderr
    assert "伊莎贝拉在霍布斯咖啡馆筹备情人节派对" in found.stdout

    status = db("status", cwd=project)
    assert status.returncode == 0 and f"on 127.0.0.1:{port}" in status.stdout
    pid = LocalPostgres(project / ".genmem" / "postgres").running().pid
    assert f"(pid {pid})" in status.stdout and pid_is_running(pid)

    stopped = db("stop", cwd=project)
    assert stopped.returncode == 0 and stopped.stdout == f"stopped PostgreSQL (pid {pid})\n"
    assert not pid_is_running(pid)
    assert db("status", cwd=project).returncode == 1
    assert db("stop", cwd=project).stdout.startswith("PostgreSQL is not running")

    # a second start reuses the cluster: the memory is still there, the password the same
    restarted = db("start", "--dir", ".genmem/postgres", "--port", str(port), cwd=project)
    assert restarted.returncode == 0, restarted.stderr
    assert restarted.stdout == f"export GENMEM_DSN={dsn}\n"
    with MemoryStream("伊莎贝拉", dsn=dsn) as stream:
        assert len(stream) == 2


def test_a_taken_port_is_one_line(project: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = db("start", "--dir", "pg", "--port", str(port), cwd=project)
        assert first_free_port(port) > port  # the default would have moved on
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"error: --port: 127.0.0.1:{port} is taken; choose another or " \
                          "leave --port out\n"
    assert not (project / "pg").exists()
