"""A real Chroma server (`chroma run`) on 127.0.0.1 for integration tests.

`ChromaServer` starts the `chroma` executable of the running virtualenv on a free port, waits
for its heartbeat and stops it by its own process id on exit:

```python
with ChromaServer(tmp_path / "chroma") as server:
    client = server.client()  # a new chromadb.HttpClient each call
    client.get_or_create_collection("memories", embedding_function=None)
```

Tests normally use the session-scoped `chroma_server` fixture of `tests.support.fixtures`
(one server for the whole run) and isolate themselves by collection name.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import chromadb

from tests.support.processes import ServerProcess, free_port

if TYPE_CHECKING:
    from chromadb.api import ClientAPI

__all__ = ["ChromaServer", "chroma_executable"]


def chroma_executable() -> Path:
    """Return the `chroma` command installed next to the running Python.

    Raises:
        FileNotFoundError: chromadb's command line is not installed in this environment.
    """
    path = Path(sys.executable).parent / "chroma"
    if not path.exists():
        msg = f"no `chroma` command next to {sys.executable}; install chromadb in this venv"
        raise FileNotFoundError(msg)
    return path


class ChromaServer(ServerProcess):
    """Run `chroma run --path DIR --host 127.0.0.1 --port PORT` for a `with` block.

    Args:
        path: The server's persistence folder (its output goes to `server.out` there);
            default: a temporary folder removed on exit.
        startup_timeout: Seconds to wait for the first heartbeat.

    Attributes:
        host: Always `127.0.0.1`.
        port: The port the server listens on.
        folder: The persistence folder.
        pid: The server's process id.
        startup_seconds: How long the start took.
    """

    host = "127.0.0.1"
    temp_prefix = "chroma-server-"

    def __init__(self, path: Path | None = None, *, startup_timeout: float = 60.0) -> None:
        super().__init__(path, startup_timeout=startup_timeout)
        self.port = 0

    def _start(self) -> None:
        self.port = free_port(self.host)
        self.launch([str(chroma_executable()), "run", "--path", str(self.folder),
                     "--host", self.host, "--port", str(self.port)],
                    check=lambda: bool(self.client().heartbeat()),
                    what=f"chroma server on port {self.port}", interval=0.1)

    def client(self) -> ClientAPI:
        """Return a new `chromadb.HttpClient` connected to this server."""
        return chromadb.HttpClient(host=self.host, port=self.port)
