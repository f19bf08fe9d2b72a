"""PostgreSQL + pgvector backend: one memory that many processes and threads share.

Open it with ``MemoryStream(persona, dsn="postgresql://...")`` or
``MemoryStream(persona, backend=PostgresBackend(dsn))``; the schema
(:mod:`langchain_genmem.backends.postgres_schema`) is created or migrated on first use.

Writers: :meth:`PostgresBackend.write_lock` opens a transaction on a pooled connection and
takes a transaction-scoped advisory lock on the persona; ``read_*``, ``commit`` and
``write_state`` called inside the block run in that transaction. So any number of processes
may add to one persona: each add is numbered after the last committed one and is all or
nothing. Node rows go in by binary ``COPY``; keyword strengths by the Dify workflow's upsert.

Lock order: every transaction that changes rows of a persona others may change too writes the
persona's ``genmem_personas`` row first (a write upserts its state there before it deletes or
re-keys memories; a reader storing access times updates its access revision there first),
then its memories' rows, then its keyword strengths. So a forget and a reader storing access
times wait for each other instead of deadlocking. A deadlock or
serialization failure PostgreSQL reports anyway is retried (:data:`CONFLICT_ATTEMPTS`) where
the transaction is the call's own, and is a
:class:`~langchain_genmem.core.errors.StorageConflictError` where it is a caller's write lock.

Readers: ``read_head`` is one indexed row; a stream calls it before every retrieval and
loads only what changed (new nodes, or access times newer than it saw). Access times are
written by one ``UPDATE`` per retrieval (a primary-key lookup per memory) with
``GREATEST``, so two processes racing never move a ``last_accessed`` backwards (the Dify
workflow's advice for concurrent access updates). A read of several statements (a ranking,
nodes with gaps) runs in one read-only ``REPEATABLE READ`` transaction: one snapshot, so a
forget that commits meanwhile neither fails it nor mixes two states in it.

Failures: every driver or pool error of a call (the server gone, a lost connection, no
connection in time, a refused statement) is raised as
:class:`~langchain_genmem.core.errors.StorageError` whose message is one line naming what the
call was doing and why, by the error's class (:func:`failure_reason`), with the driver's
error as its cause (:func:`storage_errors`); the driver's own text goes to this module's log.
A lost connection closes the pool and has a background thread probe the server
(:class:`Reachability`): until it answers again, calls fail at once instead of each waiting,
and the next call after that connects afresh, so a stream outlives a restart of the server.
Connecting waits at most ``connect_timeout`` seconds (:func:`resolve_connect_timeout`); a
call waits at most ``request_timeout`` seconds for a connection
(:func:`resolve_request_timeout`).

:meth:`PostgresBackend.rank` ranks candidates in the database exactly as
:mod:`langchain_genmem.numerics.scoring` does in process (see
:mod:`langchain_genmem.backends.postgres_scoring`).
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import json
import logging
import os
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Concatenate, ParamSpec, TypeVar

import numpy as np

from langchain_genmem.backends.base import (
    CONFLICT_ATTEMPTS,
    STORE_TIMEOUT_VARIABLE,
    Capability,
    DatabaseRanking,
    Erasure,
    Head,
    ScoredRow,
    StoredNode,
    check_replaced,
    conflict_pause,
    forgotten_runs,
)
from langchain_genmem.backends.postgres_schema import (
    ensure_schema,
    fix_dimension_sql,
)
from langchain_genmem.backends.postgres_scoring import (
    approximation_error,
    candidates_params,
    candidates_query,
    likely_rows,
    unpack,
)
from langchain_genmem.core.errors import (
    ConfigurationError,
    EmbeddingDimensionError,
    StorageConflictError,
    StorageError,
    ValidationError,
)
from langchain_genmem.core.modes import RecencyMode
from langchain_genmem.core.nodes import STRENGTH_TYPES, MemoryNode, node_number
from langchain_genmem.core.state import StreamState
from langchain_genmem.core.text import unique
from langchain_genmem.core.timeutil import from_epoch, naive, to_epoch
from langchain_genmem.core.validation import finite_number, finite_vector, persona_name
from langchain_genmem.numerics.scoring import Weights, exact_cosine, rank, recency

NODE_COLUMNS = (
    "persona_name", "node_count", "node_id", "type_count", "type", "depth", "created_at",
    "expiration", "last_accessed", "subject", "predicate", "object", "description",
    "embedding_key", "poignancy", "keywords", "keywords_lower", "filling", "embedding",
    "embedding_norm", "conversation", "speaker",
)
NODE_TYPES_SQL = (
    "text", "int4", "text", "int4", "text", "int4", "timestamp", "timestamp", "timestamp",
    "text", "text", "text", "text", "text", "float8", "text[]", "text[]", "jsonb", "vector",
    "float8", "text", "text",
)
READ_COLUMNS = (
    "node_count, type_count, type, depth, created_at, expiration, last_accessed, subject, "
    "predicate, object, description, embedding_key, poignancy, keywords, filling, conversation, "
    "speaker"
)
STATE_COLUMNS = (
    "rev", "node_count", "type_count", "dim", "importance_trigger_max", "importance_trigger_curr",
    "importance_ele_n", "recency_w", "relevance_w", "importance_w", "recency_decay",
    "relevance_mode", "lexical_weight", "extra", "forgotten", "idempotency", "superseded",
    "rekeyed",
)


DEFAULT_CONNECT_TIMEOUT = 10.0
"""Seconds to wait for PostgreSQL to answer a new connection when neither the ``dsn``
(``connect_timeout=``) nor the environment (``PGCONNECT_TIMEOUT``) sets it; the driver's own
default is over two minutes."""

CONFLICT_STATES = frozenset({"40P01", "40001"})
"""SQLSTATEs of a transaction PostgreSQL ended to resolve a conflict (deadlock detected,
serialization failure): nothing was committed and running it again is safe."""

PROBE_INTERVAL = 0.5
"""Seconds between two attempts to reach a server found unreachable (:class:`Reachability`)."""

# Why a statement failed, in words, by SQLSTATE or its class (the first match); the code
# follows in the message, the driver's own text goes to the log.
SQLSTATE_REASONS: tuple[tuple[str, str], ...] = (
    ("40P01", "a deadlock with another transaction (safe to retry)"),
    ("40001", "a serialization conflict with another transaction (safe to retry)"),
    ("3D000", "the database does not exist"),
    ("28", "the server refused the user or password"),
    ("42501", "the role lacks a privilege on the genmem tables"),
    ("42P01", "a genmem table is missing (was the schema dropped?)"),
    ("55P03", "a lock was not available in time"),
    ("57014", "the statement was cancelled (a statement timeout?)"),
    ("57P", "the server is shutting down or starting up"),
    ("53", "the server is out of resources (connections, memory or disk)"),
    ("08", "the connection failed"),
    ("22", "the server refused a value"),
    ("23", "a row broke a constraint of the schema"),
    ("25", "the transaction was in a state that refused the statement"),
    ("42", "the server refused the statement (does the schema match this release?)"),
)

# Why a connection failed before the server gave a SQLSTATE: patterns of libpq's words (the
# first match); anything else is a connection refused or lost.
CONNECT_REASONS: tuple[tuple[str, str], ...] = (
    (r"timeout expired", "the server did not answer within the connect timeout"),
    (r"the database system is", "the server is shutting down or starting up"),
    (r'password authentication failed|role ".*" does not exist',
     "the server refused the user or password"),
    (r"no pg_hba\.conf entry", "the server refused this client (pg_hba.conf)"),
    (r'database ".*" does not exist', "the database does not exist"),
    (r"could not translate host name", "the host name is unknown"),
    (r"too many (clients|connections)",
     "the server is out of resources (connections, memory or disk)"),
)
CONNECTION_LOST = "the connection was refused or lost (is the server running and reachable?)"

logger = logging.getLogger(__name__)

POOL_NAME = "genmem"
"""The name of this backend's connection pools, as psycopg_pool's log gives it."""


class _PoolRetriesAsDebug(logging.Filter):
    """psycopg_pool's warnings about connecting our pools, told at DEBUG instead.

    While the server is down a pool's workers warn at each attempt to connect; this backend
    already says the server went and came back, in one line each (:class:`Reachability`).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        if record.levelno == logging.WARNING and args and args[0] == POOL_NAME:
            record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return True


logging.getLogger("psycopg.pool").addFilter(_PoolRetriesAsDebug())

try:
    import psycopg
    from pgvector import Vector
    from pgvector.psycopg import register_vector
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.types.json import Jsonb
    from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout
except ImportError:  # pragma: no cover - depends on the environment
    psycopg = None  # type: ignore[assignment]

P = ParamSpec("P")
R = TypeVar("R")


def _require_driver() -> None:
    if psycopg is None:  # pragma: no cover - depends on the environment
        msg = (
            "the PostgreSQL backend needs psycopg, psycopg_pool and pgvector: "
            "pip install 'langchain-genmem[postgres]'"
        )
        raise ConfigurationError(msg)


def resolve_connect_timeout(dsn: str, given: float | None = None) -> float:
    """Seconds a new connection may take: ``given``, else the DSN's or the environment's.

    Args:
        dsn: the connection string; its ``connect_timeout`` is used when ``given`` is None.
        given: the caller's value, None to take the DSN's, then ``PGCONNECT_TIMEOUT``, then
            :data:`DEFAULT_CONNECT_TIMEOUT`.

    Returns:
        The timeout in seconds (> 0).

    Raises:
        ValidationError: a value that is not a number > 0.
    """
    field = "connect_timeout"
    if given is not None:
        return _positive_seconds(given, field)
    try:
        text = conninfo_to_dict(dsn).get(field)
    except psycopg.ProgrammingError:  # an unparsable DSN fails when connecting
        text = None
    if text is None:
        text = os.environ.get("PGCONNECT_TIMEOUT")
    if text is None:
        return DEFAULT_CONNECT_TIMEOUT
    return _text_seconds(text, field)


def resolve_request_timeout(given: float | None, connect_timeout: float) -> float:
    """Seconds a call may wait for a connection: ``given``, else the environment's.

    Args:
        given: the caller's value; None takes :data:`STORE_TIMEOUT_VARIABLE`, else
            ``connect_timeout``.
        connect_timeout: the connect timeout, the default.

    Returns:
        The timeout in seconds (> 0).

    Raises:
        ValidationError: a value that is not a number > 0.
    """
    field = "request_timeout"
    if given is not None:
        return _positive_seconds(given, field)
    text = os.environ.get(STORE_TIMEOUT_VARIABLE) or None
    if text is None:
        return connect_timeout
    return _text_seconds(text, field, source=STORE_TIMEOUT_VARIABLE)


def _text_seconds(text: str | int, field: str, *, source: str | None = None) -> float:
    """A setting's text (from a DSN or a variable) as seconds > 0.

    Args:
        text: the text (psycopg types a DSN's values as text or int).
        field: the setting it is, named in the error.
        source: where the text came from (a variable), named instead of ``field`` when it
            is no number.

    Raises:
        ValidationError: not a number > 0.
    """
    try:
        given = float(text)
    except ValueError as e:
        msg = f"{source or field}: expected seconds > 0, got {text!r}"
        raise ValidationError(msg, field=field) from e
    return _positive_seconds(given, field)


def _positive_seconds(given: Any, field: str) -> float:
    """``given`` as seconds > 0.

    Raises:
        ValidationError: not a finite number > 0.
    """
    seconds = finite_number(given, field)
    if seconds <= 0:
        msg = f"{field}: expected seconds > 0, got {given!r}"
        raise ValidationError(msg, field=field)
    return seconds


def connection_lost(e: BaseException) -> bool:
    """Whether a driver error means the connection is gone (not a refused statement).

    Args:
        e: the error.

    Returns:
        True for no connection in time, a closed or broken connection, or the server
        shutting down.
    """
    if isinstance(e, PoolTimeout | PoolClosed | psycopg.InterfaceError):
        return True
    if isinstance(e, psycopg.OperationalError):
        state = e.sqlstate
        return state is None or state.startswith(("08", "57P"))
    return False


def conflict(e: BaseException) -> bool:
    """Whether PostgreSQL ended the transaction to resolve a conflict (:data:`CONFLICT_STATES`).

    Args:
        e: the error.

    Returns:
        True for a deadlock or a serialization failure.
    """
    return getattr(e, "sqlstate", None) in CONFLICT_STATES


def failure_reason(e: BaseException, waited: float) -> str:
    """Why a driver or pool error happened, in a few words on one line, without its text.

    Args:
        e: the error.
        waited: the seconds a call waits for a connection (named when none came).

    Returns:
        The reason; a SQLSTATE, when the server gave one, follows it in parentheses.
    """
    if isinstance(e, PoolTimeout):
        return f"no connection within {waited:g} s (is the server running and reachable?)"
    state = getattr(e, "sqlstate", None)
    if state:
        words = next((w for code, w in SQLSTATE_REASONS if state.startswith(code)),
                     "the server refused the statement")
        return f"{words} (SQLSTATE {state})"
    if isinstance(e, psycopg.errors.ConnectionTimeout):
        return "the server did not answer within the connect timeout"
    if isinstance(e, psycopg.OperationalError | PoolClosed):
        text = str(e)
        return next((w for pattern, w in CONNECT_REASONS if re.search(pattern, text)),
                    CONNECTION_LOST)
    if isinstance(e, psycopg.InterfaceError):
        return "the connection was closed"
    return f"the driver failed ({type(e).__name__})"


def driver_text(e: BaseException) -> str:
    """The driver's own text of an error on one line, for the log (never for messages)."""
    return " ".join(str(e).split()) or type(e).__name__


class Unreachable(Exception):
    """Raised inside the backend while the server is known not to answer; never leaves it.

    :meth:`PostgresBackend.failures` turns it into a StorageError naming the call.

    Attributes:
        reason: why, in words.
        error: the driver's error the last probe met, or None.
    """

    def __init__(self, reason: str, error: BaseException | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.error = error


class Reachability:
    """Whether the server answers; while it does not, calls fail at once.

    After a lost connection the backend calls :meth:`lost`: a background thread connects
    (each attempt bounded by the connect timeout) every :data:`PROBE_INTERVAL` seconds until
    the server answers. A call (:meth:`check`) waits for the first attempt's outcome, but not
    past its deadline; once an attempt failed, calls fail at once until one succeeds. The
    server going and coming back is logged once each, the driver's text included.

    Args:
        probe: connects once; raises the driver's error when the server does not answer.
        where: the server in words, for the log.
        waited: the seconds a call waits for a connection (for the reason of a timeout).
    """

    def __init__(self, probe: Callable[[], None], where: str, waited: float) -> None:
        self._probe = probe
        self._where = where
        self._waited = waited
        self._changed = threading.Condition()
        self._state = "up"  # "up", "probing" (the first attempt runs), "down"
        self._error: BaseException | None = None
        self._session = 0  # each round of probes; close() ends the current one

    @property
    def state(self) -> str:
        """``"up"``, ``"probing"`` or ``"down"``."""
        with self._changed:
            return self._state

    def check(self, deadline: float) -> None:
        """Return when the server may be used; raise at once while it is known not to answer.

        Args:
            deadline: the ``time.monotonic()`` past which the call waits no longer.

        Raises:
            Unreachable: the last attempt to reach the server failed, or the first attempt
                had no outcome before the deadline.
        """
        with self._changed:
            while self._state == "probing":
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Unreachable(f"no connection within {self._waited:g} s (is the "
                                      "server running and reachable?)", self._error)
                self._changed.wait(left)
            if self._state == "down":
                reason = failure_reason(self._error, self._waited) if self._error else (
                    CONNECTION_LOST)
                raise Unreachable(f"{reason}; calls fail at once until the server answers "
                                  "again", self._error)

    def lost(self, error: BaseException) -> None:
        """A connection was lost: start probing the server, unless already doing so.

        Args:
            error: the driver's error that lost it.
        """
        with self._changed:
            if self._state != "up":
                return
            self._state, self._error = "probing", error
            self._session += 1
            session = self._session
        threading.Thread(target=self._run, args=(session,), daemon=True,
                         name="genmem-postgres-probe").start()

    def close(self) -> None:
        """Stop probing; the next call connects as if nothing had been lost."""
        with self._changed:
            self._session += 1
            self._state, self._error = "up", None
            self._changed.notify_all()

    def _run(self, session: int) -> None:
        while True:
            try:
                self._probe()
            except Exception as e:  # noqa: BLE001 - any failure to connect: try again later
                if not self._failed(session, e):
                    return
            else:
                self._answered(session)
                return
            with self._changed:
                if self._changed.wait_for(lambda: self._session != session, PROBE_INTERVAL):
                    return

    def _failed(self, session: int, error: BaseException) -> bool:
        """Record a failed attempt; False when this round of probes was ended meanwhile."""
        with self._changed:
            if self._session != session:
                return False
            first = self._state == "probing"
            self._state, self._error = "down", error
            self._changed.notify_all()
        if first:
            logger.warning("PostgreSQL at %s cannot be reached: %s; calls fail at once until it "
                           "answers again (tried every %g s)", self._where, driver_text(error),
                           PROBE_INTERVAL)
        return True

    def _answered(self, session: int) -> None:
        with self._changed:
            if self._session != session:
                return
            was_down = self._state == "down"
            self._state, self._error = "up", None
            self._changed.notify_all()
        if was_down:
            logger.warning("PostgreSQL at %s answers again", self._where)


def storage_errors(
    what: str, note: str = "", *, retry: bool = False
) -> Callable[[Callable[Concatenate[Any, P], R]], Callable[Concatenate[Any, P], R]]:
    """Make a backend method raise its driver and pool errors as StorageError.

    A method that runs its own transaction (not inside a caller's write lock) is run again
    when PostgreSQL ended that transaction in a conflict, up to :data:`CONFLICT_ATTEMPTS`
    times in all, after a short random wait; inside a write lock the conflict is raised at
    once, as :class:`~langchain_genmem.core.errors.StorageConflictError`, for the caller to
    run its whole write again.

    Args:
        what: what the method does, after "could not"; ``{persona}`` is its first argument.
        note: appended to the message.
        retry: run the method once more on a fresh connection when the first one had been
            lost (a read, outside a write lock: a server restarted since the last call).

    Returns:
        The decorator.
    """

    def wrap(method: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], R]:
        @functools.wraps(method)
        def guarded(self: Any, *args: P.args, **kwargs: P.kwargs) -> R:
            persona = args[0] if args else kwargs.get("persona")
            if "{persona}" in what:
                persona_name(persona)  # refused before PostgreSQL sees it
            doing = what.format(persona=repr(persona))
            own = self._held.get() is None  # the method's transactions are its own
            again = retry and own
            conflicts = 0
            while True:
                try:
                    with self.failures(doing, note):
                        return method(self, *args, **kwargs)
                except StorageConflictError as e:
                    conflicts += 1
                    if not own:
                        raise  # the caller's transaction: only the caller can run it again
                    if conflicts >= CONFLICT_ATTEMPTS:
                        logger.warning("could not %s after %d conflicts: %s", doing,
                                       conflicts, driver_text(e.__cause__ or e))
                        raise
                    time.sleep(conflict_pause(conflicts))
                except StorageError as e:
                    if not (again and _stale(e)):
                        raise
                    again = False

        return guarded

    return wrap


def _stale(error: StorageError) -> bool:
    """Whether a call lost a connection that had been good (not one that never came).

    A call refused because the server is known not to answer (its context is
    :class:`Unreachable`) lost nothing: running it again would be refused too.
    """
    cause = error.__cause__
    return (
        cause is not None and not isinstance(error.__context__, Unreachable)
        and connection_lost(cause)
        and not isinstance(cause, PoolTimeout | psycopg.errors.ConnectionTimeout)
    )


class PostgresBackend:
    """Nodes, vectors, keyword strengths and states of any number of personas in PostgreSQL.

    Args:
        dsn: a libpq connection string or URI (``postgresql://user:pw@host:5432/db``).
        dim: fix the vector size up front; None lets the first write fix it.
        min_size: connections the pool keeps open.
        max_size: most connections the pool opens.
        lock_timeout: seconds a writer waits for another writer of the same persona
            before :class:`~langchain_genmem.core.errors.StorageError` (0: wait forever).
        connect_timeout: seconds a new connection may take before
            :class:`~langchain_genmem.core.errors.StorageError`; None takes the DSN's
            ``connect_timeout``, else ``PGCONNECT_TIMEOUT``, else 10 s.
        request_timeout: the most seconds a call waits for a connection (a free pooled one,
            or the server's answer after a lost one) before
            :class:`~langchain_genmem.core.errors.StorageError`; None takes
            ``GENMEM_STORE_TIMEOUT``, else ``connect_timeout``. While the server is known
            not to answer, calls fail at once (:class:`Reachability`).

    Example:
        .. code-block:: python

            backend = PostgresBackend("postgresql://genmem@localhost/genmem")
            stream = MemoryStream("Maria Lopez", backend=backend)
    """

    capabilities: frozenset[Capability] = frozenset({"access_log", "ranking"})
    """Access times read back by revision; ranking in the database (``score_in="database"``)."""

    def __init__(
        self,
        dsn: str,
        *,
        dim: int | None = None,
        min_size: int = 1,
        max_size: int = 8,
        lock_timeout: float = 60.0,
        connect_timeout: float | None = None,
        request_timeout: float | None = None,
    ) -> None:
        _require_driver()
        self.dsn = dsn
        self.connect_timeout = resolve_connect_timeout(dsn, connect_timeout)
        self.request_timeout = resolve_request_timeout(request_timeout, self.connect_timeout)
        self._held: contextvars.ContextVar[Any] = contextvars.ContextVar(
            f"genmem-pg-{id(self)}", default=None
        )
        self.lock_timeout = lock_timeout
        self._sizes = (min_size, max_size)
        self._pool: ConnectionPool | None = None
        self._pool_lock = threading.Lock()
        self._dim: int | None = None
        self.reachability = Reachability(self._probe, redacted(dsn), self.request_timeout)
        try:
            with psycopg.connect(dsn, **self._connect_kwargs(self.request_timeout)) as conn:
                ensure_schema(conn)
                if dim is not None:
                    self._fix_dimension(conn, dim)
                    conn.commit()
        except psycopg.Error as e:
            logger.debug("could not open PostgreSQL at %s: %s", redacted(dsn), driver_text(e))
            msg = (f"could not open PostgreSQL at {redacted(dsn)}: "
                   f"{failure_reason(e, self.request_timeout)}")
            raise StorageError(msg) from e

    def _connect_kwargs(self, within: float | None = None) -> dict[str, Any]:
        """The connection's timeout: the connect timeout, or less when ``within`` is less."""
        seconds = self.connect_timeout if within is None else min(within, self.connect_timeout)
        # libpq counts whole seconds (and psycopg waits at least 2)
        return {"connect_timeout": max(1, round(seconds))}

    @property
    def pool(self) -> ConnectionPool:
        """The connection pool, opened on first use (again after :meth:`close`)."""
        with self._pool_lock:
            if self._pool is None:
                # autocommit: a read is one round trip; writes open explicit transactions
                self._pool = ConnectionPool(
                    self.dsn, min_size=self._sizes[0], max_size=self._sizes[1],
                    kwargs={"autocommit": True, **self._connect_kwargs()},
                    configure=_configure, open=True, name=POOL_NAME,
                    timeout=self.request_timeout,
                )
            return self._pool

    # ------------------------------------------------------------------ connections

    @contextmanager
    def _conn(self) -> Iterator[Any]:
        """The connection of the write lock held in this context, or a pooled one."""
        held = self._held.get()
        if held is not None:
            yield held
            return
        with self._pooled() as conn:
            yield conn

    @contextmanager
    def _pooled(self) -> Iterator[Any]:
        """A pooled connection, waited for at most ``request_timeout`` seconds in all.

        A connection the block found broken is not given back: its pool is closed instead
        (the server is probably gone for all of them) and the next call opens another; so is
        a pool that gave no connection in time.

        Raises:
            Unreachable: the server is known not to answer (at once), or did not answer
                after a lost connection before the deadline.
            PoolTimeout: no connection before the deadline.
        """
        deadline = time.monotonic() + self.request_timeout
        self.reachability.check(deadline)
        pool = self.pool
        try:
            conn = pool.getconn(timeout=max(deadline - time.monotonic(), 0.001))
        except PoolTimeout:
            self._drop_pool(pool)
            raise
        try:
            yield conn
        finally:
            if conn.broken:
                self._drop_pool(pool)
                conn.close()
            else:
                pool.putconn(conn)

    @contextmanager
    def _snapshot(self) -> Iterator[Any]:
        """A connection whose statements all read one snapshot of the database.

        A read-only ``REPEATABLE READ`` transaction on a pooled connection; inside a write
        lock, its transaction (no other writer of the persona commits while it is held).

        Yields:
            The connection.
        """
        held = self._held.get()
        if held is not None:
            yield held
            return
        with self._pooled() as conn:
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True
            try:
                with conn.transaction():
                    yield conn
            finally:
                if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                    conn.isolation_level = conn.read_only = None  # as the pool gave it

    def _probe(self) -> None:
        """Connect once and ask the server a trivial question (see :class:`Reachability`)."""
        with psycopg.connect(self.dsn, **self._connect_kwargs()) as conn:
            conn.execute("SELECT 1")

    @contextmanager
    def failures(self, what: str, note: str = "") -> Iterator[None]:
        """Raise any driver or pool error of the block as a StorageError saying ``what`` failed.

        The message is one line: what failed and why, in a few words (:func:`failure_reason`);
        the driver's own text (with its details, process ids and context) goes to the log. A
        lost connection (the server stopped, the network dropped, no connection in time)
        has the server probed (:class:`Reachability`), so calls fail at once until it
        answers; the pool that lost it was closed (:meth:`_pooled`), so the next call after
        that connects afresh.

        Args:
            what: what the block does, after "could not" (``"read the memories of 'Maria'"``).
            note: appended to the message (``"; nothing was committed"``).

        Yields:
            Nothing.

        Raises:
            StorageConflictError: PostgreSQL ended the transaction in a conflict (a deadlock,
                a serialization failure): safe to run again.
            StorageError: the block raised another psycopg or pool error (its cause), or the
                server is known not to answer.
        """
        try:
            yield
        except Unreachable as e:
            where = f"could not {what} (PostgreSQL at {redacted(self.dsn)})"
            logger.debug("%s: %s", where, e.reason)
            raise StorageError(f"{where}: {e.reason}{note}") from e.error
        except psycopg.Error as e:
            where = f"could not {what} (PostgreSQL at {redacted(self.dsn)})"  # on failure only
            reason = failure_reason(e, self.request_timeout)
            if conflict(e):
                logger.debug("%s: %s", where, driver_text(e))
                raise StorageConflictError(f"{where}: {reason}{note}") from e
            if connection_lost(e):
                logger.debug("%s: %s", where, driver_text(e))
                self.reachability.lost(e)
            else:
                logger.warning("%s: %s", where, driver_text(e))
            raise StorageError(f"{where}: {reason}{note}") from e

    def _drop_pool(self, pool: ConnectionPool) -> None:
        """Close a pool that lost a connection (or gave none); the next call opens a new one.

        Args:
            pool: the pool; one already replaced by another is closed already.
        """
        with self._pool_lock:
            if pool is not self._pool:
                return
            self._pool = None
        self._close_pool(pool, wait=False)

    def _close_pool(self, pool: ConnectionPool, *, wait: bool) -> None:
        """Close a pool, its workers given the time to end an attempt to connect.

        A worker may be connecting (for up to the connect timeout); the pool is closed in a
        thread of its own unless ``wait``, so a call after a lost connection never waits for
        that, and no worker is left behind with a warning.
        """
        timeout = self.connect_timeout + 1.0
        if wait:
            pool.close(timeout=timeout)
        else:
            threading.Thread(target=pool.close, kwargs={"timeout": timeout}, daemon=True,
                             name="genmem-postgres-close").start()

    @contextmanager
    def write_lock(self, persona: str) -> Iterator[None]:
        """Hold the exclusive right to write ``persona`` until the block exits.

        A transaction on one pooled connection holds ``pg_advisory_xact_lock`` on a hash of
        the persona; reads and writes of this backend inside the block run in it, and it
        commits when the block exits (rolls back on an exception). The lock dies with the
        transaction, also when the process dies.

        Args:
            persona: the persona.

        Yields:
            Nothing; write inside the block.

        Raises:
            StorageConflictError: PostgreSQL ended the transaction in a conflict (a deadlock
                or a serialization failure); nothing was committed: run the whole write
                again, the block included.
            StorageError: another writer held the persona longer than ``lock_timeout``,
                or PostgreSQL failed (nothing was committed).
        """
        if self._held.get() is not None:
            yield  # already inside this context's transaction
            return
        persona_name(persona)
        with self.failures(f"store the write of {persona!r}", "; nothing was committed"):
            with self._transaction(persona):
                yield

    @contextmanager
    def _transaction(self, persona: str) -> Iterator[Any]:
        """The write lock's transaction, its driver errors left to the caller to name."""
        with self._pooled() as conn, conn.transaction():
            self._lock(conn, persona)
            token = self._held.set(conn)
            try:
                yield conn
            finally:
                self._held.reset(token)

    def _lock(self, conn: Any, persona: str) -> None:
        ms = int(self.lock_timeout * 1000)
        conn.execute(f"SET LOCAL lock_timeout = {ms}")
        try:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (persona_lock(persona),))
        except psycopg.errors.LockNotAvailable as e:
            msg = (
                f"persona {persona!r}: another writer held it for more than "
                f"{self.lock_timeout:g} s; nothing was written"
            )
            raise StorageError(msg) from e

    @contextmanager
    def _writing(self, persona: str) -> Iterator[Any]:
        """The write lock's connection, taking the lock when the caller did not.

        The method's own :func:`storage_errors` names what failed, so errors pass as raised.
        """
        held = self._held.get()
        if held is not None:
            yield held
            return
        with self._transaction(persona) as conn:
            yield conn

    # ------------------------------------------------------------------ reading

    @storage_errors("check persona {persona} for changes", retry=True)
    def read_head(self, persona: str) -> Head | None:
        """The persona's revisions and node count (one indexed row), or None."""
        with self._conn() as conn:
            row = conn.execute(
                "SELECT rev, node_count, access_rev FROM genmem_personas "
                "WHERE persona_name = %s", (persona,),
            ).fetchone()
        if row is None:
            return None
        return Head(rev=int(row[0]), node_count=int(row[1]), access_rev=int(row[2]))

    @storage_errors("read the state of persona {persona}", retry=True)
    def read_state(self, persona: str) -> StreamState | None:
        """The persona's committed state with its keyword strengths (one snapshot), or None."""
        with self._conn() as conn:
            row = conn.execute(
                f"SELECT {', '.join(STATE_COLUMNS)}, (SELECT coalesce(json_agg(json_build_array("
                "k.memory_type, k.keyword, k.strength)), '[]') FROM kw_strength k "
                "WHERE k.persona_name = %(persona)s) "  # named in each table: one shard (Citus)
                "FROM genmem_personas p WHERE p.persona_name = %(persona)s", {"persona": persona},
            ).fetchone()
        if row is None:
            return None
        values = dict(zip(STATE_COLUMNS, row[:-1], strict=True))
        kw: dict[str, dict[str, int]] = {t: {} for t in STRENGTH_TYPES}
        for memory_type, keyword, strength in sorted(row[-1]):
            kw.setdefault(memory_type, {})[keyword] = int(strength)
        return StreamState.model_validate({**values, "kw_strength": kw})

    @storage_errors("load the memories of persona {persona}", retry=True)
    def read_nodes(self, persona: str, first: int, last: int) -> list[StoredNode]:
        """The nodes numbered ``first`` .. ``last`` that exist, with their vectors, in order.

        Forgotten nodes' rows are deleted in the transaction that lists them as forgotten;
        where rows are missing, the list is read in the same snapshot as the rows, so it
        explains exactly them.

        Raises:
            StorageError: a number neither stored nor forgotten (a damaged store).
        """
        with self._snapshot() as conn, conn.cursor(binary=True) as cur:
            cur.execute(
                f"SELECT {READ_COLUMNS}, embedding FROM memory_nodes WHERE persona_name = %s "
                "AND node_count BETWEEN %s AND %s ORDER BY node_count",
                (persona, first, last),
            )
            rows = cur.fetchall()
            if len(rows) != last - first + 1:
                rows = self._existing(conn, persona, rows, first, last)
        return [StoredNode(node_from_row(r[:-1]), _as_array(r[-1])) for r in rows]

    @staticmethod
    def _existing(
        conn: Any, persona: str, rows: list[Any], first: int, last: int
    ) -> list[Any]:
        """The rows of a range with gaps, checked against the forgotten numbers."""
        got = conn.execute(
            "SELECT forgotten FROM genmem_personas WHERE persona_name = %s", (persona,)
        ).fetchone()
        ranges = [tuple(r) for r in (got[0] if got else [])]
        live = StreamState.model_construct(node_count=last, forgotten=ranges)
        wanted = live.live_numbers(first, last).tolist()
        alive = set(wanted)
        kept = [r for r in rows if r[0] in alive]
        if [r[0] for r in kept] != wanted:
            msg = (
                f"persona {persona!r}: committed nodes missing from the store "
                f"(wanted {len(wanted)} of node_{first}..node_{last}, found {len(kept)})"
            )
            raise StorageError(msg)
        return kept

    @storage_errors("read the access times of persona {persona}", retry=True)
    def read_access(self, persona: str, since: int) -> dict[int, float]:
        """Access times written after access revision ``since``.

        Args:
            persona: the persona.
            since: the access revision the caller has seen.

        Returns:
            ``{node_count: last_accessed epoch}``.
        """
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT node_count, last_accessed FROM memory_nodes "
                "WHERE persona_name = %s AND access_rev > %s", (persona, since),
            ).fetchall()
        return {int(n): to_epoch(t) for n, t in rows}

    @storage_errors("look up memories of persona {persona} by keyword", retry=True)
    def retrieve_relevant(
        self, persona: str, node_type: str, terms: Sequence[str]
    ) -> list[MemoryNode]:
        """The keyword ``retrieve()`` from the keywords column: nodes of one type under any term.

        Case-insensitive (keywords and terms lowercased), newest first, each node once.

        Args:
            persona: the persona.
            node_type: ``"event"``, ``"thought"`` or ``"chat"``.
            terms: the subject, predicate and object (or any terms).

        Returns:
            The nodes.
        """
        wanted = [t.lower() for t in terms if t]
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {READ_COLUMNS} FROM memory_nodes WHERE persona_name = %s AND type = %s "
                "AND keywords_lower && %s::text[] ORDER BY node_count DESC",
                (persona, node_type, wanted),
            ).fetchall()
        return [node_from_row(r) for r in rows]

    @storage_errors("rank the memories of persona {persona}", retry=True)
    def rank(
        self,
        persona: str,
        query: np.ndarray,
        *,
        k: int,
        mode: RecencyMode,
        decay: float,
        weights: Weights,
        now: datetime,
        include_expired: bool = False,
        where: tuple[str, dict[str, Any]] = ("", {}),
    ) -> DatabaseRanking:
        """Score every candidate in the database's one pass and return the top k, as in process.

        One query aggregates the candidates' columns and approximate cosines; the ranking is
        the in-process one over them, reading the few rows it needs exactly by primary key
        (see :mod:`langchain_genmem.backends.postgres_scoring`). All its statements read one
        snapshot (a read-only ``REPEATABLE READ`` transaction): a forget that commits
        meanwhile is either wholly in the ranking's view or not at all.

        Args:
            persona: the persona.
            query: the query vector.
            k: how many.
            mode: ``"hours"``, ``"rank"`` or ``"reverie"``.
            decay: the recency decay.
            weights: the weights and gains.
            now: the current (simulation) time.
            include_expired: score expired memories too (``"reverie"`` always does).
            where: a candidate filter's SQL condition and parameters
                (:meth:`~langchain_genmem.numerics.candidate_filter.CandidateFilter.sql`).

        Returns:
            The ranking.

        Raises:
            EmbeddingDimensionError: the query's size differs from the stored vectors'.
            ValidationError: the query vector holds NaN or infinite numbers.
        """
        query = finite_vector(query, "query embedding")
        with self._snapshot() as conn:  # every statement of the ranking reads one snapshot
            # the table's dimension, once set, is kept (as writing keeps it)
            dim = self._dim = self._dim or self._table_dimension(conn)
            if dim is not None and query.shape[0] != dim:
                raise EmbeddingDimensionError(dim, int(query.shape[0]), where="query embedding")
            if k <= 0 or dim is None:
                return DatabaseRanking([], 0, None)
            sql = candidates_query(include_expired or mode == "reverie", where[0])
            params = {**candidates_params(persona, query, now), **where[1]}
            packed = conn.execute(sql, params, binary=True).fetchone()[0]
            cands = unpack(packed, query)
            if len(cands) == 0:
                return DatabaseRanking([], 0, None)
            raw = recency(cands, mode, decay, to_epoch(now))
            # the rows the exact steps will most likely ask for, read with the first ones
            likely = [likely_rows(cands, raw, weights, k)]
            read: dict[int, tuple[Any, ...]] = {}  # node number: its row and vector

            def rows_of(idx: np.ndarray) -> list[tuple[Any, ...]]:
                numbers = cands.node_count[idx].tolist()
                wanted = numbers + (likely.pop().tolist() if likely else [])
                missing = [c for c in wanted if c not in read]
                if missing:
                    read.update((r[0], r) for r in conn.execute(
                        f"SELECT {READ_COLUMNS}, embedding, embedding_norm FROM memory_nodes "
                        "JOIN unnest(%s::bigint[]) AS f(n) ON node_count = f.n "
                        "WHERE persona_name = %s", (missing, persona), binary=True,
                    ))
                if any(c not in read for c in numbers):  # one snapshot: a damaged store
                    msg = f"memories of persona {persona!r} are missing from the store"
                    raise StorageError(msg)
                return [read[c] for c in numbers]

            def exact(idx: np.ndarray) -> np.ndarray:
                rows = rows_of(idx)
                vectors = np.vstack([_as_array(r[-2]) for r in rows])
                norms = np.array([r[-1] for r in rows], dtype=np.float64)
                return exact_cosine(vectors, norms, query)

            ranked = rank(cands, raw, weights, k, exact, approximation_error(dim), overwrite=True)
            best = ranked.best
            rows = rows_of(best)
        s = ranked.scored
        out = [
            ScoredRow(node_from_row(r[:-2]), float(s.score[j]), float(s.recency[j]),
                      float(s.relevance[j]), float(s.importance[j]), float(ranked.cosine[j]))
            for j, r in zip(best.tolist(), rows, strict=True)
        ]
        return DatabaseRanking(out, len(cands), float(s.score.min()))

    @storage_errors("list the personas", retry=True)
    def personas(self) -> list[str]:
        """Every persona with a committed state, sorted."""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT persona_name FROM genmem_personas ORDER BY persona_name"
            ).fetchall()
        return [r[0] for r in rows]

    # ------------------------------------------------------------------ writing

    def remove_uncommitted(self, persona: str, node_count: int) -> int:
        """Nothing to remove: nodes and the state that counts them commit in one transaction.

        Returns:
            0.
        """
        return 0

    @storage_errors("store the write of {persona}", "; nothing was committed")
    def commit(
        self,
        persona: str,
        nodes: Sequence[StoredNode],
        state: StreamState,
        *,
        strength_changes: Mapping[str, Mapping[str, int]] | None = None,
    ) -> None:
        """Copy new nodes in, upsert keyword strengths and the state; one transaction.

        With ``strength_changes`` only the strengths it names are stored (their values in
        ``state.kw_strength``), so a write costs its keywords, not the persona's; None
        compares every stored strength with ``state.kw_strength``.

        Raises:
            EmbeddingDimensionError: a vector does not fit the table's ``vector(d)``.
            StorageError: PostgreSQL failed; nothing was committed.
        """
        with self._writing(persona) as conn:
            if nodes:  # new rows first: no other transaction can see, let alone lock, them
                self._check_dimension(conn, nodes)
                self._copy_nodes(conn, persona, nodes)
            self._store_state(conn, persona, state, strength_changes)

    @storage_errors("forget memories of persona {persona}", "; nothing was forgotten")
    def forget(
        self,
        persona: str,
        node_numbers: Sequence[int],
        state: StreamState,
        replaced: Sequence[StoredNode] = (),
        *,
        strength_changes: Mapping[str, Mapping[str, int]] | None = None,
    ) -> Erasure | None:
        """Delete the nodes' rows, re-key the ``replaced`` ones, store ``state``; one transaction.

        A row holds every field, the vector, the keywords (and their index entries) and
        the access time of its node, so deleting it removes all of them; the keyword
        strengths are stored from ``state``. A re-keyed row gets its new ``embedding_key``,
        vector and norm (its access time stays). A database ranking that starts after the
        commit never sees the deleted rows nor the old vectors. Every statement reaches its
        rows by primary key, so a forget costs what it forgets, not the persona's size.

        Args:
            persona: the persona.
            node_numbers: the numbers to forget.
            state: the state that commits the forget.
            replaced: kept nodes with their new embedded text and vector.
            strength_changes: the keyword strengths the forget changed (``{type: {keyword:
                count}}``; a keyword ``state.kw_strength`` no longer holds is deleted): only
                they are stored. None compares every stored strength with ``state``.

        Returns:
            None: the rows go by PostgreSQL's own deletes; the database's files are its own.

        Raises:
            ValidationError: ``state`` does not list exactly these numbers as forgotten
                (and those of ``replaced`` as re-keyed).
            StorageError: PostgreSQL failed; nothing was forgotten.
        """
        forgotten_runs(persona, node_numbers, state)
        check_replaced(persona, replaced, state)
        with self._writing(persona) as conn:
            _store_row(conn, persona, state)  # before its memories' rows: the lock order
            if state.live_count == 0:  # every memory goes: no list of numbers to send
                conn.execute("DELETE FROM memory_nodes WHERE persona_name = %s", (persona,))
            else:
                # one primary-key lookup per number, whatever the table's statistics say
                # (with "= ANY" a planner that underestimates the persona scans all its rows)
                conn.execute(
                    "DELETE FROM memory_nodes m USING unnest(%s::bigint[]) AS f(n) "
                    "WHERE m.persona_name = %s AND m.node_count = f.n",
                    (sorted({int(n) for n in node_numbers}), persona),
                )
            if replaced:
                self._check_dimension(conn, replaced)
                self._rekey(conn, persona, replaced)
            _store_strengths(conn, persona, state.kw_strength, strength_changes)
        return None

    @staticmethod
    def _rekey(conn: Any, persona: str, replaced: Sequence[StoredNode]) -> None:
        """Give existing rows their new embedding_key, vector and norm."""
        rows = []
        for s in replaced:
            vector = np.asarray(s.vector, dtype=np.float32)
            norm = float(np.linalg.norm(vector.astype(np.float64)))
            rows.append((s.node.embedding_key, Vector(vector), norm, persona, s.node.node_count))
        with conn.cursor() as cur:
            cur.executemany(
                "UPDATE memory_nodes SET embedding_key = %s, embedding = %s, "
                "embedding_norm = %s WHERE persona_name = %s AND node_count = %s", rows,
            )

    @storage_errors("store the state of persona {persona}", "; nothing was committed")
    def write_state(self, persona: str, state: StreamState) -> None:
        """Store a new state with no new nodes (settings, counters)."""
        with self._writing(persona) as conn:
            self._store_state(conn, persona, state)

    @storage_errors("store the access times of persona {persona}")
    def write_access(self, persona: str, times: Mapping[str, float]) -> None:
        """Store access times: one ``UPDATE`` per distinct time, never backwards.

        One transaction of its own (or the write lock's): run again should PostgreSQL end
        it in a conflict (:func:`storage_errors`).
        """
        by_time: dict[float, list[int]] = {}
        for node_id, when in times.items():
            by_time.setdefault(float(when), []).append(node_number(node_id))
        if not by_time:
            return
        with self._conn() as conn, conn.transaction():
            self._store_access(conn, persona, by_time)

    @staticmethod
    def _store_access(conn: Any, persona: str, by_time: Mapping[float, list[int]]) -> None:
        """The persona's row (its access revision) first, then its memories' rows."""
        row = conn.execute(
            "UPDATE genmem_personas SET access_rev = access_rev + 1 "
            "WHERE persona_name = %s RETURNING access_rev", (persona,),
        ).fetchone()
        if row is None:
            return
        for when, numbers in by_time.items():
            conn.execute(  # a primary-key lookup per number (see forget)
                "UPDATE memory_nodes m SET last_accessed = GREATEST(m.last_accessed, %s), "
                "access_rev = %s FROM unnest(%s::bigint[]) AS f(n) "
                "WHERE m.persona_name = %s AND m.node_count = f.n",
                (from_epoch(when), row[0], numbers, persona),
            )

    @storage_errors("delete persona {persona}", "; nothing was deleted")
    def drop(self, persona: str) -> None:
        """Delete every node (with its access time), keyword strength and the state of a persona."""
        with self._writing(persona) as conn:
            for table in ("genmem_personas", "memory_nodes", "kw_strength"):  # the lock order
                conn.execute(f"DELETE FROM {table} WHERE persona_name = %s", (persona,))

    def close(self) -> None:
        """Close the connection pool and stop probing a lost server; a later call reopens."""
        self.reachability.close()
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            self._close_pool(pool, wait=True)

    def _check_dimension(self, conn: Any, nodes: Sequence[StoredNode]) -> None:
        size = int(nodes[0].vector.shape[0])
        fixed = self._dim or self._table_dimension(conn)
        if fixed is None:
            self._fix_dimension(conn, size)
            fixed = size
        self._dim = fixed
        for i, s in enumerate(nodes):
            if int(s.vector.shape[0]) != fixed:
                raise EmbeddingDimensionError(
                    fixed, int(s.vector.shape[0]), where=f"items[{i}].embedding"
                )

    @staticmethod
    def _table_dimension(conn: Any) -> int | None:
        row = conn.execute(
            "SELECT atttypmod FROM pg_attribute "
            "WHERE attrelid = 'memory_nodes'::regclass AND attname = 'embedding'"
        ).fetchone()
        return None if row is None or row[0] is None or row[0] < 0 else int(row[0])

    def _fix_dimension(self, conn: Any, dim: int) -> None:
        fixed = self._table_dimension(conn)
        if fixed is None:
            conn.execute(fix_dimension_sql(dim))
        elif fixed != dim:
            raise EmbeddingDimensionError(fixed, dim, where="PostgresBackend(dim=...)")

    @staticmethod
    def _copy_nodes(conn: Any, persona: str, nodes: Sequence[StoredNode]) -> None:
        columns = ", ".join(NODE_COLUMNS)
        with conn.cursor() as cur, cur.copy(
            f"COPY memory_nodes ({columns}) FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.set_types(list(NODE_TYPES_SQL))
            block = np.vstack([np.asarray(s.vector, dtype=np.float32) for s in nodes])
            norms = np.linalg.norm(block.astype(np.float64), axis=1).tolist()
            for s, norm in zip(nodes, norms, strict=True):
                copy.write_row(_row_of(persona, s, norm))

    @staticmethod
    def _store_state(
        conn: Any,
        persona: str,
        state: StreamState,
        strength_changes: Mapping[str, Mapping[str, int]] | None = None,
    ) -> None:
        """Store the state's row, then the keyword strengths (those changed, when known)."""
        _store_row(conn, persona, state)
        _store_strengths(conn, persona, state.kw_strength, strength_changes)


def _store_row(conn: Any, persona: str, state: StreamState) -> None:
    """Upsert the persona's row of ``genmem_personas`` with ``state``.

    A writer stores it before it changes any other row of the persona (new memories aside,
    which no other transaction can see): the row's lock is the first lock of every
    transaction that changes a persona, readers storing access times included
    (:meth:`PostgresBackend.write_access`), so two of them wait for each other instead of
    each holding what the other needs.
    """
    # extra is JSON already (a store's key records: large), dumped once and not copied first
    values = state.model_dump(include=set(STATE_COLUMNS) - {"extra"})
    for column in ("type_count", "forgotten", "idempotency", "superseded", "rekeyed"):
        values[column] = json.dumps(values.get(column, []))
    values["extra"] = json.dumps(state.extra, ensure_ascii=False)
    names = list(STATE_COLUMNS)
    placeholders = ", ".join(f"%({c})s" for c in names)
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in names)
    conn.execute(
        f"INSERT INTO genmem_personas (persona_name, {', '.join(names)}) "
        f"VALUES (%(persona_name)s, {placeholders}) "
        f"ON CONFLICT (persona_name) DO UPDATE SET {updates}",
        {"persona_name": persona, **values},
    )


def _store_strengths(
    conn: Any,
    persona: str,
    wanted: Mapping[str, Mapping[str, int]],
    changes: Mapping[str, Mapping[str, int]] | None,
) -> None:
    """Make the stored keyword strengths ``wanted``: those ``changes`` names, else all."""
    if changes is None:
        _sync_strengths(conn, persona, wanted)
    else:
        _store_changed_strengths(conn, persona, wanted, changes)


def _sync_strengths(conn: Any, persona: str, wanted: Mapping[str, Mapping[str, int]]) -> None:
    """Make ``kw_strength`` equal ``wanted``: upsert what changed, delete what went away.

    It reads every stored strength of the persona: for a write whose changes are unknown.
    """
    stored = {
        (t, k): s
        for t, k, s in conn.execute(
            "SELECT memory_type, keyword, strength FROM kw_strength WHERE persona_name = %s",
            (persona,),
        ).fetchall()
    }
    target = {(t, k): int(s) for t, m in wanted.items() for k, s in m.items()}
    changed = [(t, k, s) for (t, k), s in target.items() if stored.get((t, k)) != s]
    gone = [(t, k) for (t, k) in stored if (t, k) not in target]
    _write_strengths(conn, persona, changed, gone)


def _store_changed_strengths(
    conn: Any,
    persona: str,
    wanted: Mapping[str, Mapping[str, int]],
    changes: Mapping[str, Mapping[str, int]],
) -> None:
    """Store the strengths ``changes`` names as ``wanted`` holds them (deleted where it does not).

    Its cost is the keywords named, not the persona's vocabulary.
    """
    changed, gone = [], []
    for t, named in changes.items():
        held = wanted.get(t, {})
        for k in named:
            if k in held:
                changed.append((t, k, int(held[k])))
            else:
                gone.append((t, k))
    _write_strengths(conn, persona, changed, gone)


def _write_strengths(
    conn: Any, persona: str, changed: Sequence[tuple[str, str, int]],
    gone: Sequence[tuple[str, str]],
) -> None:
    """Upsert ``changed`` (type, keyword, strength) and delete ``gone`` (type, keyword)."""
    if changed:
        conn.execute(
            "INSERT INTO kw_strength (persona_name, keyword, memory_type, strength) "
            "SELECT %s, k, t, s FROM unnest(%s::text[], %s::text[], %s::int[]) AS u(t, k, s) "
            "ON CONFLICT (persona_name, keyword, memory_type) "
            "DO UPDATE SET strength = EXCLUDED.strength",
            (persona, [c[0] for c in changed], [c[1] for c in changed], [c[2] for c in changed]),
        )
    if gone:
        conn.execute(
            "DELETE FROM kw_strength WHERE persona_name = %s AND (memory_type, keyword) IN "
            "(SELECT * FROM unnest(%s::text[], %s::text[]))",
            (persona, [g[0] for g in gone], [g[1] for g in gone]),
        )


def _configure(conn: Any) -> None:
    """Set up a new pooled connection: pgvector's types."""
    register_vector(conn)


def persona_lock(persona: str) -> int:
    """The advisory lock key of a persona: a stable signed 64-bit hash of its name.

    Args:
        persona: the persona.

    Returns:
        The key.
    """
    digest = hashlib.blake2b(persona.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def node_from_row(r: Sequence[Any]) -> MemoryNode:
    """A MemoryNode from a row of ``READ_COLUMNS``.

    Args:
        r: the row.

    Returns:
        The node.
    """
    return MemoryNode.model_construct(
        node_id=f"node_{r[0]}",
        node_count=int(r[0]),
        type_count=int(r[1]),
        type=r[2],
        depth=int(r[3]),
        created=r[4],
        expiration=r[5],
        last_accessed=r[6],
        subject=r[7],
        predicate=r[8],
        object=r[9],
        description=r[10],
        embedding_key=r[11],
        poignancy=float(r[12]),
        keywords=list(r[13]),
        filling=r[14],
        conversation=r[15],
        speaker=r[16],
    )


def _row_of(persona: str, s: StoredNode, norm: float) -> tuple[Any, ...]:
    n = s.node
    return (
        persona, n.node_count, n.node_id, n.type_count, n.type, n.depth, _naive(n.created),
        _naive(n.expiration), _naive(n.last_accessed), n.subject, n.predicate, n.object,
        n.description, n.embedding_key, float(n.poignancy), list(n.keywords),
        unique(k.lower() for k in n.keywords), Jsonb(n.filling),
        Vector(np.asarray(s.vector, dtype=np.float32)), norm, n.conversation, n.speaker,
    )


def _naive(value: datetime | None) -> datetime | None:
    """A datetime as stored: naive (aware ones converted to UTC); the stream's are already."""
    return value if value is None or value.tzinfo is None else naive(value)


def _as_array(value: Any) -> np.ndarray:
    if hasattr(value, "to_numpy"):
        return np.asarray(value.to_numpy(), dtype=np.float32)
    return np.asarray(value, dtype=np.float32)


def redacted(dsn: str) -> str:
    """The DSN without its password, for messages."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        parts = conninfo_to_dict(dsn)
    except Exception:  # noqa: BLE001 - an unparsable DSN is shown as "the DSN"
        return "the given DSN"
    if "password" in parts:
        parts["password"] = "***"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make_conninfo("", **parts)  # "" as conninfo: only the parts make the DSN
