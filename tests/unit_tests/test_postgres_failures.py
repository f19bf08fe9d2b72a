"""What the PostgreSQL backend says and does when the server fails, without a server.

Messages name the failure in a few words by its SQLSTATE or libpq's words, never with the
driver's text; the request timeout comes from the argument, the environment or the connect
timeout; a server found unreachable makes calls fail at once until a probe reaches it; and
``genmem serve``/``genmem mcp`` hand ``--store-timeout`` to the backend they open.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
import typer
from psycopg_pool import PoolTimeout
from typer.testing import CliRunner

from langchain_genmem.backends import postgres
from langchain_genmem.backends.base import STORE_TIMEOUT_VARIABLE
from langchain_genmem.backends.postgres import (
    CONNECTION_LOST,
    Reachability,
    Unreachable,
    failure_reason,
    resolve_request_timeout,
)
from langchain_genmem.cli import app
from langchain_genmem.cli.store import Store
from langchain_genmem.core.errors import ValidationError
from langchain_genmem.service.readiness import DEFAULT_STORE_TIMEOUT

DEADLOCK = ("deadlock detected\nDETAIL:  Process 4242 waits for ShareLock on transaction 9; "
            "blocked by process 4343.\nHINT:  See server log for query details.\nCONTEXT:  "
            'while inserting index tuple (0,7) in relation "genmem_personas"')


@pytest.mark.parametrize(("error", "words"), [
    (psycopg.errors.DeadlockDetected(DEADLOCK),
     "a deadlock with another transaction (safe to retry) (SQLSTATE 40P01)"),
    (psycopg.errors.SerializationFailure("could not serialize\nDETAIL: x"),
     "a serialization conflict with another transaction (safe to retry) (SQLSTATE 40001)"),
    (psycopg.errors.InsufficientPrivilege("permission denied for table memory_nodes"),
     "the role lacks a privilege on the genmem tables (SQLSTATE 42501)"),
    (psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
     "the server is shutting down or starting up (SQLSTATE 57P01)"),
    (psycopg.errors.DivisionByZero("division by zero"), "the server refused a value (SQLSTATE "
     "22012)"),
    (psycopg.errors.InternalError_("xx"), "the server refused the statement (SQLSTATE XX000)"),
    (psycopg.OperationalError('connection failed: connection to server on socket "/s/.s.PGSQL.'
                              '5432" failed: FATAL:  database "genmem" does not exist'),
     "the database does not exist"),
    (psycopg.OperationalError('connection failed: connection to server at "10.0.0.1", port '
                              '5432 failed: FATAL:  password authentication failed for user "g"'),
     "the server refused the user or password"),
    (psycopg.OperationalError('connection failed: connection to server at "127.0.0.1", port 1 '
                              "failed: Connection refused\n\tIs the server running on that "
                              "host and accepting TCP/IP connections?"), CONNECTION_LOST),
    (psycopg.OperationalError("consuming input failed: server closed the connection "
                              "unexpectedly\n\tThis probably means the server terminated "
                              "abnormally"), CONNECTION_LOST),
    (psycopg.errors.ConnectionTimeout("connection timeout expired"),
     "the server did not answer within the connect timeout"),
    (PoolTimeout("couldn't get a connection after 2.00 sec"),
     "no connection within 2 s (is the server running and reachable?)"),
])
def test_a_failure_is_named_in_a_few_words_never_in_the_drivers(error, words):
    reason = failure_reason(error, 2.0)
    assert reason == words
    assert "\n" not in reason and "Process" not in reason and "socket" not in reason


def test_the_request_timeout_comes_from_the_argument_the_environment_or_the_connect_timeout(
    monkeypatch,
):
    monkeypatch.delenv(STORE_TIMEOUT_VARIABLE, raising=False)
    assert resolve_request_timeout(None, 10.0) == 10.0
    assert resolve_request_timeout(0.5, 10.0) == 0.5
    monkeypatch.setenv(STORE_TIMEOUT_VARIABLE, "2")
    assert resolve_request_timeout(None, 10.0) == 2.0
    assert resolve_request_timeout(3, 10.0) == 3.0
    monkeypatch.setenv(STORE_TIMEOUT_VARIABLE, "soon")
    with pytest.raises(ValidationError, match=STORE_TIMEOUT_VARIABLE):
        resolve_request_timeout(None, 10.0)
    with pytest.raises(ValidationError, match="request_timeout"):
        resolve_request_timeout(0, 10.0)


class Probe:
    """A probe whose outcome each call waits for: ``answer(ok)`` lets one attempt end."""

    def __init__(self) -> None:
        self.outcomes: list[bool] = []
        self.ready = threading.Condition()
        self.calls = 0

    def __call__(self) -> None:
        with self.ready:
            self.calls += 1
            self.ready.wait_for(lambda: self.outcomes, timeout=30)
            if not self.outcomes.pop(0):
                raise psycopg.OperationalError("connection failed: Connection refused")

    def answer(self, ok: bool) -> None:
        with self.ready:
            self.outcomes.append(ok)
            self.ready.notify_all()


def test_calls_wait_for_the_first_probe_then_fail_at_once_until_one_succeeds(monkeypatch):
    monkeypatch.setattr(postgres, "PROBE_INTERVAL", 0.01)
    probe = Probe()
    reach = Reachability(probe, "the test's server", 2.0)
    reach.check(time.monotonic())  # up: nothing to wait for
    reach.lost(psycopg.OperationalError("server closed the connection unexpectedly"))
    assert reach.state == "probing"
    with pytest.raises(Unreachable, match="no connection within 2 s"):
        reach.check(time.monotonic() + 0.05)  # the first attempt has no outcome yet
    probe.answer(False)
    wait_for(lambda: reach.state == "down")
    with pytest.raises(Unreachable, match="refused or lost.*calls fail at once") as e:
        reach.check(time.monotonic() + 60)  # at once, whatever the deadline
    assert isinstance(e.value.error, psycopg.OperationalError)
    reach.lost(psycopg.OperationalError("again"))  # already probing: no second thread
    probe.answer(False)
    probe.answer(True)
    wait_for(lambda: reach.state == "up")
    reach.check(time.monotonic())
    assert probe.calls == 3


def test_closing_ends_the_probing_and_calls_connect_again(monkeypatch):
    monkeypatch.setattr(postgres, "PROBE_INTERVAL", 0.01)
    probe = Probe()
    reach = Reachability(probe, "the test's server", 2.0)
    reach.lost(psycopg.OperationalError("lost"))
    probe.answer(False)
    wait_for(lambda: reach.state == "down")
    reach.close()
    assert reach.state == "up"
    probe.answer(False)  # the attempt running when it closed is not counted
    time.sleep(0.05)
    assert reach.state == "up"
    reach.check(time.monotonic())


def wait_for(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_a_store_location_hands_its_request_timeout_to_a_postgres_backend(monkeypatch):
    made = {}

    class Recording:
        def __init__(self, dsn, **kwargs):
            made.update(dsn=dsn, **kwargs)

    monkeypatch.setattr("langchain_genmem.backends.postgres.PostgresBackend", Recording)
    Store(dsn="postgresql://u@h/db", request_timeout=0.75).backend()
    assert made == {"dsn": "postgresql://u@h/db", "request_timeout": 0.75}


@pytest.mark.parametrize("command", ["serve", "mcp"])
def test_serve_and_mcp_wait_for_the_store_two_seconds_unless_told(command):
    option = next(p for p in typer.main.get_command(app).commands[command].params
                  if p.name == "store_timeout")
    assert option.default == DEFAULT_STORE_TIMEOUT == 2.0
    assert option.envvar == STORE_TIMEOUT_VARIABLE


@pytest.mark.parametrize("command", ["serve", "mcp"])
def test_the_store_timeout_option_names_its_variable(command):
    shown = CliRunner().invoke(app, [command, "--help"], terminal_width=200).output
    assert "--store-timeout" in shown
    assert STORE_TIMEOUT_VARIABLE in " ".join(shown.split())


def test_a_pools_retries_to_connect_are_told_at_debug_for_our_pools_only(caplog):
    import logging

    caplog.set_level(logging.DEBUG, logger="psycopg.pool")
    pool_log = logging.getLogger("psycopg.pool")
    pool_log.warning("error connecting in %r: %s", postgres.POOL_NAME, "connection refused")
    pool_log.warning("error connecting in %r: %s", "someone-else", "connection refused")
    levels = [(r.args[0], r.levelname) for r in caplog.records if r.name == "psycopg.pool"]
    assert levels == [(postgres.POOL_NAME, "DEBUG"), ("someone-else", "WARNING")]
