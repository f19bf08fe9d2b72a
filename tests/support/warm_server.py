"""A fork server: Python with the heavy libraries imported once, forked for each command.

Run as ``python warm_server.py SOCKET [--poll]`` by :class:`tests.support.warm.WarmPython`, never
imported. It imports :data:`PRELOAD` (third-party libraries only: never this package, so
each command imports and configures the package itself, from the ``PYTHONPATH`` it is
given), then listens on the unix socket ``SOCKET``. Each connection is one command sent by
a shim (:mod:`tests.support.warm_shim`): a header with the shim's stdin, stdout and stderr
attached, then the command as JSON. The server forks; the child takes those descriptors,
the shim's working folder, umask and environment, builds ``sys.path`` as a fresh
interpreter would for that environment, runs the test sitecustomize its ``PYTHONPATH``
names, and runs the command as ``__main__``. It then exits the way a fresh interpreter
exits: ``atexit`` handlers, flushed streams, the status of ``SystemExit``, or a traceback
and status 1. The server sends the shim the child's pid, then its wait status.

A shim that goes away before its command ends (killed) has the command killed too.
SIGTERM, or the end of the process that started the server, stops the server and every
command still running.
"""

from __future__ import annotations

import builtins
import importlib
import importlib.machinery
import importlib.util
import json
import os
import runpy
import selectors
import signal
import socket
import struct
import sys
import time
import types
import warnings

# What the package's commands, examples and blocks import, minus the package itself.
PRELOAD = (
    "numpy", "pydantic", "typer", "click", "httpx", "chromadb",
    "langchain_core.documents", "langchain_core.embeddings", "langchain_core.messages",
    "langchain_core.prompts", "langchain_core.runnables", "langchain_core.retrievers",
    "langchain_core.language_models", "langchain_core.output_parsers", "langchain_core.tools",
    "openai", "langchain_openai", "langgraph.graph", "langgraph.store.base",
)
HEADER = struct.Struct("!I")  # the JSON body's length, sent with the three descriptors
POLL = 0.05  # seconds between checks for ended children where there are no pidfds
BASE_PATH = sys.path[1:]  # a fresh interpreter's path after its script folder and PYTHONPATH
THIS_FILE = os.path.abspath(__file__)
HIDDEN_FRAMES = {THIS_FILE, runpy.__file__, "<frozen runpy>"}


def pidfd(pid: int) -> int | None:
    """A descriptor readable once ``pid`` ends, or None where the system has none."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


class Forked(BaseException):
    """Raised in a fresh child to leave the server's loop: the command it is to run."""

    def __init__(self, request: dict, fds: list[int]) -> None:
        super().__init__()
        self.request, self.fds = request, fds


def receive(conn: socket.socket) -> tuple[dict, list[int]]:
    """One request: the header with its descriptors, then the JSON body."""
    head, fds, _flags, _addr = socket.recv_fds(conn, HEADER.size, 3)
    while len(head) < HEADER.size:
        more = conn.recv(HEADER.size - len(head))
        if not more:
            raise EOFError("the shim closed the connection inside the header")
        head += more
    (length,) = HEADER.unpack(head)
    body = bytearray()
    while len(body) < length:
        more = conn.recv(length - len(body))
        if not more:
            raise EOFError("the shim closed the connection inside the request")
        body += more
    return json.loads(body), fds


class Server:
    """The accept loop: forks a child per request, reports each child's pid and wait status.

    A child's end and the end of the tests' process are seen through pidfds; where the
    system has none (or with ``--poll``), the loop polls every :data:`POLL` seconds instead.
    """

    def __init__(self, listener: socket.socket, polling: bool = False) -> None:
        self.listener = listener
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ, None)
        self.parent_pid = os.getppid()  # the tests' process: when it ends, so do we
        self.parent = None if polling else pidfd(self.parent_pid)
        if self.parent is not None:
            self.selector.register(self.parent, selectors.EVENT_READ, ("parent", 0))
        self.children: dict[int, socket.socket] = {}  # pid: the shim's connection
        self.pidfds: dict[int, int] = {}

    def run(self) -> None:
        polling = self.parent is None
        while True:
            for key, _events in self.selector.select(POLL if polling else None):
                if key.data is None:
                    self.accept()
                else:
                    kind, pid = key.data
                    if kind == "exit":
                        self.finish(pid, os.waitpid(pid, 0)[1])
                    elif kind == "hangup":
                        self.hung_up(pid)
                    else:
                        self.stop()
            if polling:
                self.poll()

    def poll(self) -> None:
        """Without pidfds: reap every child that ended; stop if the tests' process did."""
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in self.children:
                self.finish(pid, status)
        if os.getppid() != self.parent_pid:
            self.stop()

    def accept(self) -> None:
        conn, _ = self.listener.accept()
        try:
            request, fds = receive(conn)
        except (OSError, EOFError, ValueError):
            conn.close()
            return
        pid = os.fork()
        if pid == 0:
            self.forget_all(keep=conn)
            conn.close()
            raise Forked(request, fds)
        for fd in fds:
            os.close(fd)
        self.children[pid] = conn
        ended = pidfd(pid) if self.parent is not None else None
        if ended is not None:
            self.pidfds[pid] = ended
            self.selector.register(ended, selectors.EVENT_READ, ("exit", pid))
        self.selector.register(conn, selectors.EVENT_READ, ("hangup", pid))
        conn.sendall(f"{pid}\n".encode())

    def finish(self, pid: int, status: int) -> None:
        """The child ``pid`` ended: send its wait status to its shim."""
        conn = self.children.pop(pid)
        ended = self.pidfds.pop(pid, None)
        if ended is not None:
            self.selector.unregister(ended)
            os.close(ended)
        if conn.fileno() >= 0:
            self.selector.unregister(conn)
            try:
                conn.sendall(f"{status}\n".encode())
            except OSError:
                pass
            conn.close()

    def hung_up(self, pid: int) -> None:
        conn = self.children[pid]
        try:
            data = conn.recv(64)
        except OSError:
            data = b""
        if not data:  # the shim is gone: so is its command
            self.selector.unregister(conn)
            conn.close()
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def forget_all(self, keep: socket.socket) -> None:
        """In a child: close the server's descriptors (the selector's are its parent's)."""
        self.listener.close()
        for fd in [self.parent, *self.pidfds.values()]:
            if fd is not None:
                os.close(fd)
        for conn in self.children.values():
            if conn is not keep:
                conn.close()
        self.selector.close()

    def stop(self, *_args: object) -> None:
        for pid in list(self.children):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        os._exit(0)


def take_stdio(fds: list[int]) -> None:
    """The shim's stdin, stdout and stderr become this process's."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)


def take_environment(request: dict) -> None:
    """The shim's folder, umask, variables, path, encodings and warning options."""
    os.chdir(request["cwd"])
    os.umask(request["umask"])
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()
    python_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [request["path0"], *python_path, *BASE_PATH]
    importlib.invalidate_caches()
    sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE")) \
        or request.get("dont_write_bytecode", False)
    encoding = os.environ.get("PYTHONIOENCODING", "")
    if encoding:
        name, _, errors = encoding.partition(":")
        for stream in (sys.stdin, sys.stdout, sys.stderr):
            stream.reconfigure(encoding=name or None, errors=errors or None)
    options = [o for o in os.environ.get("PYTHONWARNINGS", "").split(",") if o]
    if options:
        sys.warnoptions[:] = options
        warnings._processoptions(options)  # noqa: SLF001 - what start-up does with them
    site = importlib.machinery.PathFinder.find_spec("sitecustomize", python_path)
    if site is not None and site.loader is not None:
        module = importlib.util.module_from_spec(site)
        sys.modules["sitecustomize"] = module
        site.loader.exec_module(module)


def fresh_main() -> types.ModuleType:
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    return main


def run_command(request: dict) -> None:
    """Run the command as ``__main__``: a script, ``-c`` code or ``-m`` module."""
    kind, target, args = request["kind"], request["target"], request["args"]
    if kind == "code":
        sys.argv[:] = ["-c", *args]
        exec(compile(target, "<string>", "exec"), fresh_main().__dict__)  # noqa: S102
    elif kind == "module":
        sys.argv[:] = ["-m", *args]
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        sys.argv[:] = [target, *args]
        runpy.run_path(target, run_name="__main__")


def trimmed(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback without this file's and runpy's frames, as a fresh interpreter shows it."""
    while tb is not None and tb.tb_frame.f_code.co_filename in HIDDEN_FRAMES:
        tb = tb.tb_next
    return tb


def child(forked: Forked) -> None:
    """Become the command; leave by ``SystemExit`` so the interpreter exits as usual."""
    for number in (signal.SIGTERM, signal.SIGCHLD):
        signal.signal(number, signal.SIG_DFL)
    take_stdio(forked.fds)
    take_environment(forked.request)
    try:
        run_command(forked.request)
    except SystemExit:
        raise
    except BaseException as error:  # noqa: BLE001 - printed as Python prints it
        error.__traceback__ = trimmed(error.__traceback__)  # the one Python prints
        sys.excepthook(type(error), error, error.__traceback__)
        if isinstance(error, KeyboardInterrupt):
            sys.stdout.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        raise SystemExit(1) from None
    raise SystemExit(0)


def main(path: str, polling: bool = False) -> None:
    for name in PRELOAD:
        importlib.import_module(name)
    import gc

    gc.collect()
    gc.freeze()  # the children's collections then leave the preloaded pages shared
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".tmp")
    listener.listen(64)
    os.rename(path + ".tmp", path)  # the socket appears ready, or not at all
    server = Server(listener, polling)
    signal.signal(signal.SIGTERM, server.stop)
    try:
        server.run()
    except Forked as forked:
        command = forked
    child(command)  # outside the handler: the command's errors must not chain to Forked


if __name__ == "__main__":
    main(sys.argv[1], polling="--poll" in sys.argv[2:])
