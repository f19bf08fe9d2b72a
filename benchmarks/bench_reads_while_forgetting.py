"""Reads racing forgets through `genmem serve`: wrong memories and errors, per store and ranking.

One `genmem serve` per store (an embedded folder, a Chroma server, PostgreSQL ranking in
process, PostgreSQL ranking in the database): a persona gets ``--memories`` memories, then one
client forgets ``--forget`` of them one by one (``DELETE /personas/{p}/memories/{id}``) while
``--readers`` clients read it (``/retrieve`` with hybrid relevance where the server ranks in
process, ``/keyword-retrieve``). Each read is checked (`tests/support/read_while_forget.py`):

- **wrong memories**: a memory that came back with another memory's text, a lexical score
  that does not match its words, or after its forget had returned;
- **errors**: any reply but 200 to a read or a forget (5xx, a 422 for a memory the request did
  not name, a 503 for a memory removed while ranking); **deadlocks** are the errors that say so.

The Chroma server and PostgreSQL are started as the test suite starts them. This reproduces
the table the forgetting race was measured with; the suite runs the same workload smaller
(`tests/integration_tests/test_reads_while_forgetting.py`).

Usage:
    python benchmarks/bench_reads_while_forgetting.py [--memories 1000] [--forget 200]
        [--readers 3] [--stores folder,chroma-server,postgres,postgres-in-database]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from busy_core import load_average  # noqa: E402

from tests.support.read_while_forget import NOW, served_run  # noqa: E402

STORES = ("folder", "chroma-server", "postgres", "postgres-in-database")
KEY = "bench-key-0123456789abcdef"
PERSONA = "玛丽亚"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def server_args(store: str, stack: ExitStack, servers: dict) -> tuple[list[str], list[str]]:
    """The `genmem` global options and `serve` options of one store (its server started)."""
    from tests.support.chroma_server import ChromaServer
    from tests.support.postgres_server import PostgresServer

    global_args, args = ["--now", NOW.isoformat()], ["--api-key", KEY, "--create"]
    if store == "chroma-server":
        if "chroma" not in servers:
            servers["chroma"] = stack.enter_context(ChromaServer())
        chroma = servers["chroma"]
        global_args += ["--chroma-host", chroma.host, "--chroma-port", str(chroma.port),
                        "--collection", f"c{uuid.uuid4().hex[:12]}"]
    elif store.startswith("postgres"):
        if "postgres" not in servers:
            servers["postgres"] = stack.enter_context(PostgresServer())
        dsn = servers["postgres"].create_database(f"rwf_{uuid.uuid4().hex[:12]}")
        global_args += ["--dsn", dsn]
        if store.endswith("database"):
            args += ["--score-in", "database"]
    return global_args, args


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--forget", type=int, default=200)
    parser.add_argument("--readers", type=int, default=3)
    parser.add_argument("--stores", default=",".join(STORES))
    args = parser.parse_args()
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    unknown = sorted(set(stores) - set(STORES))
    if unknown:
        parser.error(f"--stores: unknown {unknown}; choose from {', '.join(STORES)}")
    if not 0 < args.forget <= args.memories:
        parser.error("--forget: give 1 to --memories")
    from tests.support.genmem_server import GenmemServer

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-rwf-") as tmp, ExitStack() as stack:
        servers: dict = {}
        for store in stores:
            global_args, serve = server_args(store, stack, servers)
            log(f"{store}: {args.memories} memories, forgetting {args.forget}")
            with GenmemServer(Path(tmp) / store, *serve, global_args=global_args) as srv:
                start = time.perf_counter()
                ledger = served_run(srv.url, KEY, PERSONA, memories=args.memories,
                                    forgotten=args.forget, readers=args.readers,
                                    in_database=store.endswith("database"), min_reads=1)
                took = time.perf_counter() - start
            deadlocks = sum("deadlock" in p for p in ledger.problems)
            rows.append((store, ledger, deadlocks, took))
            for problem in ledger.problems[:5]:
                log(f"  {problem}")
    print(f"# {args.memories} memories, {args.forget} forgotten one by one, {args.readers} "
          f"readers; load average {load_average()} (1 min) at the end")
    print("| store, ranking | reads | wrong memories | errors | deadlocks | seconds |")
    print("|---|---|---|---|---|---|")
    names = {"folder": "embedded folder, in process", "chroma-server": "Chroma server, in process",
             "postgres": "PostgreSQL, in process",
             "postgres-in-database": "PostgreSQL, in database"}
    for store, ledger, deadlocks, took in rows:
        print(f"| {names[store]} | {ledger.reads} | {ledger.kinds.get('wrong', 0)} | "
              f"{ledger.kinds.get('error', 0)} | {deadlocks} | {took:.1f} |")


if __name__ == "__main__":
    main()
