"""Put and search through LangGraph's server: GenerativeAgentsStore against the default store.

Two ``langgraph dev`` servers run at once from ``.venv-langgraph``, as users start them (no
``--allow-blocking``):

- ``genmem``: this repository's ``langgraph.json`` (the server's store is
  ``GenerativeAgentsStore`` on an embedded folder, the bundled embedding model);
- ``default``: the same graphs, the server's own store with an index of the same embedding
  model (``"store": {"index": {"dims": 384, "embed": "benchmarks/server_embeddings.py:
  embeddings", "fields": ["content"]}}``).

One namespace of ``--items`` items is loaded first, untimed: into ``genmem``'s folder in
process (``GenerativeAgentsStore.batch``, before its server starts), into ``default`` through
the SDK (its store lives in the server's memory). Then, through ``langgraph_sdk``'s client, in
one run: ``--puts`` more puts (``client.store.put_item``, what a client does) and
``--queries`` searches (``search_items(query=..., limit=10)``), each interleaved server by
server in alternating order so a drift of the machine's load falls on both; medians and 90th
percentiles per call. The last line counts the servers' log lines that report a blocking
call.

Usage:
    python benchmarks/bench_langgraph_server.py [--items 10000] [--puts 50] [--queries 50]
        [--busy-core]
    python benchmarks/bench_langgraph_server.py --smoke --items 60   # for the test suite
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_langgraph_store import WORDS, machine  # noqa: E402
from busy_core import busy_core  # noqa: E402
from server_embeddings import DIMS  # noqa: E402

from tests.support.langgraph_server import VENV, LanggraphDev, served_config  # noqa: E402

HERE = Path(__file__).resolve().parent
NAMESPACE = ["memories", "用户"]
TARGET = 1.5  # genmem / default, put and search


def texts(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [f"{i}: " + " ".join(rng.choices(WORDS, k=8)) for i in range(n)]


def default_config() -> dict[str, Any]:
    config = served_config()
    config["store"] = {"index": {"dims": DIMS, "fields": ["content"],
                                 "embed": f"{HERE / 'server_embeddings.py'}:embeddings"}}
    return config


def preload(folder: Path, items: list[str]) -> None:
    """``genmem``'s items, written in process into the folder its server will serve."""
    from langgraph.store.base import PutOp

    from langchain_genmem import GenerativeAgentsStore

    with GenerativeAgentsStore(path=str(folder)) as store:
        store.batch([PutOp(tuple(NAMESPACE), f"k{i}", {"content": text})
                     for i, text in enumerate(items)])


def interleaved(clients: dict[str, Any], calls: list[Any]) -> dict[str, list[float]]:
    """Seconds of each call on each server, server by server in alternating order."""
    times: dict[str, list[float]] = {name: [] for name in clients}
    names = list(clients)
    for n, call in enumerate(calls):
        for name in names if n % 2 == 0 else reversed(names):
            start = time.perf_counter()
            call(name, clients[name])
            times[name].append(time.perf_counter() - start)
    return times


def put_call(i: int, text: str) -> Any:
    def call(name: str, client: Any) -> None:
        client.store.put_item(NAMESPACE, f"new{i}", {"content": text})
    return call


def search_call(query: str) -> Any:
    def call(name: str, client: Any) -> None:
        if not client.store.search_items(NAMESPACE, query=query, limit=10)["items"]:
            raise SystemExit(f"{name}: a search found nothing")
    return call


def p90(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=10)[-1] if len(xs) > 1 else xs[0]


def run(args: argparse.Namespace, folder: Path) -> None:
    env = {"GENMEM_PATH": str(folder / "store"), "OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""}
    items = texts(args.items)
    preload(folder / "store", items)
    with contextlib.ExitStack() as stack:
        servers = {
            "genmem": stack.enter_context(LanggraphDev(folder / "genmem", env=env,
                                                       venv=args.venv)),
            "default": stack.enter_context(LanggraphDev(folder / "default", env=env,
                                                        config=default_config(),
                                                        venv=args.venv)),
        }
        clients = {name: server.client() for name, server in servers.items()}
        for client in clients.values():  # the embedding model loaded, connections open
            client.store.put_item(["warm"], "w", {"content": "warm up 预热"})
            client.store.search_items(["warm"], query="warm")
        for i, text in enumerate(items):
            clients["default"].store.put_item(NAMESPACE, f"k{i}", {"content": text})
        added = texts(args.puts, seed=11)
        puts = interleaved(clients, [put_call(i, t) for i, t in enumerate(added)])
        queries = [" ".join(random.Random(q).choices(WORDS, k=3)) for q in range(args.queries)]
        searches = interleaved(clients, [search_call(q) for q in queries])
        busy: dict[str, list[float]] = {}
        if args.busy_core:
            others = [" ".join(random.Random(1000 + q).choices(WORDS, k=3))
                      for q in range(args.queries)]  # not the queries above: none cached
            with busy_core():
                busy = interleaved(clients, [search_call(q) for q in others])
        blocking = {name: len(server.blocking_lines()) for name, server in servers.items()}
    report(args, puts, searches, busy, blocking)


def report(args: argparse.Namespace, puts: dict[str, list[float]],
           searches: dict[str, list[float]], busy: dict[str, list[float]],
           blocking: dict[str, int]) -> None:
    n = args.items
    print(f"CPU: {machine()}")
    print()
    print("| store | items | put p50 ms | put p90 ms | put mean ms | search p50 ms | "
          "search p90 ms |")
    print("|---|---|---|---|---|---|---|")
    for name in ("genmem", "default"):
        xs, ys = puts[name], searches[name]
        print(f"| {name} | {n} | {statistics.median(xs) * 1e3:.1f} | {p90(xs) * 1e3:.1f} | "
              f"{statistics.mean(xs) * 1e3:.1f} | {statistics.median(ys) * 1e3:.1f} | "
              f"{p90(ys) * 1e3:.1f} |")
    print()
    put_ratio = statistics.median(puts["genmem"]) / statistics.median(puts["default"])
    mean_ratio = statistics.mean(puts["genmem"]) / statistics.mean(puts["default"])
    search_ratio = statistics.median(searches["genmem"]) / statistics.median(searches["default"])
    print("| items | put p50 genmem/default | put mean genmem/default "
          "| search p50 genmem/default |")
    print("|---|---|---|---|")
    print(f"| {n} | {put_ratio:.2f}x | {mean_ratio:.2f}x | {search_ratio:.2f}x |")
    if busy:
        ratio = statistics.median(busy["genmem"]) / statistics.median(busy["default"])
        print()
        print(f"one core busy: search p50 genmem {statistics.median(busy['genmem']) * 1e3:.1f} "
              f"ms, default {statistics.median(busy['default']) * 1e3:.1f} ms, {ratio:.2f}x")
    if not args.smoke:
        print()
        for what, ratio in (("put p50", put_ratio), ("put mean", mean_ratio),
                            ("search p50", search_ratio)):
            print(f"target {what} <= {TARGET}x: {ratio:.2f}x "
                  f"{'pass' if ratio <= TARGET else 'FAIL'}")
    print()
    print(f"BlockingError lines in the servers' logs: {blocking}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--puts", type=int, default=50)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--busy-core", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="a tiny run: no targets")
    parser.add_argument("--venv", type=Path, default=VENV,
                        help="the environment with langgraph-cli[inmem] (.venv-langgraph)")
    args = parser.parse_args()
    if args.smoke:
        args.queries, args.puts = min(args.queries, 6), min(args.puts, 6)
    if not (args.venv / "bin" / "langgraph").exists():
        raise SystemExit(f"no LangGraph server in {args.venv}: run `make test` once, or "
                         "`make .venv-langgraph/.installed`")
    with tempfile.TemporaryDirectory(prefix="bench-langgraph-server-") as folder:
        run(args, Path(folder))


if __name__ == "__main__":
    main()
