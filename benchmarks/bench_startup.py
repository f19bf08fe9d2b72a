"""What a `genmem` command costs before and after its work: one fresh process per run.

Every command is a new Python process, so its imports and its exit are paid each time (a
shell script, a cron job or a test suite runs hundreds). Each case below runs ``--repeats``
times in a fresh process on a small store (two memories, one in Chinese, embedded by the
bundled model); the table gives the median CPU seconds (user + system, the child's own) and
wall seconds, and the ratio of each case's CPU to that of ``import chromadb``: what any
process that opens a Chroma store pays first, whatever package it uses (``python``, an
interpreter that does nothing, is shown beside it).

Usage:
    python benchmarks/bench_startup.py [--repeats 5] [--cases help,stats,search,...]
    python benchmarks/bench_startup.py --repeats 1 --cases python,help   # the smoke test
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_retrieval import cpu_model

PYTHON = [sys.executable]
GENMEM = [sys.executable, "-m", "langchain_genmem.cli"]
# name -> (argv, {store} standing for the folder; the case its CPU is divided by)
CASES: dict[str, tuple[list[str], str]] = {
    "python": (PYTHON + ["-c", "pass"], "python"),
    "import chromadb": (PYTHON + ["-c", "import chromadb"], "import chromadb"),
    "import MemoryStream": (PYTHON + ["-c", "from langchain_genmem import MemoryStream"],
                            "import chromadb"),
    "help": (GENMEM + ["--help"], "import chromadb"),
    "stats": (GENMEM + ["--path", "{store}", "stats"], "import chromadb"),
    "search": (GENMEM + ["--path", "{store}", "search", "午饭", "-k", "1"], "import chromadb"),
    "explain": (GENMEM + ["--path", "{store}", "explain", "lunch", "-k", "1"],
                "import chromadb"),
    "reflect, no model": (GENMEM + ["--path", "{store}", "reflect", "--force"],
                          "import chromadb"),
}
SHORT = {"python": "python", "chromadb": "import chromadb", "import": "import MemoryStream",
         "help": "help", "stats": "stats", "search": "search", "explain": "explain",
         "reflect": "reflect, no model"}


def build_store(folder: Path) -> Path:
    """Two memories of one persona in an embedded folder (the bundled embedding model)."""
    from langchain_genmem import MemoryStream

    path = folder / "store"
    with MemoryStream("玛丽亚 Maria", path=str(path)) as stream:
        stream.add_event("玛丽亚和克劳斯一起吃午饭", poignancy=4)
        stream.add_event("Maria is studying physics", poignancy=3)
    return path


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """One fresh process: its CPU seconds (user + system) and wall seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False, timeout=300)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def measure(cases: list[str], store: Path, repeats: int) -> dict[str, tuple[float, float]]:
    """Median CPU and wall seconds of each case, the cases taking turns in every round."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    runs: dict[str, list[tuple[float, float]]] = {case: [] for case in cases}
    for _ in range(repeats):  # in turns: a machine that gets busier slows every case alike
        for case in cases:
            argv = [a.replace("{store}", str(store)) for a in CASES[case][0]]
            runs[case].append(run_once(argv, env))
    return {case: (statistics.median(c for c, _ in got), statistics.median(w for _, w in got))
            for case, got in runs.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="fresh processes per case")
    parser.add_argument("--cases", default=",".join(SHORT),
                        help=f"comma-separated, from: {', '.join(SHORT)}")
    args = parser.parse_args()
    chosen = [SHORT.get(c.strip()) for c in args.cases.split(",")]
    if None in chosen or args.repeats < 1:
        parser.error(f"--cases from: {', '.join(SHORT)}; --repeats at least 1")
    cases = list(dict.fromkeys([*(CASES[c][1] for c in chosen), *chosen]))  # baselines too
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as folder:
        store = build_store(Path(folder)) if any("{store}" in " ".join(CASES[c][0])
                                                 for c in cases) else Path(folder)
        got = measure(cases, store, args.repeats)
    print(f"# CPU: {cpu_model()}; Python {sys.version.split()[0]}; "
          f"median of {args.repeats} fresh process(es) per case")
    print("| case | CPU s | wall s | baseline | × baseline CPU |")
    print("|---|---|---|---|---|")
    for case in cases:
        cpu, wall = got[case]
        base = CASES[case][1]
        ratio = "" if base == case else f"{cpu / max(got[base][0], 1e-3):.1f}x"
        print(f"| {case} | {cpu:.2f} | {wall:.2f} | {'' if base == case else base} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
