"""How fast the LangGraph store writes and searches, against the retriever and InMemoryStore.

For each size N, one namespace (one persona) of N items ``{"content": text, "topic": one of
seven letters}`` on an embedded Chroma folder, with the same embedding model everywhere
(``DeterministicFakeEmbedding``: the cost measured is the store's, not a model's). In one run:

- ``put``: ``store.batch([PutOp(...) for each item])`` into an empty store; baseline
  ``MemoryStream.add_many`` of the same descriptions on a fresh folder (the backend's bulk
  rate); reference LangGraph's ``InMemoryStore`` with an index of the same embeddings
  (which persists nothing);
- ``search``: ``store.search(namespace, query=q, limit=k)``, and the same with
  ``filter={"topic": "a"}`` (a seventh of the items), against
  ``GenerativeAgentsRetriever.invoke(q, k=k)`` on the store's own stream (every memory a
  candidate), interleaved query by query in alternating order so a drift of the machine's
  load falls on all three; medians over ``--queries`` queries and ``--repeats`` rounds;
  reference ``InMemoryStore.search`` (pure-Python cosine) on fewer queries;
- with ``--busy-core``, the three searches again with one core kept busy by a child process.

It prints the figures, then the targets with their ratio and pass/fail.

Usage:
    python benchmarks/bench_langgraph_store.py [--sizes 10000,100000] [--queries 20]
        [--repeats 3] [--busy-core]
    python benchmarks/bench_langgraph_store.py --smoke      # a tiny run, for the test suite
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from busy_core import busy_core, load_average
from langchain_core.embeddings import DeterministicFakeEmbedding
from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore

from langchain_genmem import GenerativeAgentsStore, MemoryStream, SimulationClock

NAMESPACE = ("memories", "用户")
PERSONA = "memories/用户"
TOPICS = "abcdefg"
SEARCH_TARGET = 1.5  # search p50 / invoke p50, with or without a filter
PUT_TARGET = 1.25  # put batch / add_many
START = datetime(2024, 1, 1)
WORDS = ("dumplings jazz bakery rust garden river exam party coffee library piano bicycle "
         "饺子 爵士 面包 花园 河边 考试 聚会 咖啡 图书馆 钢琴 自行车 周末").split()


@dataclass
class Result:
    """The figures of one size."""

    n: int
    put_s: float = math.nan
    add_many_s: float = math.nan
    memory_put_s: float = math.nan
    ms: dict[str, float] = field(default_factory=dict)  # timed name -> p50 ms
    busy_ms: dict[str, float] = field(default_factory=dict)
    memory_search_ms: float = math.nan


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"memory {i}: " + " ".join(rng.choices(WORDS, k=rng.randint(6, 12))) for i in range(n)]


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def interleaved_ms(contenders: dict[str, Callable[[str], object]], queries: Sequence[str],
                   repeats: int) -> dict[str, float]:
    """p50 ms of each contender, run query by query in alternating order."""
    for fn in contenders.values():  # warm: query embeddings cached, first-call costs paid
        fn(queries[0])
    times: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for r in range(repeats):
        for i, q in enumerate(queries):
            order = names if (i + r) % 2 == 0 else names[::-1]
            for name in order:
                times[name].append(timed(lambda q=q, name=name: contenders[name](q)))
    return {name: statistics.median(t) * 1e3 for name, t in times.items()}


def bench_size(n: int, args: argparse.Namespace) -> Result:
    res = Result(n)
    emb = DeterministicFakeEmbedding(size=args.dim)
    descriptions = texts(n, args.seed)
    queries = [" ".join(random.Random(args.seed + i).choices(WORDS, k=4))
               for i in range(args.queries)]
    work = Path(tempfile.mkdtemp(prefix="bench_lg_store_"))
    try:
        ops = [PutOp(NAMESPACE, f"键{i}", {"content": t, "topic": TOPICS[i % len(TOPICS)]})
               for i, t in enumerate(descriptions)]
        items = [{"type": "event", "description": t, "poignancy": 5.0} for t in descriptions]
        clock = SimulationClock(START)
        stream = MemoryStream("bare", path=work / "bare", embeddings=emb, clock=clock)
        log(f"[{n}] add_many of {n} memories")
        res.add_many_s = timed(lambda: stream.add_many(items))
        stream.close()
        store = GenerativeAgentsStore(path=work / "store", embeddings=emb, clock=clock)
        log(f"[{n}] put of {n} items in one batch")
        res.put_s = timed(lambda: store.batch(ops))
        memory = InMemoryStore(index={"dims": args.dim, "embed": emb})
        res.memory_put_s = timed(lambda: memory.batch(ops))

        retriever = store.retriever(PERSONA)
        k = args.k
        contenders: dict[str, Callable[[str], object]] = {
            "invoke": lambda q: retriever.invoke(q, k=k),
            "search": lambda q: store.search(NAMESPACE, query=q, limit=k),
            "search+filter": lambda q: store.search(NAMESPACE, query=q, limit=k,
                                                    filter={"topic": "a"}),
        }
        check(store, queries[0], k)
        log(f"[{n}] searching, quiet (load {load_average()})")
        res.ms = interleaved_ms(contenders, queries, args.repeats)
        if args.busy_core:
            with busy_core() as pid:
                log(f"[{n}] searching with one core busy (pid {pid})")
                res.busy_ms = interleaved_ms(contenders, queries, args.repeats)
        few = queries[: args.memory_queries]
        memory.search(NAMESPACE, query=few[0], limit=k)  # warm, as the others were
        log(f"[{n}] InMemoryStore search on {len(few)} queries")
        res.memory_search_ms = statistics.median(
            timed(lambda q=q: memory.search(NAMESPACE, query=q, limit=k)) for q in few) * 1e3
        store.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return res


def check(store: GenerativeAgentsStore, query: str, k: int) -> None:
    """The search returns what the retriever ranks (keys' memories, order, scores)."""
    peek = store.retriever(PERSONA).model_copy(update={"update_access": False})
    want = [(d.page_content, d.metadata["score"]) for d in peek.invoke(query, k=k)]
    got = [(i.value["content"], i.score) for i in store.search(NAMESPACE, query=query, limit=k)]
    if got != want:
        msg = f"search differs from the retriever: {got[:2]} != {want[:2]}"
        raise SystemExit(msg)


def machine() -> str:
    cpu = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return (f"python {platform.python_version()}, {os.cpu_count()} CPUs, {cpu}, "
            f"load {load_average()}")


def fmt(x: float, spec: str = ".2f") -> str:
    return "-" if math.isnan(x) else format(x, spec)


def target_row(name: str, n: int, value: float, bound: float) -> str:
    ok = "-" if math.isnan(value) else ("pass" if value <= bound else "FAIL")
    return f"| {name} | {n} | {fmt(value)}x | <= {bound:g}x | {ok} |"


def report(results: list[Result], args: argparse.Namespace) -> None:
    print("# bench_langgraph_store")
    print(f"# {machine()}")
    print(f"# items of one namespace, k={args.k}, {args.queries} queries x {args.repeats} "
          f"rounds, DeterministicFakeEmbedding({args.dim})")
    print()
    print("| items | put s | add_many s | InMemoryStore put s | invoke ms | search ms | "
          "search+filter ms | InMemoryStore search ms |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r.n} | {fmt(r.put_s)} | {fmt(r.add_many_s)} | {fmt(r.memory_put_s)} | "
              f"{fmt(r.ms['invoke'])} | {fmt(r.ms['search'])} | {fmt(r.ms['search+filter'])} | "
              f"{fmt(r.memory_search_ms, '.1f')} |")
    if args.busy_core:
        print()
        print("| items | invoke ms, one core busy | search ms | search+filter ms |")
        print("|---|---|---|---|")
        for r in results:
            print(f"| {r.n} | {fmt(r.busy_ms['invoke'])} | {fmt(r.busy_ms['search'])} | "
                  f"{fmt(r.busy_ms['search+filter'])} |")
    print()
    print("| items | search/invoke | search+filter/invoke | InMemoryStore/search | "
          "put/add_many | put/InMemoryStore put |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r.n} | {fmt(r.ms['search'] / r.ms['invoke'])}x | "
              f"{fmt(r.ms['search+filter'] / r.ms['invoke'])}x | "
              f"{fmt(r.memory_search_ms / r.ms['search'], '.1f')}x | "
              f"{fmt(r.put_s / r.add_many_s)}x | {fmt(r.put_s / r.memory_put_s, '.1f')}x |")
    print()
    print("| target | items | measured | target | pass |")
    print("|---|---|---|---|---|")
    for r in results:
        print(target_row("search p50 / invoke p50", r.n, r.ms["search"] / r.ms["invoke"],
                         SEARCH_TARGET))
        print(target_row("search with filter p50 / invoke p50", r.n,
                         r.ms["search+filter"] / r.ms["invoke"], SEARCH_TARGET))
        if args.busy_core:
            busy = r.busy_ms
            print(target_row("search p50 / invoke p50, one core busy", r.n,
                             busy["search"] / busy["invoke"], SEARCH_TARGET))
            print(target_row("search with filter p50 / invoke p50, one core busy", r.n,
                             busy["search+filter"] / busy["invoke"], SEARCH_TARGET))
        print(target_row("put batch / add_many", r.n, r.put_s / r.add_many_s, PUT_TARGET))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000",
                        help="comma-separated item counts (default: 10000,100000)")
    parser.add_argument("--queries", type=int, default=20, help="queries per size (default 20)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds over the queries")
    parser.add_argument("--memory-queries", type=int, default=3,
                        help="queries timed for InMemoryStore's search (default 3)")
    parser.add_argument("--k", type=int, default=10, help="results per search (default 10)")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--busy-core", action="store_true",
                        help="time the searches again with one core kept busy")
    parser.add_argument("--smoke", action="store_true",
                        help="a tiny run: 300 items, 3 queries, 1 round, 16 dimensions")
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.queries, args.repeats, args.dim = "300", 3, 1, 16
        args.memory_queries = 1
    sizes = [int(s) for s in args.sizes.split(",")]
    report([bench_size(n, args) for n in sizes], args)


if __name__ == "__main__":
    main()
