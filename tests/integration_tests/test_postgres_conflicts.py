"""PostgreSQL under concurrent readers and forgets: no deadlock, no failed read, conflicts retried.

Readers store access times (``write_access``, which locks the persona's row and then its
memories' rows) and rank in the database (``rank``, several statements) while a forget
deletes memories one by one (the persona's row, then its memories' rows, then the state):
every transaction that changes a persona takes its locks in one order, so none waits for
another in a circle, and a ranking reads one snapshot, so a forget committed while it runs
never fails it. A deadlock or serialization failure PostgreSQL reports anyway is retried
where the transaction is the backend's own, and is a ``StorageConflictError`` (one line)
where it is the caller's.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import datetime

import numpy as np
import psycopg
import pytest

from langchain_genmem.backends.postgres import CONFLICT_ATTEMPTS, PostgresBackend
from langchain_genmem.core.errors import StorageConflictError, StorageError
from langchain_genmem.core.timeutil import to_epoch
from langchain_genmem.numerics.scoring import Weights
from tests.support.forgetting import START, commit_nodes, forget, random_vectors, text_of

PERSONA = "玛丽亚"
DIM = 16
NODES = 240
FORGETS = 60  # forgotten one by one while the readers run

READER = """
import json, logging, sys, time
from pathlib import Path
from langchain_genmem.backends.postgres import PostgresBackend

class Conflicts(logging.Handler):
    seen = 0
    def emit(self, record):
        Conflicts.seen += "deadlock" in record.getMessage()

log = logging.getLogger("langchain_genmem.backends.postgres")
log.addHandler(Conflicts())
log.setLevel(logging.DEBUG)
log.propagate = False
dsn, persona, nodes, stop = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
backend = PostgresBackend(dsn)
errors, rounds = [], 0
every = {f"node_{n}": 1.7e9 for n in range(1, nodes + 1)}
print("ready", flush=True)
while not stop.exists():
    rounds += 1
    try:
        backend.write_access(persona, {k: v + rounds for k, v in every.items()})
    except Exception as e:
        errors.append(f"{type(e).__name__}: {e}")
backend.close()
print(json.dumps({"rounds": rounds, "errors": errors, "deadlocks": Conflicts.seen}), flush=True)
"""


@pytest.fixture
def dsn(request, tmp_path):
    from tests.support.fixtures import open_store

    with open_store(request, "postgres", tmp_path) as store:
        yield store.dsn


def filled(dsn: str, vectors: np.ndarray) -> PostgresBackend:
    backend = PostgresBackend(dsn, max_size=12)
    commit_nodes(backend, PERSONA, vectors)
    return backend


def run_threads(targets: list, seconds_max: float = 240) -> None:
    threads = [threading.Thread(target=t, daemon=True) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds_max)
        assert not t.is_alive(), "a thread did not finish"


def wait_for_line(log, text: str, proc, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text(encoding="utf-8", errors="replace"):
        assert proc.poll() is None, log.read_text(encoding="utf-8", errors="replace")
        assert time.monotonic() < deadline, f"the child never printed {text!r}"
        time.sleep(0.05)


# ---------------------------------------------------------------- one lock order


def test_access_times_and_forgets_one_by_one_never_deadlock(dsn, tmp_path, spawned, caplog):
    caplog.set_level(logging.DEBUG, logger="langchain_genmem.backends.postgres")
    backend = filled(dsn, random_vectors(NODES, DIM))
    stop, log = tmp_path / "stop", tmp_path / "reader.log"
    child = spawned(READER, dsn, PERSONA, str(NODES), str(stop), log_path=log)  # another process
    wait_for_line(log, "ready", child)
    done = threading.Event()
    errors: list[str] = []
    rounds = [0]
    every = {f"node_{n}": to_epoch(START) for n in range(1, NODES + 1)}

    def reader() -> None:
        while not done.is_set():
            rounds[0] += 1
            try:
                backend.write_access(PERSONA, {k: v + rounds[0] for k, v in every.items()})
            except Exception as e:  # noqa: BLE001 - every failure is the test's finding
                errors.append(f"reader: {type(e).__name__}: {e}")

    def forgetter() -> None:
        try:
            for number in range(1, FORGETS + 1):
                try:
                    forget(backend, PERSONA, [number])
                except Exception as e:  # noqa: BLE001 - every failure is the test's finding
                    errors.append(f"forget node_{number}: {type(e).__name__}: {e}")
        finally:
            done.set()

    run_threads([forgetter] + [reader] * 3)
    stop.touch()
    child.wait(timeout=60)
    outcome = json.loads(log.read_text(encoding="utf-8").strip().splitlines()[-1])
    errors += [f"other process: {e}" for e in outcome["errors"]]
    assert errors == []
    assert rounds[0] > FORGETS and outcome["rounds"] > 1  # the readers ran beside the forgets
    # not even a deadlock retried away: the lock order alone keeps them apart
    assert outcome["deadlocks"] == 0
    assert not [r for r in caplog.records if "deadlock" in r.getMessage()]
    state = backend.read_state(PERSONA)
    assert state is not None and tuple(state.forgotten[-1][:2]) == (FORGETS, FORGETS)
    with psycopg.connect(dsn) as conn:
        left = conn.execute("SELECT min(node_count), count(*) FROM memory_nodes "
                            "WHERE persona_name = %s", (PERSONA,)).fetchone()
    assert left == (FORGETS + 1, NODES - FORGETS)
    backend.close()


# ---------------------------------------------------------------- conflicts PostgreSQL reports


def test_a_deadlock_of_an_access_time_write_is_retried_and_the_write_is_stored(dsn):
    backend = filled(dsn, random_vectors(4, DIM))
    with psycopg.connect(dsn) as other:  # holds node 2's row, then asks for the persona's
        other.execute("SET deadlock_timeout = '30s'")  # so the backend's side is the victim
        other.execute("UPDATE memory_nodes SET poignancy = 9 WHERE persona_name = %s "
                      "AND node_count = 2", (PERSONA,))
        writing = threading.Thread(target=backend.write_access, daemon=True,
                                   args=(PERSONA, {"node_2": to_epoch(datetime(2030, 1, 1))}))
        writing.start()  # holds the persona's row, waits for node 2's
        wait_until_waiting(dsn)
        other.execute("UPDATE genmem_personas SET access_rev = access_rev "
                      "WHERE persona_name = %s", (PERSONA,))  # the circle: PostgreSQL ends one
        other.commit()
        writing.join(60)
        assert not writing.is_alive()
    with psycopg.connect(dsn) as conn:
        stored = conn.execute("SELECT last_accessed, poignancy FROM memory_nodes "
                              "WHERE persona_name = %s AND node_count = 2", (PERSONA,)).fetchone()
    assert stored == (datetime(2030, 1, 1), 9.0)  # both transactions committed in the end
    backend.close()


def wait_until_waiting(dsn: str, timeout: float = 30) -> None:
    """Until a session of the database waits for a lock."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while not conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                               "current_database() AND wait_event_type = 'Lock'").fetchone()[0]:
            assert time.monotonic() < deadline, "nobody waits for a lock"
            time.sleep(0.02)


def deadlock() -> psycopg.errors.DeadlockDetected:
    return psycopg.errors.DeadlockDetected(
        "deadlock detected\nDETAIL:  Process 4242 waits for ShareLock on transaction 9; "
        "blocked by process 4343.\nCONTEXT:  while inserting index tuple (0,7) in relation "
        '"genmem_personas"')


def serialization_failure() -> psycopg.errors.SerializationFailure:
    return psycopg.errors.SerializationFailure(
        "could not serialize access due to concurrent update\nDETAIL:  Process 4242 ...")


@pytest.mark.parametrize("error", [deadlock, serialization_failure])
def test_a_conflict_that_lasts_is_retried_within_the_bound_then_is_one_clean_line(
    dsn, monkeypatch, error
):
    backend = filled(dsn, random_vectors(4, DIM))
    state = backend.read_state(PERSONA)
    calls = []

    def conflicting(conn, persona, *args, **kwargs):
        calls.append(persona)
        raise error()

    monkeypatch.setattr(PostgresBackend, "_store_state", staticmethod(conflicting))
    with pytest.raises(StorageConflictError) as e:
        backend.write_state(PERSONA, state)  # its own transaction: run again, then given up
    assert len(calls) == CONFLICT_ATTEMPTS
    message = str(e.value)
    assert "\n" not in message and "DETAIL" not in message and "Process" not in message
    assert message.startswith(f"could not store the state of persona {PERSONA!r}")
    assert "nothing was committed" in message and "40" in message
    assert e.value.__cause__.sqlstate in ("40P01", "40001")  # the driver's error, kept

    calls.clear()
    with pytest.raises(StorageConflictError), backend.write_lock(PERSONA):
        backend.write_state(PERSONA, state)  # the caller's transaction: only it can run it again
    assert len(calls) == 1
    monkeypatch.undo()
    assert backend.read_state(PERSONA) == state  # nothing was committed
    backend.write_state(PERSONA, state.model_copy(update={"rev": state.rev + 1}))
    backend.close()


def test_an_access_time_conflict_that_lasts_is_a_storage_conflict_error(dsn, monkeypatch):
    backend = filled(dsn, random_vectors(4, DIM))
    calls = []

    def conflicting(conn, persona, by_time):
        calls.append(persona)
        raise deadlock()

    monkeypatch.setattr(PostgresBackend, "_store_access", staticmethod(conflicting))
    with pytest.raises(StorageConflictError, match="store the access times") as e:
        backend.write_access(PERSONA, {"node_1": 1.7e9})
    assert len(calls) == CONFLICT_ATTEMPTS and "\n" not in str(e.value)
    assert "4242" not in str(e.value)
    backend.close()


# ---------------------------------------------------------------- ranking reads one snapshot


def test_ranking_in_the_database_while_forgets_commit_never_fails_nor_mixes(dsn):
    vectors = random_vectors(NODES, DIM, seed=3)
    backend = filled(dsn, vectors)
    query = vectors[:8].mean(axis=0)
    norms = np.linalg.norm(vectors.astype(np.float64), axis=1)
    cosines = vectors.astype(np.float64) @ query.astype(np.float64) / norms / np.linalg.norm(
        query.astype(np.float64))
    order = np.argsort(-cosines)[:FORGETS] + 1  # the best matches go first: the rows it reads
    started: list[int] = []  # forgets begun (committed, perhaps)
    forgotten: list[int] = []  # forgets committed
    done = threading.Event()
    errors: list[str] = []
    checked = [0]
    now = datetime(2024, 6, 1)

    def forgetter() -> None:
        try:
            for number in order.tolist():
                started.append(number)
                forget(backend, PERSONA, [number])
                forgotten.append(number)
        except Exception as e:  # noqa: BLE001 - every failure is the test's finding
            errors.append(f"forget: {type(e).__name__}: {e}")
        finally:
            done.set()

    def ranker() -> None:
        while not done.is_set():
            gone_before = set(forgotten)
            try:
                ranking = backend.rank(PERSONA, query, k=10, mode="hours", decay=0.99,
                                       weights=Weights(), now=now)
            except StorageError as e:
                errors.append(f"rank: {e}")
                continue
            gone_after = set(started)
            problems = check_ranking(ranking, gone_before, gone_after, cosines)
            errors.extend(problems)
            checked[0] += 1

    run_threads([forgetter] + [ranker] * 3)
    assert checked[0] > 10
    assert errors == []
    backend.close()


def check_ranking(ranking, gone_before: set[int], gone_after: set[int],
                  cosines: np.ndarray) -> list[str]:
    """What is wrong with a ranking made while forgets committed (nothing, for one snapshot).

    ``gone_before``: forgets committed before it started; ``gone_after``: forgets begun
    before it ended (committed or not).
    """
    problems = []
    live_before, live_after = NODES - len(gone_before), NODES - len(gone_after)
    if not live_after <= ranking.candidate_count <= live_before:
        problems.append(f"{ranking.candidate_count} candidates, not {live_after}..{live_before}")
    scores = [r.score for r in ranking.rows]
    if len(ranking.rows) != 10 or scores != sorted(scores, reverse=True):
        problems.append(f"rows: {scores}")
    for row in ranking.rows:
        n = row.node.node_count
        if n in gone_before:
            problems.append(f"node_{n} was forgotten before the ranking started")
        if row.node.node_id != f"node_{n}" or row.node.description != text_of(n):
            problems.append(f"node_{n}: {row.node.node_id} {row.node.description}")
        if abs(row.cosine - cosines[n - 1]) > 1e-6:
            problems.append(f"node_{n}: cosine {row.cosine} != {cosines[n - 1]}")
    return problems
