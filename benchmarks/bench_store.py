"""How long writing and reopening a memory stream takes, against bare Chroma.

For each size N, on an embedded (persistent) Chroma folder, in one run:

- ``ingest``: one ``add_many`` of N memories with precomputed vectors (memories/s, and per
  second of this process's CPU time, which a busy machine distorts less); baseline: a bare
  ``collection.add`` of the same records in Chroma's batch size;
- ``reopen``: a fresh ``MemoryStream`` on the folder up to its first query answered
  (``GenerativeAgentsRetriever(k=30).invoke``), the first open after the writer closed it;
  baseline: a bare paged ``collection.get`` of the records with their vectors, the floor of
  any Chroma-backed open without a snapshot. Then the same reopen in a fresh child process
  (``fresh process s``: with the interpreter's and Chroma's start-up in a new process, not
  in the ratio), which reports its peak resident memory (``VmHWM``: the child's own, where
  ``ru_maxrss`` would also count the parent's at the fork);
- ``single add``: ``add_event`` of one memory on the stream of N, against a bare
  single-record ``collection.add`` of the same record on the bare collection of N,
  interleaved (in alternating order, so a drift of the machine's load falls on both),
  medians (and means) over ``--adds`` calls of each. Both are given the same precomputed
  vector, so neither embeds: the model's time would be the same in both. The bare record
  carries the description as its document and two metadata keys; the stream's carries the
  node's fields and the state change that commits it. With ``--busy-core`` the single adds
  are timed a second time on the same stores with a CPU-bound child process on one core,
  so the quiet and the loaded ratio come from one run.

It prints the figures, then the targets with their ratio and pass/fail.

``--reopen-only`` times the reopen (and the bare ``get``) alone; with ``--folder DIR`` the two
stores of each size are kept in ``DIR`` and built only when missing, so a later run times the
reopen again without rebuilding (then no longer the folder's first open).

Usage:
    python benchmarks/bench_store.py [--sizes 10000,100000] [--dim 384] [--adds 200]
        [--busy-core]    # the single adds quiet, then again with one core busy
    python benchmarks/bench_store.py --reopen-only --folder DIR [--sizes 100000]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import chromadb
import numpy as np
from busy_core import busy_core, load_average
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream
from langchain_genmem.backends.chroma import DEFAULT_CONFIGURATION, GET_PAGE

START = datetime(2024, 1, 1)
# A fresh process: open the stream, answer its first query, report the time and peak RSS.
REOPEN_CHILD = """
import json, resource, sys, time
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_genmem import GenerativeAgentsRetriever, MemoryStream
t = time.perf_counter()
emb = DeterministicFakeEmbedding(size=int(sys.argv[2]))
s = MemoryStream("p", path=sys.argv[1], embeddings=emb)
GenerativeAgentsRetriever(stream=s, k=30, update_access=False).invoke("first")
took = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
with open("/proc/self/status") as f:
    peak = next((int(x.split()[1]) / 1024 for x in f if x.startswith("VmHWM:")), peak)
print(json.dumps({"fresh_s": took, "peak_mb": peak}))
"""


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


def build(a: str, b: str, batch: list[dict], args: argparse.Namespace) -> dict[str, float]:
    """Write the stream (folder ``a``) and the bare collection (folder ``b``), timed."""
    out: dict[str, float] = {}
    stream = MemoryStream("p", path=a, embeddings=DeterministicFakeEmbedding(size=args.dim))
    t, cpu = time.perf_counter(), time.process_time()
    stream.add_many(batch)
    out["ingest_s"] = time.perf_counter() - t
    out["ingest_cpu_s"] = time.process_time() - cpu
    stream.close()
    chromadb.api.client.SharedSystemClient.clear_system_cache()

    client, col = bare_collection(b)
    t = time.perf_counter()
    bare_add(col, batch, client.get_max_batch_size())
    out["bare_add_s"] = time.perf_counter() - t
    chromadb.api.client.SharedSystemClient.clear_system_cache()
    return out


def reopen_child(a: str, dim: int) -> dict[str, float]:
    """A fresh process reopening the stream to its first query: its time and peak RSS (MB)."""
    done = subprocess.run([sys.executable, "-c", REOPEN_CHILD, a, str(dim)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def run_size(n: int, args: argparse.Namespace, a: str, b: str) -> dict[str, float]:
    rng = np.random.default_rng(0)
    batch = items(n, args.dim, rng)
    extra = items(args.adds + 1, args.dim, rng)
    loaded = items(args.adds + 1, args.dim, rng) if args.busy_core else []
    emb = DeterministicFakeEmbedding(size=args.dim)
    out: dict[str, float] = {}
    if not args.reopen_only or not (Path(a) / "chroma.sqlite3").exists():
        out.update(build(a, b, batch, args))
    del batch
    t = time.perf_counter()
    again = MemoryStream("p", path=a, embeddings=emb)
    GenerativeAgentsRetriever(stream=again, k=30, update_access=False).invoke("first")
    out["reopen_s"] = time.perf_counter() - t
    assert len(again) == n
    client, col = bare_collection(b)
    t = time.perf_counter()
    bare_get(col, n)
    out["bare_get_s"] = time.perf_counter() - t
    out.update(reopen_child(a, args.dim))
    if args.reopen_only:
        again.close()
        chromadb.api.client.SharedSystemClient.clear_system_cache()
        return out

    out.update(single_adds(again, col, extra, n))
    if loaded:
        with busy_core() as pid:
            print(f"[{n}] timing the single adds again with one core busy (pid {pid})",
                  file=sys.stderr)
            busy = single_adds(again, col, loaded, n + len(extra))
        out.update({f"busy_{k}": v for k, v in busy.items()})
    again.close()
    chromadb.api.client.SharedSystemClient.clear_system_cache()
    return out


def run_sizes(sizes: list[int], args: argparse.Namespace) -> dict[int, dict[str, float]]:
    """Each size in its own pair of folders: kept in ``--folder`` or temporary."""
    results = {}
    for n in sizes:
        with contextlib.ExitStack() as stack:
            if args.folder is not None:
                root = args.folder / f"n{n}-d{args.dim}"
                a, b = str(root / "stream"), str(root / "bare")
            else:
                a = stack.enter_context(tempfile.TemporaryDirectory())
                b = stack.enter_context(tempfile.TemporaryDirectory())
            results[n] = run_size(n, args, a, b)
    return results


def single_adds(stream: MemoryStream, col, extra: list[dict], n: int) -> dict[str, float]:
    """Median and mean ms of ``add_event`` and of a bare single-record add, interleaved.

    The order alternates (ours first, then bare first) so a change of the machine's load
    during the run weighs on both; the first add of each is left out (the stream's may
    rewrite the state record after a bulk write). The bare records are numbered from
    ``n + 1``.
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
    return {"add_ms": 1e3 * statistics.median(ours[1:]),
            "bare_single_ms": 1e3 * statistics.median(bare[1:]),
            "add_mean_ms": 1e3 * statistics.fmean(ours[1:]),
            "bare_single_mean_ms": 1e3 * statistics.fmean(bare[1:])}


def verdict(ok: bool) -> str:
    return "pass" if ok else "FAIL"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated memory counts")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--adds", type=int, default=200, help="single adds timed (default 200)")
    parser.add_argument("--busy-core", action="store_true",
                        help="time the single adds again with a CPU-bound child on one core")
    parser.add_argument("--reopen-only", action="store_true",
                        help="time only the reopen and the bare get (see --folder)")
    parser.add_argument("--folder", type=Path, default=None,
                        help="with --reopen-only: keep the built stores here, reuse them")
    args = parser.parse_args()
    if args.folder is not None and not args.reopen_only:
        parser.error("--folder keeps stores for --reopen-only runs (single adds change them)")
    if args.busy_core and args.reopen_only:
        parser.error("--busy-core times the single adds, which --reopen-only skips")
    sizes = [int(x) for x in args.sizes.split(",")]
    results = run_sizes(sizes, args)
    if args.reopen_only:
        print_reopen(results, args)
        return
    phases = "quiet, then with one core busy" if args.busy_core else "quiet"
    print(f"# bench_store: dim {args.dim}, embedded Chroma folder, {args.adds} single adds "
          f"({phases}; both sides given precomputed vectors, neither embeds); load average "
          f"{load_average()} at the end")
    print()
    print("| memories | ingest s | memories/s | per CPU s | bare add s | reopen to 1st query s "
          "| fresh process s | bare get s | reopen peak RSS MB | add_event ms "
          "| bare single add ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n, r in results.items():
        print(f"| {n} | {r['ingest_s']:.2f} | {n / r['ingest_s']:.0f} "
              f"| {n / r['ingest_cpu_s']:.0f} | {r['bare_add_s']:.2f} "
              f"| {r['reopen_s']:.2f} | {r['fresh_s']:.2f} | {r['bare_get_s']:.2f} "
              f"| {r['peak_mb']:.0f} | {r['add_ms']:.2f} | {r['bare_single_ms']:.2f} |")
    print_single_adds(results)
    print_targets_header()
    for n, r in results.items():
        add = r["add_ms"] / r["bare_single_ms"]
        rate = n / r["ingest_s"]
        print(f"| add_event p50 / bare single add | {n} | {add:.2f}x | <= 1.5x "
              f"| {verdict(add <= 1.5)} |")
        if "busy_add_ms" in r:
            busy = r["busy_add_ms"] / r["busy_bare_single_ms"]
            print(f"| add_event p50 / bare single add, one core busy | {n} | {busy:.2f}x "
                  f"| <= 1.5x | {verdict(busy <= 1.5)} |")
        print(reopen_target(n, r))
        print(f"| bulk ingest, precomputed vectors | {n} | {rate:.0f}/s | >= 5000/s "
              f"| {verdict(rate >= 5000)} |")


def print_single_adds(results: dict[int, dict[str, float]]) -> None:
    print()
    print("| memories | single adds | add_event p50 ms | bare add p50 ms | p50 ratio "
          "| add_event mean ms | bare add mean ms |")
    print("|---|---|---|---|---|---|---|")
    for n, r in results.items():
        for phase, key in (("quiet", ""), ("one core busy", "busy_")):
            if f"{key}add_ms" not in r:
                continue
            print(f"| {n} | {phase} | {r[f'{key}add_ms']:.2f} "
                  f"| {r[f'{key}bare_single_ms']:.2f} "
                  f"| {r[f'{key}add_ms'] / r[f'{key}bare_single_ms']:.2f}x "
                  f"| {r[f'{key}add_mean_ms']:.2f} | {r[f'{key}bare_single_mean_ms']:.2f} |")


def print_reopen(results: dict[int, dict[str, float]], args: argparse.Namespace) -> None:
    print(f"# bench_store --reopen-only: dim {args.dim}, embedded Chroma folder; load average "
          f"{load_average()} at the end")
    print()
    print("| memories | reopen to 1st query s | fresh process s | bare get s "
          "| reopen peak RSS MB |")
    print("|---|---|---|---|---|")
    for n, r in results.items():
        print(f"| {n} | {r['reopen_s']:.2f} | {r['fresh_s']:.2f} | {r['bare_get_s']:.2f} "
              f"| {r['peak_mb']:.0f} |")
    print_targets_header()
    for n, r in results.items():
        print(reopen_target(n, r))


def print_targets_header() -> None:
    print()
    print("| target | memories | measured | target | pass |")
    print("|---|---|---|---|---|")


def reopen_target(n: int, r: dict[str, float]) -> str:
    reopen = r["reopen_s"] / r["bare_get_s"]
    return (f"| reopen to first query / bare paged get | {n} | {reopen:.2f}x | <= 0.5x "
            f"| {verdict(reopen <= 0.5)} |")


if __name__ == "__main__":
    main()
