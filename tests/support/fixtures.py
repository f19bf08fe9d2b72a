"""Pytest fixtures for the test servers; `tests/conftest.py` loads this module as a plugin.

- `scripted_openai`: a factory. Each call starts a `ScriptedOpenAI` server in its own folder
  under the test's `tmp_path`; every server is stopped when the test ends.
- `chroma_server`: one `ChromaServer` for the whole session; tests isolate themselves by
  collection name.
- `spawned`: starts `python -c CODE args...` children (`tests.support.writers.spawn_python`)
  and stops every one still running when the test ends, pass or fail.
- `warm_python`: fork servers with the heavy libraries imported and a ``bin`` folder of
  ``python`` and ``genmem`` shims (`tests.support.warm`), one set per worker, for the tests
  that start many commands as a reader does; `warm_commands` puts them on ``PATH`` for one test.
- `postgres_server`: one `PostgresServer` (PostgreSQL + pgvector) for the whole session,
  started only if a test asks for it; tests isolate themselves by database.
- `small_model_server`, `small_model`: llama.cpp's server on a real small chat model
  (SmolLM2-135M-Instruct), one per worker, and a `ChatOpenAI` on it (`tests.support.llama_server`).
- `store`: parametrised over the backends (`chroma`, `postgres`): a fresh, empty place to
  open streams in; `store.open(persona, **kw)` twice reaches the same memories. The one way
  behavioural tests run on every backend.

```python
def test_reflect(scripted_openai, chroma_server):
    srv = scripted_openai([{"when": "focal", "reply": "1. 问题"}], default="好的")
    client = chroma_server.client()
```
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from langchain_genmem import MemoryStream
from langchain_genmem.memory.shutdown import OPEN_STREAMS
from tests.support.chroma_server import ChromaServer
from tests.support.llama_server import small_model, small_model_server
from tests.support.openai_server import Rule, ScriptedOpenAI
from tests.support.postgres_server import PostgresServer
from tests.support.processes import stop_process
from tests.support.warm import WarmPython, shared
from tests.support.writers import spawn_python

__all__ = ["BACKENDS", "Store", "chroma_server", "open_store", "postgres_server",
           "scripted_openai", "small_model", "small_model_server", "spawned", "store"]

BACKENDS = ("chroma", "postgres")

StartScriptedOpenAI = Callable[..., ScriptedOpenAI]


@pytest.fixture
def scripted_openai(tmp_path: Path) -> Iterator[StartScriptedOpenAI]:
    """Start scripted OpenAI servers: `scripted_openai(rules, default=None)` returns a running one.

    Yields:
        The factory; its servers are stopped by pid when the test ends.
    """
    numbers = count()
    with ExitStack() as stack:

        def start(rules: Sequence[Rule], *, default: str | None = None) -> ScriptedOpenAI:
            folder = tmp_path / f"openai-{next(numbers)}"
            return stack.enter_context(ScriptedOpenAI(rules, default=default, tmp_path=folder))

        yield start


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    """One real Chroma server on 127.0.0.1 for the whole test session.

    Yields:
        The running server; use `chroma_server.client()` for a new `chromadb.HttpClient`.
    """
    with ChromaServer(tmp_path_factory.mktemp("chroma-server")) as server:
        yield server


@pytest.fixture(scope="session")
def warm_python() -> WarmPython:
    """The worker's two fork servers (each its own hash seed) and their shims.

    Returns:
        The running servers (`tests.support.warm.shared`); put `warm_python.bin` first on
        ``PATH`` and add `warm_python.env(n)` to the environment.
    """
    return shared()


@pytest.fixture
def warm_commands(warm_python: WarmPython, monkeypatch: pytest.MonkeyPatch) -> WarmPython:
    """For one test: ``python`` and ``genmem`` found on ``PATH`` start warm (the first server).

    Returns:
        The session's `WarmPython`.
    """
    monkeypatch.setenv("PATH", warm_python.path(dict(os.environ)))
    for name, value in warm_python.env(0).items():
        monkeypatch.setenv(name, value)
    return warm_python


@pytest.fixture
def spawned() -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start Python children: `spawned(code, *args, log_path=...)`; all stopped at the end.

    Yields:
        The starter; every child it started is stopped by pid when the test ends.
    """
    children: list[subprocess.Popen[bytes]] = []

    def start(code: str, *args: str, log_path: Path) -> subprocess.Popen[bytes]:
        child = spawn_python(code, *args, log_path=log_path)
        children.append(child)
        return child

    yield start
    for child in children:
        stop_process(child)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One real PostgreSQL with pgvector for the whole session, stopped by its pid at the end.

    Yields:
        The running server; `create_database(name)` gives each test its own database.
    """
    with PostgresServer() as server:
        yield server


class Store:
    """Where a test opens its streams, on one backend.

    `kwargs()` gives the MemoryStream arguments of this store (a Chroma folder, or a
    PostgreSQL database); `kwargs(fresh=True)` those of another empty store. Every
    PostgreSQL backend opened during the test is closed, and its databases dropped, at the
    end of the test.

    Attributes:
        backend: `"chroma"` or `"postgres"`.
    """

    def __init__(self, backend: str, folder: Path, server: PostgresServer | None) -> None:
        self.backend = backend
        self.folder = folder
        self.server = server
        self.databases: list[str] = []
        self._main: dict[str, Any] | None = None
        self._count = count()

    def kwargs(self, *, fresh: bool = False) -> dict[str, Any]:
        """MemoryStream keyword arguments of this store (or of a new empty one)."""
        if fresh or self._main is None:
            made = self._new()
            if fresh:
                return made
            self._main = made
        return dict(self._main)

    def open(self, persona: str, **kwargs: Any) -> MemoryStream:
        """A stream of `persona` on this store."""
        return MemoryStream(persona, **self.kwargs(), **kwargs)

    @property
    def dsn(self) -> str:
        """The PostgreSQL DSN of this store (postgres only)."""
        return self.kwargs()["dsn"]

    def _new(self) -> dict[str, Any]:
        if self.server is None:
            return {"path": str(self.folder / f"chroma-{next(self._count)}")}
        name = f"t_{uuid.uuid4().hex[:16]}"
        self.databases.append(name)
        return {"dsn": self.server.create_database(name)}


@contextmanager
def open_store(request: pytest.FixtureRequest, backend: str, folder: Path) -> Iterator[Store]:
    """An empty store on `backend`; its PostgreSQL pools and databases go when the block ends.

    Args:
        request: the test's request (to reach the session's PostgreSQL server).
        backend: `"chroma"` or `"postgres"`.
        folder: where Chroma folders go.

    Yields:
        The store.
    """
    from langchain_genmem.backends.postgres import PostgresBackend

    server = request.getfixturevalue("postgres_server") if backend == "postgres" else None
    made = Store(backend, folder, server)
    opened: list[PostgresBackend] = []
    original = PostgresBackend.__init__

    def recording(self: PostgresBackend, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        opened.append(self)

    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(PostgresBackend, "__init__", recording)
            yield made
    finally:
        for stream in list(OPEN_STREAMS):  # deferred access times first, then the pools
            if any(stream.backend is pg for pg in opened):
                stream.close()
        for pg in opened:
            pg.close()
        for name in made.databases:
            server.drop_database(name)  # type: ignore[union-attr]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """An empty store on each backend in turn (the test runs once per backend).

    Yields:
        The store.
    """
    with open_store(request, request.param, tmp_path) as made:
        yield made


@pytest.fixture
def backend(store: Store) -> Store:
    """The :func:`store` fixture, for tests whose own ``store`` is something else (the
    LangGraph store over it, say): each backend in turn.

    Returns:
        The store.
    """
    return store
