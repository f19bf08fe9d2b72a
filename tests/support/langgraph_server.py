"""LangGraph's own server, ``langgraph dev``, serving this repository's ``langgraph.json``.

The server runs from ``.venv-langgraph`` (the ``langgraph-dev`` extra in an environment of its
own, which ``make test`` installs: langgraph-api's pins would downgrade the test
environment's grpcio and protobuf). Tests drive it over HTTP with ``langgraph_sdk``, as users
do; the server checks for blocking calls on its event loop as it does by default (no
``--allow-blocking``), and :meth:`LanggraphDev.blocking_lines` reads what it logged.

```python
with LanggraphDev(tmp_path / "server", env={"GENMEM_PATH": str(tmp_path / "store")}) as server:
    client = server.client()
    client.store.put_item(["Ada"], "k", {"content": "Lena lives in Porto"})
```
"""

from __future__ import annotations

import json
import sys
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import ServerProcess, free_port

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-langgraph"
BLOCKING_MARKS = ("BlockingError", "Blocking call to")


def langgraph_venv() -> Path:
    """The server's environment; a test that needs it fails (never skips) without it."""
    if not (VENV / "bin" / "langgraph").exists():
        pytest.fail(f"no {VENV.name}: `make test` installs LangGraph's server there "
                    "(or run `make .venv-langgraph/.installed`)")
    return VENV


def served_config(store: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``langgraph.json`` with its paths made absolute, and ``store`` settings merged in."""
    config = json.loads((ROOT / "langgraph.json").read_text("utf-8"))
    config["dependencies"] = [str(ROOT)]
    config["graphs"] = {name: str(ROOT / entry.removeprefix("./"))
                        for name, entry in config["graphs"].items()}
    if "store" in config:
        config["store"] = {**config["store"],
                           "path": str(ROOT / config["store"]["path"].removeprefix("./"))}
        config["store"].update(store or {})
    return config


class LanggraphDev(ServerProcess):
    """``langgraph dev`` (in-memory runtime) on a free port of 127.0.0.1.

    Args:
        folder: the server's folder (its ``langgraph.json``, ``.langgraph_api`` and log).
        env: variables for the server (``GENMEM_PATH``, ``OPENAI_BASE_URL``...), added to
            this process's environment.
        config: the ``langgraph.json`` to serve (default :func:`served_config`).
        args: more arguments of ``langgraph dev``.
        venv: the environment with LangGraph's server (default ``.venv-langgraph``).
    """

    temp_prefix = "langgraph-dev-"

    def __init__(self, folder: Path, *, env: Mapping[str, str] | None = None,
                 config: Mapping[str, Any] | None = None, args: tuple[str, ...] = (),
                 venv: Path | None = None) -> None:
        super().__init__(folder, startup_timeout=120)
        self.venv = venv
        self.port = 0
        self.env = dict(env or {})
        self.config = dict(config if config is not None else served_config())
        self.args = args

    def _start(self) -> None:
        venv = self.venv or langgraph_venv()
        path = self.folder / "langgraph.json"
        path.write_text(json.dumps(self.config, ensure_ascii=False), "utf-8")
        self.port = free_port()
        env = {"LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGSMITH_TRACING": "false",
               "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1", **self.env}
        argv = [str(venv / "bin" / "langgraph"), "dev", "--host", "127.0.0.1", "--port",
                str(self.port), "--no-browser", "--no-reload", "--config", str(path),
                *self.args]
        self.launch(argv, check=lambda: self.get("/ok") is not None, what="langgraph dev",
                    env=env)
        print(f"langgraph dev (pid {self.pid}) at {self.url}", file=sys.stderr)

    @property
    def url(self) -> str:
        """The server's address."""
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str) -> object:
        """GET a path of the server's API, its JSON body."""
        with urllib.request.urlopen(self.url + path, timeout=5) as r:
            return json.loads(r.read())

    def client(self) -> Any:
        """A synchronous ``langgraph_sdk`` client of the server."""
        from langgraph_sdk import get_sync_client

        return get_sync_client(url=self.url)

    def log(self) -> str:
        """Everything the server printed so far."""
        return (self.folder / "server.out").read_text("utf-8", errors="replace")

    def blocking_lines(self) -> list[str]:
        """The log's lines that report a blocking call on the server's event loop."""
        return [line for line in self.log().splitlines()
                if any(mark in line for mark in BLOCKING_MARKS)]
