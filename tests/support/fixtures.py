"""Pytest fixtures for the test servers; `tests/conftest.py` loads this module as a plugin.

- `scripted_openai`: a factory. Each call starts a `ScriptedOpenAI` server in its own folder
  under the test's `tmp_path`; every server is stopped when the test ends.
- `chroma_server`: one `ChromaServer` for the whole session; tests isolate themselves by
  collection name.
- `spawned`: starts `python -c CODE args...` children (`tests.support.writers.spawn_python`)
  and stops every one still running when the test ends, pass or fail.

```python
def test_reflect(scripted_openai, chroma_server):
    srv = scripted_openai([{"when": "focal", "reply": "1. 问题"}], default="好的")
    client = chroma_server.client()
```
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from itertools import count
from pathlib import Path

import pytest

from tests.support.chroma_server import ChromaServer
from tests.support.openai_server import Rule, ScriptedOpenAI
from tests.support.processes import stop_process
from tests.support.writers import spawn_python

__all__ = ["chroma_server", "scripted_openai", "spawned"]

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
