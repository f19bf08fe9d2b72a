"""Start ``python`` and ``genmem`` without paying for their imports again, for the tests.

A command of this package spends most of its CPU importing third-party libraries (Chroma,
LangChain, OpenAI's client: two to four seconds a process on two shared cores), and the
tests that run the manual and the examples as a reader does start hundreds of them.
:class:`WarmPython` runs fork servers (:mod:`tests.support.warm_server`) that import those
libraries once and fork a child per command, and a ``bin`` folder of shims
(:mod:`tests.support.warm_shim`) named ``python`` and ``genmem`` that hand a command to a
server. Put :attr:`WarmPython.bin` first on ``PATH`` (or make a reader's ``.venv`` with
:meth:`WarmPython.venv`) and :meth:`WarmPython.env` in the environment, and ``python`` and
``genmem`` run as before: a process of their own with the
caller's folder, environment, stdio, exit status and signals, importing this package afresh.

What a child shares with its siblings is what a fresh interpreter could not share: the
preloaded libraries and the hash seed of ``str`` (set order). Each server has its own seed,
so a test that compares two runs (a page done twice) runs them on different servers
(``env(1)`` for the second). Start-up itself (what a command imports, deprecation warnings
of old module paths, installs) is tested in fresh interpreters, never here.

```python
with WarmPython(tmp_path) as warm:
    env = {**os.environ, **warm.env(0), "PATH": warm.path(dict(os.environ))}
    subprocess.run(["genmem", "--help"], env=env, check=True)
```
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

from tests.support.processes import stop_process, wait_until_ready
from tests.support.warm_shim import VARIABLE, python_request, read_pid, send

HERE = Path(__file__).resolve().parent
SHIM = """#!{python} -ISB
import sys
sys.path.insert(0, {here!r})
import warm_shim
warm_shim.main({name!r}, {real!r})
"""
# Variables a server must not see: the package reads them when a command runs, not before.
NOT_FOR_SERVERS = ("PYTHONPATH", "GENMEM_", "OPENAI_", "CHROMA_", "LANGCHAIN_", "LANGSMITH_")


class WarmProcess:
    """A command a server runs for this process: what tests use of `subprocess.Popen`.

    ``pid`` is the command's own, so a signal sent to it (SIGKILL included) reaches the
    command at once; the server reaps it and sends its status. Closing the connection (this
    object collected, this process gone) has the server kill a command still running.
    """

    def __init__(self, argv: Sequence[str], sock: socket.socket) -> None:
        self.args, self._sock = list(argv), sock
        self.pid = read_pid(sock)
        self.returncode: int | None = None
        self._pending = b""

    def poll(self) -> int | None:
        """The exit code if the command ended, else None (as `Popen.poll`)."""
        if self.returncode is None:
            self._read(block=False)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the end; `subprocess.TimeoutExpired` after ``timeout`` seconds."""
        if self.returncode is None:
            self._sock.settimeout(timeout)
            try:
                self._read(block=True)
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout) from None
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, number: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, number)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _read(self, block: bool) -> None:
        if not block:
            self._sock.setblocking(False)
        try:
            while not self._pending.endswith(b"\n"):
                more = self._sock.recv(64)
                if not more:
                    raise OSError(f"the fork server went away while running {self.args}")
                self._pending += more
        except BlockingIOError:
            return
        self.returncode = os.waitstatus_to_exitcode(int(self._pending))
        self._sock.close()


def python_command(environ: Mapping[str, str]) -> str:
    """``python`` where ``environ`` sends the shims to a server (its ``PATH`` finds one), else
    this interpreter."""
    return "python" if environ.get(VARIABLE) else sys.executable


class WarmPython:
    """Fork servers and a ``bin`` folder of shims, alive for a ``with`` block.

    Args:
        folder: Where the sockets, the shims and the servers' logs go; default: a
            temporary folder removed on exit.
        servers: How many servers (each with its own hash seed) to run.
        polling: Have the servers poll for ended commands, as where the system has no pidfds.

    Attributes:
        bin: The folder holding the ``python`` and ``genmem`` shims.
    """

    def __init__(self, folder: Path | None = None, servers: int = 2,
                 polling: bool = False) -> None:
        self._own = folder is None
        self.folder = Path(tempfile.mkdtemp(prefix="warm-")) if folder is None else folder
        self.bin = self.folder / "bin"
        self.count, self.polling = servers, polling
        self.sockets: list[Path] = []
        self._procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> WarmPython:
        try:
            self.bin.mkdir(parents=True, exist_ok=True)
            self._write_shims()
            for number in range(self.count):
                self._start(number)
            for number in range(self.count):
                self._wait(number)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def env(self, server: int = 0) -> dict[str, str]:
        """The variable that sends the shims' commands to server ``server``."""
        return {VARIABLE: str(self.sockets[server % self.count])}

    def path(self, environ: dict[str, str]) -> str:
        """``PATH`` of ``environ`` with the shims first."""
        return f"{self.bin}{os.pathsep}{environ.get('PATH', os.defpath)}"

    def popen(self, argv: Sequence[str], *, cwd: Path | str | None = None,
              env: Mapping[str, str] | None = None, stdin: IO | int | None = None,
              stdout: IO | int | None = None, stderr: IO | int | None = None,
              server: int = 0) -> WarmProcess | subprocess.Popen:
        """Start ``python ARGS`` (``argv[0]`` is this interpreter) as `subprocess.Popen` would.

        ``stdin``, ``stdout``, ``stderr``: a file, a descriptor, `subprocess.DEVNULL`,
        `subprocess.STDOUT` (stderr only) or None (this process's). A command the server
        cannot run as a fresh interpreter would, or any command when the server is gone,
        gets a real `subprocess.Popen`.
        """
        folder = os.fspath(cwd) if cwd is not None else os.getcwd()
        environ = dict(os.environ if env is None else env)
        request = python_request(list(argv[1:]), folder) if argv[0] == sys.executable else None
        if request is not None:
            with open(os.devnull, "r+b") as null:
                fds = [_fd(stdin, 0, null), _fd(stdout, 1, null)]
                fds.append(fds[1] if stderr == subprocess.STDOUT else _fd(stderr, 2, null))
                try:
                    sock = send(str(self.sockets[server % self.count]), request, folder,
                                environ, fds)
                except OSError:  # the server is gone: start it cold, as the shims do
                    pass
                else:
                    return WarmProcess(argv, sock)
        return subprocess.Popen(list(argv), cwd=cwd, env=environ, stdin=stdin,  # noqa: S603
                                stdout=stdout, stderr=stderr)

    def run(self, argv: Sequence[str], *, input: str = "", cwd: Path | str | None = None,
            env: Mapping[str, str] | None = None, timeout: float | None = None,
            server: int = 0) -> subprocess.CompletedProcess[str]:
        """`subprocess.run` with ``capture_output=True, text=True, encoding="utf-8"``."""
        with tempfile.TemporaryFile() as given, tempfile.TemporaryFile() as out, \
                tempfile.TemporaryFile() as err:
            given.write(input.encode("utf-8"))
            given.seek(0)
            proc = self.popen(argv, cwd=cwd, env=env, stdin=given, stdout=out, stderr=err,
                              server=server)
            try:
                status = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise
            out.seek(0)
            err.seek(0)
            return subprocess.CompletedProcess(list(argv), status,
                                               out.read().decode("utf-8", "replace"),
                                               err.read().decode("utf-8", "replace"))

    def venv(self, where: Path) -> None:
        """Make ``where`` this environment as a reader's ``.venv``: every file of it linked,
        but ``bin/python`` and ``bin/genmem`` are the shims."""
        where.mkdir()
        for entry in Path(sys.prefix).iterdir():
            if entry.name != "bin":
                (where / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
        (where / "bin").mkdir()
        for entry in Path(sys.executable).parent.iterdir():
            shim = self.bin / entry.name
            (where / "bin" / entry.name).symlink_to(shim if shim.exists() else entry)

    def close(self) -> None:
        """Stop the servers (and any command still running); remove a folder this made."""
        for proc in self._procs:
            stop_process(proc)
        self._procs.clear()
        if self._own:
            shutil.rmtree(self.folder, ignore_errors=True)

    def _write_shims(self) -> None:
        bin_dir = Path(sys.executable).parent
        for name, real in [("python", sys.executable), ("python3", sys.executable),
                           ("genmem", str(bin_dir / "genmem"))]:
            shim = self.bin / name
            shim.write_text(SHIM.format(python=sys.executable, here=str(HERE),
                                        name=name.rstrip("3"), real=real), "utf-8")
            shim.chmod(0o755)

    def _start(self, number: int) -> None:
        sock = self.folder / f"server{number}.sock"
        self.sockets.append(sock)
        env = {k: v for k, v in os.environ.items() if not k.startswith(NOT_FOR_SERVERS)}
        with (self.folder / f"server{number}.log").open("wb") as log:
            self._procs.append(subprocess.Popen(  # noqa: S603 - our own server script
                [sys.executable, str(HERE / "warm_server.py"), str(sock),
                 *(["--poll"] if self.polling else [])], env=env,
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.folder))

    def _wait(self, number: int) -> None:
        wait_until_ready(self.sockets[number].exists, proc=self._procs[number],
                         log_path=self.folder / f"server{number}.log",
                         what=f"warm server {number}", timeout=120.0)


def _fd(stream: IO | int | None, own: int, null: IO) -> int:
    """The descriptor to hand over for one of a command's stdin, stdout or stderr."""
    if stream is None:
        return own
    if stream == subprocess.DEVNULL:
        return null.fileno()
    return stream if isinstance(stream, int) else stream.fileno()


_SHARED: list[WarmPython] = []


def shared() -> WarmPython:
    """This process's servers, started on first use and stopped by :func:`close_shared` (the
    end of the test session) or when it exits."""
    if not _SHARED:
        warm = WarmPython().__enter__()
        atexit.register(close_shared)
        _SHARED.append(warm)
    return _SHARED[0]


def close_shared() -> None:
    """Stop this process's servers and remove their folder, if it started them."""
    while _SHARED:
        _SHARED.pop().close()
