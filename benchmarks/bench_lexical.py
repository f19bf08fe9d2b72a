"""Costs of the lexical (BM25) signal at scale, and the libraries it was chosen against.

Synthetic short memories (8-16 words; 80% English drawn from the shipped Smallville
descriptions' words plus 20,000 rarer made-up words with a Zipf-like frequency, 20% Chinese
from 2,500 common Han characters, a few mixed) stand for a persona's stream. Measured in
one run:

- ``tokenise``: :func:`langchain_genmem.core.tokens.tokens` over every memory's indexed text;
- ``open``: a new ``LexicalIndex().sync(cache)`` over every row (tokenising included), what
  a first lexical query pays after a restart;
- ``add 1`` / ``add 100``: ``sync`` after one or a hundred new memories;
- ``query``: ``scores(query, every row)`` including tokenising the query, median over
  ``--queries`` queries of 2-5 words taken from random memories (English, Chinese, mixed),
  and for a worst case, a query of the five terms that the most memories hold;
- ``bm25s``: its ``index`` of the same tokens (what it redoes on every add) and its
  ``get_scores`` (every document, the query's tokens given), with the largest difference
  from ours (bm25s ``method="lucene"`` leaves out the constant ``k1 + 1``);
- ``tantivy``: adding the same tokens (joined by spaces, whitespace tokenizer) to an
  in-memory index and a search returning every matching document with its score.

Usage:
    python benchmarks/bench_lexical.py [--sizes 10000,100000] [--queries 50]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

import numpy as np

from langchain_genmem.core.nodes import MemoryNode
from langchain_genmem.core.tokens import tokens
from langchain_genmem.numerics.lexical import BM25_B, BM25_K1, LexicalIndex, indexed_text

QUERY_TARGET_MS = 5.0  # half of dense retrieval at 100k (5-10 ms): hybrid <= 2x dense
DATA = Path(__file__).resolve().parent.parent / "data" / "generative_agents"
WHEN = datetime(2023, 2, 13, 9, 0)
HAN = [chr(c) for c in range(0x4E00, 0x4E00 + 2500)]


class Cache:
    """What the index reads of a NodeCache: ``n``, ``nodes[row]`` and the dead rows (none)."""

    dead = 0

    def __init__(self, nodes: list[MemoryNode]) -> None:
        self.nodes = nodes
        self.n = len(nodes)
        self.alive = np.ones(self.n, dtype=bool)


def shipped_words() -> list[str]:
    words: set[str] = set()
    for path in DATA.rglob("nodes.json"):
        for node in json.loads(path.read_text(encoding="utf-8")).values():
            words.update(str(node.get("description", "")).split())
    return sorted(words)


def make_texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    common = shipped_words()
    rare = [f"topic{i}" for i in range(20_000)]
    weights = [1 / (i + 1) for i in range(len(rare))]
    texts = []
    for _ in range(n):
        kind = rng.random()
        size = rng.randint(8, 16)
        if kind < 0.8:
            words = rng.choices(common, k=size - 2) + rng.choices(rare, weights, k=2)
            texts.append(" ".join(words))
        elif kind < 0.98:
            texts.append("".join(rng.choices(HAN, k=size * 2)))
        else:
            texts.append(" ".join(rng.choices(common, k=size // 2)) + "".join(
                rng.choices(HAN, k=size)))
    return texts


def make_nodes(texts: Sequence[str]) -> list[MemoryNode]:
    return [
        MemoryNode.model_construct(
            node_id=f"node_{i + 1}", node_count=i + 1, type_count=i + 1, type="event",
            depth=0, created=WHEN, expiration=None, last_accessed=WHEN, subject="",
            predicate="", object="", description=t, embedding_key=t, poignancy=3.0,
            keywords=[], filling=None,
        )
        for i, t in enumerate(texts)
    ]


def make_queries(texts: Sequence[str], count: int, seed: int) -> list[str]:
    rng = random.Random(seed + 1)
    out = []
    for _ in range(count):
        text = rng.choice(texts)
        if " " in text:
            words = text.split()
            out.append(" ".join(rng.sample(words, min(len(words), rng.randint(2, 5)))))
        else:
            at = rng.randrange(max(1, len(text) - 6))
            out.append(text[at : at + rng.randint(4, 8)])
    return out


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median_ms(fn: Callable[[str], object], queries: Sequence[str]) -> float:
    return statistics.median(timed(lambda q=q: fn(q)) for q in queries) * 1e3


def bench_size(n: int, args: argparse.Namespace) -> list[tuple[str, str]]:
    texts = make_texts(n + 100, args.seed)
    nodes = make_nodes(texts)
    cache = Cache(nodes[:n])
    queries = make_queries(texts[:n], args.queries, args.seed)
    rows = np.arange(n)
    out: list[tuple[str, str]] = []

    docs: list[list[str]] = []
    seconds = timed(lambda: docs.extend(tokens(indexed_text(x)) for x in nodes[:n]))
    out.append(("tokenise every memory", f"{seconds:.2f} s"))
    index = LexicalIndex()
    seconds = timed(lambda: index.sync(cache))
    out.append(("open: LexicalIndex().sync(cache)", f"{seconds:.2f} s"))
    out.append(("terms held", f"{index.vocabulary_size}"))
    ours_ms = median_ms(lambda q: index.scores(q, rows), queries)
    out.append(("query: scores(query, every row), p50", f"{ours_ms:.2f} ms"))
    verdict = "pass" if ours_ms <= QUERY_TARGET_MS else "FAIL"
    out.append((f"target: query p50 <= {QUERY_TARGET_MS:g} ms", verdict))
    slowest = max(timed(lambda q=q: index.scores(q, rows)) for q in queries) * 1e3
    out.append(("query: slowest", f"{slowest:.2f} ms"))
    common = " ".join(t for t, _ in Counter(t for d in docs for t in set(d)).most_common(5))
    ms = median_ms(lambda q: index.scores(q, rows), [common] * 5)
    out.append(("query: the 5 terms held by most memories, p50", f"{ms:.2f} ms"))
    tok_ms = median_ms(tokens, queries)
    out.append(("  of which tokenising the query, p50", f"{tok_ms:.3f} ms"))

    out.extend(bench_bm25s(index, docs, queries, n))  # before the adds below: same corpus
    adds = []
    for i in range(n, n + 100):
        cache.nodes, cache.n = nodes[: i + 1], i + 1
        adds.append(timed(lambda: index.sync(cache)))
    out.append(("add 1: sync after one new memory, p50", f"{statistics.median(adds) * 1e3:.3f} ms"))
    grown = LexicalIndex()
    grown.sync(Cache(nodes[:n]))
    seconds = timed(lambda: grown.sync(Cache(nodes[: n + 100])))
    out.append(("add 100: sync after 100 new memories", f"{seconds * 1e3:.2f} ms"))
    out.extend(bench_tantivy(docs, queries))
    return out


def bench_bm25s(index: LexicalIndex, docs: list[list[str]], queries: Sequence[str],
                n: int) -> list[tuple[str, str]]:
    try:
        import bm25s
    except ImportError:
        return [("bm25s", "not installed (pip install bm25s)")]
    retriever = bm25s.BM25(method="lucene", k1=BM25_K1, b=BM25_B)
    seconds = timed(lambda: retriever.index(docs, show_progress=False))
    out = [("bm25s: index (redone on every add)", f"{seconds:.2f} s")]
    pairs = [(q, list(dict.fromkeys(tokens(q)))) for q in queries]
    pairs = [(q, t) for q, t in pairs if t]  # bm25s refuses a query without tokens
    qtoks = [t for _, t in pairs]
    ms = statistics.median(timed(lambda t=t: retriever.get_scores(t)) for t in qtoks) * 1e3
    out.append(("bm25s: get_scores(query tokens), p50", f"{ms:.2f} ms"))
    rows = np.arange(n)
    diff = max(
        float(np.abs(index.scores(q, rows) - (BM25_K1 + 1) * retriever.get_scores(t)).max())
        for q, t in pairs
    )
    out.append(("bm25s: max |ours - (k1+1) * bm25s|", f"{diff:.1e}"))
    out.append(("target: equal to bm25s to its float32 (1e-4)", "pass" if diff <= 1e-4 else "FAIL"))
    return out


def bench_tantivy(docs: list[list[str]], queries: Sequence[str]) -> list[tuple[str, str]]:
    try:
        import tantivy
    except ImportError:
        return [("tantivy", "not installed (pip install tantivy)")]
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("body", stored=False, tokenizer_name="whitespace")
    schema = builder.build()
    idx = tantivy.Index(schema)  # in memory: a lower bound of the on-disk cost

    def build() -> None:
        writer = idx.writer(heap_size=50_000_000, num_threads=1)
        for doc in docs:
            writer.add_document(tantivy.Document(body=" ".join(doc)))
        writer.commit()
        writer.wait_merging_threads()

    out = [("tantivy: add every memory + commit", f"{timed(build):.2f} s")]
    idx.reload()
    searcher = idx.searcher()
    n = len(docs)

    def every_score(q: str) -> None:
        terms = [t for t in dict.fromkeys(tokens(q)) if '"' not in t]
        if not terms:
            return
        query = idx.parse_query(" OR ".join(f'"{t}"' for t in terms), ["body"])
        scores = np.zeros(n)
        for score, address in searcher.search(query, limit=n).hits:
            scores[address.doc] = score
    ms = median_ms(every_score, queries)
    out.append(("tantivy: every matching score, p50", f"{ms:.2f} ms"))
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for n in [int(s) for s in args.sizes.split(",")]:
        print(f"\n## {n} memories\n\n| measure | value |\n|---|---|")
        for name, value in bench_size(n, args):
            print(f"| {name} | {value} |")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
