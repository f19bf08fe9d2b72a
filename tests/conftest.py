"""Network rules for the whole suite, and the shared server fixtures.

- `tests/unit_tests/`: no sockets at all, except unix sockets (asyncio's event loop needs a
  socket pair). A test that tries one fails with `pytest_socket.SocketBlockedError`.
- `tests/integration_tests/`: connections only to 127.0.0.1 and localhost, where the test
  servers of `tests.support` run; anything else fails with `SocketConnectBlockedError`.
- Anywhere else (example tests, ...): the same rule as integration tests.
- A test marked `@pytest.mark.enable_socket` (pytest-socket's marker) is left unrestricted.

pytest-socket's own teardown hook lifts the restrictions after every test.

Tests marked ``slow`` run first, shared among the workers (``make test`` runs two): a long test
that started last would keep one worker busy while the other sits idle.

Every test process and every process it starts computes on **one thread**
(``OMP_NUM_THREADS`` for the embedding model's OpenMP engine, ``OPENBLAS_NUM_THREADS`` for
numpy), unless the caller set them: ``make test`` runs two workers on two cores, and a second
thread per process only waits for the other worker's core (measured: importing the Smallville
save took 7 s of CPU on one thread and 13 s on two, with the other core busy).

`GENMEM_TEST_EMBEDDING_NOISE=2e-3` runs the whole suite as if on another CPU: the bundled
embedding model's vectors get a little deterministic noise, in pytest and in every Python
process the tests start (`tests/support/embedding_noise.py`).

The bundled model embeds each text once per run: every process of the run reads the vectors
of texts embedded before from one SQLite file (`tests/support/embedding_cache.py`), made
fresh for each run. `GENMEM_TEST_EMBEDDING_CACHE=` (empty) runs without it.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from pytest_socket import disable_socket, socket_allow_hosts

from tests.support import embedding_cache
from tests.support.embedding_noise import activate, put_site_first
from tests.support.warm import close_shared

pytest_plugins = ["tests.support.fixtures"]

# pytest keeps each test module's assert-rewritten bytecode only where Python may write
# bytecode: with PYTHONDONTWRITEBYTECODE set, every worker of every run rewrote every module
# again (half of a worker's collection time). The pytest process writes it, as `make test`
# writes the package's; the processes the tests start still follow the environment.
sys.dont_write_bytecode = False

TESTS_DIR = Path(__file__).resolve().parent
UNIT_TESTS_DIR = TESTS_DIR / "unit_tests"
LOCAL_HOSTS = ["127.0.0.1", "localhost", "::1"]
_resolved_hosts: dict[str, set[str]] = {}  # pytest-socket resolves "localhost" once, not per test
EMBEDDING_NOISE = activate()


ONE_THREAD = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")
_CACHE_FOLDER = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    """Before xdist starts the workers (they inherit it): one thread per process, unless set,
    and a fresh embedding cache for the run, unless one is named (or turned off)."""
    for variable in ONE_THREAD:
        os.environ.setdefault(variable, "1")
    if embedding_cache.CACHE_VARIABLE not in os.environ:
        folder = tempfile.mkdtemp(prefix="genmem-test-embeddings-")
        config.stash[_CACHE_FOLDER] = folder
        os.environ[embedding_cache.CACHE_VARIABLE] = os.path.join(folder, "vectors.sqlite3")
    if embedding_cache.activate() is not None:
        put_site_first(os.environ)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop the warm-start servers this process started (xdist workers skip ``atexit``)."""
    close_shared()


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the run's embedding cache (the process that made it does)."""
    folder = config.stash.get(_CACHE_FOLDER, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def pytest_report_header() -> str | None:
    """Say when the bundled model's vectors are perturbed."""
    if EMBEDDING_NOISE is None:
        return None
    return (f"embedding noise: scale {EMBEDDING_NOISE.scale:g}, seed {EMBEDDING_NOISE.seed} "
            f"(GENMEM_TEST_EMBEDDING_NOISE), in this process and every Python child")


@pytest.fixture(autouse=True)
def _network_rules(request: pytest.FixtureRequest) -> None:
    """Block every socket in unit tests; allow only local connections elsewhere."""
    if request.node.get_closest_marker("enable_socket"):
        pass
    elif Path(request.node.path).resolve().is_relative_to(UNIT_TESTS_DIR):
        disable_socket(allow_unix_socket=True)
    else:
        socket_allow_hosts(LOCAL_HOSTS, allow_unix_socket=True, resolution_cache=_resolved_hosts)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order the tests so that each worker starts with its share of the ``slow`` ones.

    pytest-xdist's ``worksteal`` hands each worker one contiguous share of the collection
    (sizes as it computes them), then moves tests from the end of a busy worker's queue to an
    idle one. So each share is laid out as: its slow tests, then fast ones.
    """
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    files: dict[str, list[pytest.Item]] = {}  # a file's slow tests stay together (its fixtures)
    for item in items:
        if item.get_closest_marker("slow") is not None:
            files.setdefault(item.nodeid.split("::")[0], []).append(item)
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for group in sorted(files.values(), key=len, reverse=True):
        min(shares, key=len).extend(group)
    fast = [item for item in items if item.get_closest_marker("slow") is None]
    ordered: list[pytest.Item] = []
    left = len(items)
    for worker, own in enumerate(shares):
        size = left // (workers - worker)
        left -= size
        take = max(size - len(own), 0)
        ordered += own + fast[:take]
        fast = fast[take:]
    items[:] = ordered + fast
