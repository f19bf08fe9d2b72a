"""`genmem serve` (or `genmem mcp --transport http`) in a child process on 127.0.0.1, started
warm (`tests/support/warm.py`: its own process, without the imports' start-up).

It is stopped by its own pid (SIGTERM, on which uvicorn shuts down gracefully: the streams are
flushed).

```python
with GenmemServer(tmp_path / "store", "--api-key", KEY) as srv:
    httpx.post(f"{srv.url}/retrieve", json=..., headers={"Authorization": f"Bearer {KEY}"})
```
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from tests.support.processes import ServerProcess, free_port, stop_process

__all__ = ["GenmemServer"]


class GenmemServer(ServerProcess):
    """Run `genmem [GLOBAL...] serve --host 127.0.0.1 --port PORT [ARGS...]` for a `with` block.

    Args:
        store: the `--path` of the store.
        *args: more options of the command (keys, public URL...).
        global_args: options before the command (`--now`, `--persona`...).
        command: the command: `serve`, or `mcp --transport http` (ready when `/mcp` answers).
        startup_timeout: seconds to wait for `/healthz`.

    Attributes:
        url: `http://127.0.0.1:PORT`.
        returncode: the child's exit code once stopped.
    """

    host = "127.0.0.1"
    temp_prefix = "genmem-serve-"

    def __init__(self, store: Path, *args: str, global_args: Sequence[str] = (),
                 command: Sequence[str] = ("serve",), startup_timeout: float = 120.0) -> None:
        super().__init__(None, startup_timeout=startup_timeout)
        self.store = store
        self.args = list(args)
        self.global_args = list(global_args)
        self.command = list(command)
        self.port = 0
        self.returncode: int | None = None
        self.last_output = ""

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _start(self) -> None:
        self.port = free_port(self.host)
        argv = [sys.executable, "-m", "langchain_genmem.cli", "--path", str(self.store),
                *self.global_args, *self.command, "--host", self.host, "--port", str(self.port),
                *self.args]
        self.launch(argv, check=self._healthy, what=f"genmem serve on port {self.port}",
                    interval=0.2, warm=True)

    def _healthy(self) -> bool:
        path = "/healthz" if self.command[0] == "serve" else "/mcp"
        try:
            with urllib.request.urlopen(f"{self.url}{path}", timeout=2) as reply:  # noqa: S310
                return reply.status == 200
        except urllib.error.HTTPError:  # /mcp answers a bare GET with an error: it is up
            return path == "/mcp"

    def close(self) -> None:
        """Stop the server by its pid; keep its exit code and output (`last_output`)."""
        if self._proc is not None:
            stop_process(self._proc, timeout=30.0)
            self.returncode = self._proc.returncode
        log = self.folder / "server.out"
        self.last_output = log.read_text("utf-8", errors="replace") if log.exists() else ""
        super().close()
