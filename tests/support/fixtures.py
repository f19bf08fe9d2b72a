"""Pytest fixtures for the test servers; `tests/conftest.py` loads this module as a plugin.

- `scripted_openai`: a factory. Each call starts a `ScriptedOpenAI` server in its own folder
  under the test's `tmp_path`; every server is stopped when the test ends.
- `chroma_server`: one `ChromaServer` for the whole session; tests isolate themselves by
  collection name.

```python
def test_reflect(scripted_openai, chroma_server):
    srv = scripted_openai([{"when": "focal", "reply": "1. 问题"}], default="好的")
    client = chroma_server.client()
```
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from itertools import count
from pathlib import Path

import pytest

from tests.support.chroma_server import ChromaServer
from tests.support.openai_server import Rule, ScriptedOpenAI

__all__ = ["chroma_server", "scripted_openai"]

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
