"""How long writing and reopening a memory stream takes, against bare Chroma.

For each size N, on an embedded (persistent) Chroma folder, in one run:

- ``ingest``: one ``add_many`` of N memories with precomputed vectors (memories/s, and per
  second of this process's CPU time, which a busy machine distorts less); baseline: a bare
  ``collection.add`` of the same records in Chroma's batch size;
- ``reopen``: a fresh ``MemoryStream`` on the folder up to its first query answered
  (``GenerativeAgentsRetriever(k=30).invoke``); baseline: a bare paged ``collection.get`` of
  the records with their vectors, the floor of any Chroma-backed open without a snapshot;
- ``single add``: ``add_event`` of one memory with a precomputed vector on the stream of N,
  against a bare single-record ``collection.add`` on the bare collection of N, interleaved
  (in alternating order, so a drift of the machine's load falls on both), medians over
  ``--adds`` calls of each.

It prints the figures, then issue 13's targets with their ratio and pass/fail.

Usage:
    python benchmarks/bench_store.py [--sizes 10000,100000] [--dim 384] [--adds 200]
        [--skip-reopen] [--busy-core]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from datetime import datetime, timedelta

import chromadb
import numpy as np
from busy_core import busy_core, load_average
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream
from langchain_genmem.backends.chroma import DEFAULT_CONFIGURATION, GET_PAGE

START = datetime(2024, 1, 1)


def items(n: int, dim: int, rng: np.random.Generator) -> list[dict]:
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    return [
        {
            "type": "event",
            "description": f"memory number {i}: Maria Lopez did thing {i % 97}",
            "subject": "Maria Lopez",
            "predicate": "do",
            "object": f"thing {i % 97}",
            "poignancy": 1 + i % 10,
            "created": START + timedelta(minutes=i),
            "embedding": vectors[i],
        }
        for i in range(n)
    ]


def bare_collection(path: str):
    client = chromadb.PersistentClient(path=path)
    return client, client.get_or_create_collection("bare", embedding_function=None,
                                                   configuration=DEFAULT_CONFIGURATION)


def bare_add(col, batch: list[dict], size: int, first: int = 0) -> None:
    for lo in range(0, len(batch), size):
        part = batch[lo : lo + size]
        col.add(ids=[f"p::node_{first + lo + i + 1}" for i in range(len(part))],
                embeddings=np.vstack([b["embedding"] for b in part]),
                metadatas=[{"persona": "p", "poignancy": float(b["poignancy"])} for b in part],
                documents=[b["description"] for b in part])


def bare_get(col, n: int) -> None:
    ids = [f"p::node_{i + 1}" for i in range(n)]
    for lo in range(0, n, GET_PAGE):
        col.get(ids=ids[lo : lo + GET_PAGE], include=["embeddings", "metadatas", "documents"])


def run_size(n: int, args: argparse.Namespace) -> dict[str, float]:
    rng = np.random.default_rng(0)
    batch = items(n, args.dim, rng)
    extra = items(args.adds + 1, args.dim, rng)
    emb = DeterministicFakeEmbedding(size=args.dim)
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        stream = MemoryStream("p", path=a, embeddings=emb)
        t, cpu = time.perf_counter(), time.process_time()
        stream.add_many(batch)
        out["ingest_s"] = time.perf_counter() - t
        out["ingest_cpu_s"] = time.process_time() - cpu
        if not args.skip_reopen:
            stream.close()
            chromadb.api.client.SharedSystemClient.clear_system_cache()

        client, col = bare_collection(b)
        t = time.perf_counter()
        bare_add(col, batch, client.get_max_batch_size())
        out["bare_add_s"] = time.perf_counter() - t

        again = stream
        out["reopen_s"] = out["bare_get_s"] = float("nan")
        if not args.skip_reopen:
            chromadb.api.client.SharedSystemClient.clear_system_cache()
            t = time.perf_counter()
            again = MemoryStream("p", path=a, embeddings=emb)
            GenerativeAgentsRetriever(stream=again, k=30, update_access=False).invoke("first")
            out["reopen_s"] = time.perf_counter() - t
            assert len(again) == n
            client, col = bare_collection(b)
            t = time.perf_counter()
            bare_get(col, n)
            out["bare_get_s"] = time.perf_counter() - t
        out["add_ms"], out["bare_single_ms"] = single_adds(again, col, extra, n)
        again.close()
        chromadb.api.client.SharedSystemClient.clear_system_cache()
    return out


def single_adds(stream: MemoryStream, col, extra: list[dict], n: int) -> tuple[float, float]:
    """Median ms of ``add_event`` and of a bare single-record add, interleaved.

    The order alternates (ours first, then bare first) so a change of the machine's load
    during the run weighs on both; the first add of the stream (which may rewrite the state
    record after a bulk write) is left out.
    """
    ours, bare = [], []

    def add_ours(i: int, item: dict) -> None:
        t = time.perf_counter()
        stream.add_event(**{k: v for k, v in item.items() if k != "type"})
        ours.append(time.perf_counter() - t)

    def add_bare(i: int, item: dict) -> None:
        t = time.perf_counter()
        bare_add(col, [item], 1, first=n + i)
        bare.append(time.perf_counter() - t)

    for i, item in enumerate(extra):
        pair = (add_ours, add_bare) if i % 2 == 0 else (add_bare, add_ours)
        for step in pair:
            step(i, item)
    return 1e3 * statistics.median(ours[1:]), 1e3 * statistics.median(bare[1:])


def verdict(ok: bool) -> str:
    return "pass" if ok else "FAIL"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated memory counts")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--adds", type=int, default=200, help="single adds timed (default 200)")
    parser.add_argument("--skip-reopen", action="store_true",
                        help="time ingest and single adds only (single adds on the writer)")
    parser.add_argument("--busy-core", action="store_true",
                        help="run with a CPU-bound child process on one core")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    with contextlib.ExitStack() as stack:
        if args.busy_core:
            stack.enter_context(busy_core())
        results = {n: run_size(n, args) for n in sizes}
    print(f"# bench_store: dim {args.dim}, embedded Chroma folder, {args.adds} single adds; "
          f"one core busy: {'yes' if args.busy_core else 'no'}; load average "
          f"{load_average()} at the end")
    print()
    print("| memories | ingest s | memories/s | per CPU s | bare add s | reopen to 1st query s "
          "| bare get s | add_event ms | bare single add ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n, r in results.items():
        print(f"| {n} | {r['ingest_s']:.2f} | {n / r['ingest_s']:.0f} "
              f"| {n / r['ingest_cpu_s']:.0f} | {r['bare_add_s']:.2f} "
              f"| {r['reopen_s']:.2f} | {r['bare_get_s']:.2f} | {r['add_ms']:.2f} "
              f"| {r['bare_single_ms']:.2f} |")
    print()
    print("| target | memories | measured | target | pass |")
    print("|---|---|---|---|---|")
    for n, r in results.items():
        add = r["add_ms"] / r["bare_single_ms"]
        reopen = r["reopen_s"] / r["bare_get_s"]
        rate = n / r["ingest_s"]
        print(f"| add_event p50 / bare single add | {n} | {add:.2f}x | <= 1.5x "
              f"| {verdict(add <= 1.5)} |")
        if not args.skip_reopen:
            print(f"| reopen to first query / bare paged get | {n} | {reopen:.2f}x | <= 0.5x "
                  f"| {verdict(reopen <= 0.5)} |")
        print(f"| bulk ingest, precomputed vectors | {n} | {rate:.0f}/s | >= 5000/s "
              f"| {verdict(rate >= 5000)} |")


if __name__ == "__main__":
    main()
