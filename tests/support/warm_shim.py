"""The ``python`` and ``genmem`` of a warm bin folder (:mod:`tests.support.warm`).

Each is a tiny executable started with ``python -ISB`` that calls :func:`main`: it sends its
command, working folder, umask, environment and its stdin, stdout and stderr to the fork
server (:mod:`tests.support.warm_server`) named by ``GENMEM_TEST_WARM``, passes on SIGTERM,
SIGINT and SIGHUP to the command, and ends as the command ended (its status, or killed by
the same signal). What the server cannot run as a fresh interpreter would (an option other
than ``-B``, ``-c`` and ``-m``, a script that does not exist, no server) runs the real
program instead, by ``exec``. Standard library only: the shim's start is the whole cost.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys

VARIABLE = "GENMEM_TEST_WARM"
HEADER = struct.Struct("!I")


def python_request(argv: list[str], cwd: str) -> dict | None:
    """The request for ``python ARGV`` run in ``cwd``, or None where only the real interpreter
    will do."""
    dont_write_bytecode = False
    for i, arg in enumerate(argv):
        if arg == "-B":
            dont_write_bytecode = True
            continue
        rest = argv[i + 2:]
        script = os.path.join(cwd, arg)
        if arg == "-c" and i + 1 < len(argv):
            request = {"kind": "code", "target": argv[i + 1], "args": rest, "path0": ""}
        elif arg == "-m" and i + 1 < len(argv):
            request = {"kind": "module", "target": argv[i + 1], "args": rest, "path0": cwd}
        elif arg.startswith("-") or not os.path.isfile(script):
            return None
        else:
            request = {"kind": "path", "target": arg, "args": argv[i + 1:],
                       "path0": os.path.dirname(os.path.realpath(script))}
        return {**request, "dont_write_bytecode": dont_write_bytecode}
    return None


def script_request(script: str, argv: list[str]) -> dict:
    """The request for an installed script (``genmem``): run as ``python SCRIPT ARGV``."""
    return {"kind": "path", "target": script, "args": argv,
            "path0": os.path.dirname(os.path.realpath(script))}


def send(path: str, request: dict, cwd: str, env: dict[str, str],
         fds: list[int]) -> socket.socket:
    """Connect to the server and hand it the command, to run in ``cwd`` with ``env`` and the
    descriptors ``fds`` as its stdin, stdout and stderr."""
    umask = os.umask(0)
    os.umask(umask)
    env = {k: v for k, v in env.items() if k != VARIABLE}
    body = json.dumps({**request, "cwd": cwd, "umask": umask, "env": env}).encode()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        socket.send_fds(sock, [HEADER.pack(len(body))], fds)
    except OSError:
        sock.close()
        raise
    sock.sendall(body)
    return sock


def read_pid(sock: socket.socket) -> int:
    """The command's pid, the server's first line."""
    line = b""
    while not line.endswith(b"\n"):
        more = sock.recv(1)
        if not more:
            raise OSError("the fork server went away")
        line += more
    return int(line)


def wait(sock: socket.socket) -> int:
    """Forward signals to the command until the server reports its wait status."""
    pid = read_pid(sock)

    def forward(number: int, _frame: object) -> None:
        try:
            os.kill(pid, number)
        except ProcessLookupError:
            pass

    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, forward)
    line = sock.makefile("rb").readline()
    if not line:
        sys.stderr.write("warm shim: the fork server went away\n")
        return 1 << 8
    return int(line)


def end_as(status: int) -> None:
    """Exit with the command's status, or die of the signal that killed it."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    os._exit(os.waitstatus_to_exitcode(status))


def main(name: str, real: str) -> None:
    """Run ``name`` (``python``, or an installed script whose file is ``real``) warm."""
    argv = sys.argv[1:]
    cwd = os.getcwd()
    request = python_request(argv, cwd) if name == "python" else script_request(real, argv)
    path = os.environ.get(VARIABLE, "")
    if request is not None and path:
        try:
            sock = send(path, request, cwd, dict(os.environ), [0, 1, 2])
        except OSError:
            pass
        else:
            end_as(wait(sock))
    os.execv(real, [real, *argv])
