"""How long the reply parsers take on adversarial model replies (shapes that made them quadratic).

Each case runs in a child process with a time limit, so a quadratic parser is reported as
"> limit" instead of stalling the run. Since the parsers truncate replies to
``MAX_REPLY_CHARS`` (and say so with a warning), the cases are built at the size the issue
measured them (200 KB and more); the figure is the wall time of one call, with the reply
limit raised above every case (``full``: the parsers alone read the whole reply) and with
the default limit (``default``: what a caller gets).

Usage:
    python benchmarks/bench_parsers.py [--limit 30]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
import warnings
from collections.abc import Callable

from langchain_genmem.core.text import set_text_limits
from langchain_genmem.llm import parsers

CASES: dict[str, tuple[str, Callable[[str], object]]] = {
    "parse_triple: 200 KB of newlines": ("\n" * 200_000, parsers.parse_triple),
    "parse_triple: 40 KB of newlines": ("\n" * 40_000, parsers.parse_triple),
    "parse_triple: lines of spaces": ((" " * 99 + "\n") * 2_000, parsers.parse_triple),
    "parse_triple: repeated code fences": ("```\n" * 50_000, parsers.parse_triple),
    "parse_triple: '(' + 'a,' * 100k": ("(" + "a," * 100_000, parsers.parse_triple),
    "parse_insights: 50k citations, one line": (
        "Maria likes art " + "[1] " * 50_000,
        parsers.parse_insights,
    ),
    "parse_insights: 50k numbers in one citation": (
        "Maria likes art [" + ", ".join(map(str, range(50_000))) + "]",
        parsers.parse_insights,
    ),
    "parse_insights: nested quotes": ('"' * 100_000 + "a" + '"' * 100_000, parsers.parse_insights),
    "parse_ratings: 200 KB of newlines": ("\n" * 200_000, lambda t: parsers.parse_ratings(t, 5)),
    "parse_focal_points: '?' and spaces": ("a?" + " " * 200_000, parsers.parse_focal_points),
}


def _time_one(name: str, full: bool, queue: mp.Queue) -> None:
    text, parse = CASES[name]
    if full:
        set_text_limits(reply=len(text) + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        parse(text)
        queue.put(time.perf_counter() - start)


def main() -> None:
    """Print the wall time of each case, or "> limit" when it did not finish."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=float, default=30.0, help="seconds per case")
    args = parser.parse_args()
    print(f"{'case':48} {'full s':>10} {'default s':>10}")
    for name in CASES:
        shown = [_run(name, full, args.limit) for full in (True, False)]
        print(f"{name:48} {shown[0]:>10} {shown[1]:>10}", flush=True)


def _run(name: str, full: bool, limit: float) -> str:
    queue: mp.Queue = mp.Queue()
    child = mp.Process(target=_time_one, args=(name, full, queue))
    child.start()
    child.join(limit)
    if child.is_alive():
        child.kill()
        child.join()
        return f"> {limit:g}"
    return f"{queue.get():.3f}" if child.exitcode == 0 else f"failed ({child.exitcode})"


if __name__ == "__main__":
    main()
