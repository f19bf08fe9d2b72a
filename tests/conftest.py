"""Network rules for the whole suite, and the shared server fixtures.

- `tests/unit_tests/`: no sockets at all, except unix sockets (asyncio's event loop needs a
  socket pair). A test that tries one fails with `pytest_socket.SocketBlockedError`.
- `tests/integration_tests/`: connections only to 127.0.0.1 and localhost, where the test
  servers of `tests.support` run; anything else fails with `SocketConnectBlockedError`.
- Anywhere else (example tests, ...): the same rule as integration tests.
- A test marked `@pytest.mark.enable_socket` (pytest-socket's marker) is left unrestricted.

pytest-socket's own teardown hook lifts the restrictions after every test.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_socket import disable_socket, socket_allow_hosts

pytest_plugins = ["tests.support.fixtures"]

TESTS_DIR = Path(__file__).resolve().parent
UNIT_TESTS_DIR = TESTS_DIR / "unit_tests"
LOCAL_HOSTS = ["127.0.0.1", "localhost", "::1"]
_resolved_hosts: dict[str, set[str]] = {}  # pytest-socket resolves "localhost" once, not per test


@pytest.fixture(autouse=True)
def _network_rules(request: pytest.FixtureRequest) -> None:
    """Block every socket in unit tests; allow only local connections elsewhere."""
    if request.node.get_closest_marker("enable_socket"):
        pass
    elif Path(request.node.path).resolve().is_relative_to(UNIT_TESTS_DIR):
        disable_socket(allow_unix_socket=True)
    else:
        socket_allow_hosts(LOCAL_HOSTS, allow_unix_socket=True, resolution_cache=_resolved_hosts)
