"""`genmem serve` in a child process on 127.0.0.1, stopped by its own pid (SIGTERM, as uvicorn
expects for a graceful shutdown that flushes the streams).

```python
with GenmemServer(tmp_path / "store", "--api-key", KEY) as srv:
    httpx.post(f"{srv.url}/retrieve", json=..., headers={"Authorization": f"Bearer {KEY}"})
```
"""

from __future__ import annotations

import sys
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from tests.support.processes import ServerProcess, free_port, stop_process

__all__ = ["GenmemServer"]


class GenmemServer(ServerProcess):
    """Run `genmem [GLOBAL...] serve --host 127.0.0.1 --port PORT [ARGS...]` for a `with` block.

    Args:
        store: the `--path` of the store.
        *args: more `serve` options (keys, public URL...).
        global_args: options before `serve` (`--now`, `--persona`...).
        startup_timeout: seconds to wait for `/healthz`.

    Attributes:
        url: `http://127.0.0.1:PORT`.
        returncode: the child's exit code once stopped.
    """

    host = "127.0.0.1"
    temp_prefix = "genmem-serve-"

    def __init__(self, store: Path, *args: str, global_args: Sequence[str] = (),
                 startup_timeout: float = 120.0) -> None:
        super().__init__(None, startup_timeout=startup_timeout)
        self.store = store
        self.args = list(args)
        self.global_args = list(global_args)
        self.port = 0
        self.returncode: int | None = None
        self.last_output = ""

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _start(self) -> None:
        self.port = free_port(self.host)
        argv = [sys.executable, "-m", "langchain_genmem.cli", "--path", str(self.store),
                *self.global_args, "serve", "--host", self.host, "--port", str(self.port),
                *self.args]
        self.launch(argv, check=self._healthy, what=f"genmem serve on port {self.port}",
                    interval=0.2)

    def _healthy(self) -> bool:
        with urllib.request.urlopen(f"{self.url}/healthz", timeout=2) as reply:  # noqa: S310
            return reply.status == 200

    def close(self) -> None:
        """Stop the server by its pid; keep its exit code and output (`last_output`)."""
        if self._proc is not None:
            stop_process(self._proc, timeout=30.0)
            self.returncode = self._proc.returncode
        log = self.folder / "server.out"
        self.last_output = log.read_text("utf-8", errors="replace") if log.exists() else ""
        super().close()
