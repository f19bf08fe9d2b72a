"""What opening a large memory stream costs: peak and resident memory, and time.

Builds (or reuses) an embedded Chroma folder holding N synthetic memories of one persona
(384-d vectors, written with ``add_many`` in pages), then opens it in a fresh child process
that reports its own peak RSS (``ru_maxrss``), its RSS once the stream is open, how long
``MemoryStream(...)`` took and how long the Python interpreter and imports took before it.

Usage:
    python benchmarks/bench_open.py [--size 100000] [--folder DIR] [--repeats 3]

``--folder`` keeps the built store between runs (it is built when missing); without it a
temporary folder is built and removed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import MemoryStream

PERSONA = "玛丽亚 Lopez"
PAGE = 20_000

CHILD = """
import json, resource, sys, time
t0 = time.perf_counter()
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_genmem import MemoryStream
def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")
before = rss_mb()
t1 = time.perf_counter()
s = MemoryStream(sys.argv[2], path=sys.argv[1],
                 embeddings=DeterministicFakeEmbedding(size=int(sys.argv[3])))
t2 = time.perf_counter()
print(json.dumps({"nodes": len(s), "import_s": t1 - t0, "open_s": t2 - t1,
                  "rss_before_mb": before, "rss_after_mb": rss_mb(),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def build(folder: Path, n: int, dim: int) -> None:
    rng = np.random.default_rng(0)
    stream = MemoryStream(PERSONA, path=folder, embeddings=DeterministicFakeEmbedding(size=dim))
    start = datetime(2024, 1, 1)
    t = time.perf_counter()
    for lo in range(len(stream), n, PAGE):
        hi = min(n, lo + PAGE)
        vectors = rng.standard_normal((hi - lo, dim)).astype(np.float32)
        stream.add_many([
            {
                "type": "event" if i % 10 else "thought",
                "description": f"记忆 {i}: {PERSONA} did thing {i % 97}",
                "subject": PERSONA, "predicate": "do", "object": f"thing {i % 97}",
                "poignancy": 1 + i % 10, "created": start + timedelta(seconds=10 * i),
                "expiration": start + timedelta(days=400) if i % 7 == 0 else None,
                "embedding": vectors[i - lo],
            }
            for i in range(lo, hi)
        ])
        print(f"built {hi} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    stream.close()


def open_once(folder: Path, dim: int) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(folder), PERSONA, str(dim)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--folder", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build_only:  # in its own process, so that Chroma has written its index at exit
        build(args.folder, args.size, args.dim)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.folder or Path(tmp)
        t = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--build-only", "--folder", str(folder),
                        "--size", str(args.size), "--dim", str(args.dim)], check=True)
        built = time.perf_counter() - t
        print(f"# {args.size} memories, dim {args.dim}; build/top-up took {built:.1f} s")
        print("| run | nodes | open s | peak RSS MB | RSS after open MB | RSS before open MB |")
        print("|---|---|---|---|---|---|")
        for run in range(1, args.repeats + 1):
            r = open_once(folder, args.dim)
            print(f"| {run} | {r['nodes']} | {r['open_s']:.1f} | {r['peak_mb']:.0f} "
                  f"| {r['rss_after_mb']:.0f} | {r['rss_before_mb']:.0f} |")


if __name__ == "__main__":
    main()
