"""Start, wait for and stop the helper servers that tests run as child processes.

Both test servers (`openai_server.ScriptedOpenAI`, `chroma_server.ChromaServer`) are
`ServerProcess` subclasses and share these rules:

- the child's stdout and stderr go to a log file in the server's folder, never to a pipe;
- start-up waits for a readiness check with a deadline, and a failure raises `ServerStartError`
  with the tail of that log, so a broken server explains itself;
- the child is stopped by its own process id: terminate, then kill after a timeout.

```python
class FileServer(ServerProcess):
    def _start(self) -> None:
        self.port = free_port()
        self.launch([sys.executable, "-m", "http.server", "-b", "127.0.0.1", str(self.port)],
                    check=lambda: urlopen(f"http://127.0.0.1:{self.port}/").status == 200,
                    what="http.server")
```
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing_extensions import Self

    from langchain_genmem.backends.local_postgres import pid_is_running
    from tests.support.warm import WarmProcess

__all__ = ["ServerProcess", "ServerStartError", "free_port", "pid_is_running", "spawn",
           "stop_process", "wait_until_ready"]

LOG_TAIL_CHARS = 4000


def __getattr__(name: str) -> object:
    """`pid_is_running`: the library's pid check, imported on first use.

    The scripted OpenAI server runs this module in a child that needs only the standard
    library; importing the library there cost every start three seconds of CPU.
    """
    if name == "pid_is_running":
        from langchain_genmem.backends.local_postgres import pid_is_running

        return pid_is_running
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class ServerStartError(RuntimeError):
    """A test server exited or did not become ready before its deadline."""


def free_port(host: str = "127.0.0.1") -> int:
    """Ask the OS for a TCP port that is free right now on `host`.

    Args:
        host: The interface the server will listen on.

    Returns:
        A port number; another process could still take it before the server binds it.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def spawn(
    argv: Sequence[str],
    *,
    log_path: Path,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    user: str | None = None,
    warm: bool = False,
) -> subprocess.Popen[bytes] | WarmProcess:
    """Start a child process whose stdout and stderr both go to `log_path`.

    Args:
        argv: The command line.
        log_path: The file that receives everything the child prints.
        cwd: The child's working directory; default: this process's.
        env: Variables added to (or replacing) this process's environment.
        user: Run the child as this system user (PostgreSQL refuses to run as root).
        warm: Start ``python ...`` (``argv[0]`` this interpreter) warm
            (`tests.support.warm`): a process of its own, without the imports' start-up.

    Returns:
        The running child.
    """
    child_env = {**os.environ, **(env or {})}
    with log_path.open("wb") as log:
        if warm and user is None:
            from tests.support.warm import shared

            return shared().popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, cwd=cwd, env=child_env)
        return subprocess.Popen(  # noqa: S603 - argv is built by the test helpers
            list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            cwd=cwd, env=child_env, user=user,
        )


def log_tail(log_path: Path) -> str:
    """Return the last few thousand characters the child printed (empty if none)."""
    try:
        return log_path.read_text(encoding="utf-8", errors="replace")[-LOG_TAIL_CHARS:]
    except FileNotFoundError:
        return ""


def wait_until_ready(
    check: Callable[[], bool],
    *,
    proc: subprocess.Popen[bytes],
    log_path: Path,
    what: str,
    timeout: float = 30.0,
    interval: float = 0.05,
) -> float:
    """Call `check` until it returns true, the child exits, or the deadline passes.

    Exceptions raised by `check` count as "not ready yet"; the last one is reported.

    Args:
        check: Returns true once the server answers.
        proc: The child running the server.
        log_path: Its log file, quoted in the error.
        what: The server's name for the error message.
        timeout: Seconds to wait.
        interval: Seconds between checks.

    Returns:
        The seconds it took.

    Raises:
        ServerStartError: The child exited or the deadline passed; the child is stopped.
    """
    started = time.monotonic()
    deadline = started + timeout
    last_error: BaseException | None = None
    while True:
        try:
            if check():
                return time.monotonic() - started
        except Exception as e:  # noqa: BLE001 - any failure means "not ready yet"
            last_error = e
        if proc.poll() is not None:
            reason = f"exited with code {proc.returncode}"
            break
        if time.monotonic() > deadline:
            reason = f"did not answer within {timeout:.0f} s"
            break
        time.sleep(interval)
    stop_process(proc)
    msg = (f"{what} (pid {proc.pid}) {reason}; last check error: {last_error!r}\n"
           f"--- its output ({log_path}) ---\n{log_tail(log_path)}")
    raise ServerStartError(msg) from last_error


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    """Stop a child by its own pid: SIGTERM, then SIGKILL after `timeout` seconds, then reap it.

    Args:
        proc: The child; nothing happens if it has already exited (it is still reaped).
        timeout: Seconds to wait after each signal.
    """
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
    proc.wait(timeout=timeout)


class ServerProcess:
    """A server in a child process, alive for a `with` block; subclasses implement `_start`.

    Args:
        folder: The server's folder (its files and its output log); default: a temporary
            folder removed on exit.
        startup_timeout: Seconds to wait for the server to become ready.

    Attributes:
        folder: The server's folder.
        pid: The server's process id (0 before the start).
        startup_seconds: How long the start took.
    """

    temp_prefix = "test-server-"

    def __init__(self, folder: Path | None = None, *, startup_timeout: float = 30.0) -> None:
        self._own_folder = folder is None
        self.folder = Path(tempfile.mkdtemp(prefix=self.temp_prefix)) if folder is None else folder
        self.startup_timeout = startup_timeout
        self.pid = 0
        self.startup_seconds = 0.0
        self._proc: subprocess.Popen[bytes] | WarmProcess | None = None

    def _start(self) -> None:
        """Prepare the folder's files and call `launch`."""
        raise NotImplementedError

    def launch(
        self,
        argv: Sequence[str],
        *,
        check: Callable[[], bool],
        what: str,
        cwd: Path | None = None,
        interval: float = 0.05,
        user: str | None = None,
        warm: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """Start the child and wait until `check` returns true; its output goes to `server.out`.

        Args:
            argv: The command line.
            check: Returns true once the server answers; exceptions mean "not yet".
            what: The server's name for error messages.
            cwd: The child's working directory; default: the server's folder.
            interval: Seconds between checks.
            user: Run the server as this system user.
            warm: Start it warm (see `spawn`).
            env: Variables added to (or replacing) this process's environment.
        """
        log_path = self.folder / "server.out"
        self._proc = spawn(argv, log_path=log_path, cwd=cwd or self.folder, user=user, warm=warm,
                           env=env)
        self.pid = self._proc.pid
        self.startup_seconds = wait_until_ready(check, proc=self._proc, log_path=log_path,
                                                what=what, timeout=self.startup_timeout,
                                                interval=interval)

    def __enter__(self) -> Self:
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop the server by its pid (terminate, then kill); remove a folder this made."""
        if self._proc is not None:
            stop_process(self._proc)
        if self._own_folder:
            shutil.rmtree(self.folder, ignore_errors=True)
