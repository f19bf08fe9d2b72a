"""How long writing and reopening a memory stream takes, against bare Chroma.

Adds N memories with precomputed vectors in one ``add_many`` call to an embedded (persistent)
Chroma folder, then reopens the stream in a fresh ``MemoryStream``. Baselines, on the same
data and client kind: a bare ``collection.add`` of the same records in Chroma's batch size
(the floor any Chroma-backed store pays) and a bare paged ``collection.get`` of them.

Usage:
    python benchmarks/bench_store.py [--sizes 10000] [--dim 384]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import datetime, timedelta

import chromadb
import numpy as np
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import MemoryStream
from langchain_genmem.backends.chroma import DEFAULT_CONFIGURATION, GET_PAGE


def items(n: int, dim: int) -> list[dict]:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    start = datetime(2024, 1, 1)
    return [
        {
            "type": "event",
            "description": f"memory number {i}: Maria Lopez did thing {i % 97}",
            "subject": "Maria Lopez",
            "predicate": "do",
            "object": f"thing {i % 97}",
            "poignancy": 1 + i % 10,
            "created": start + timedelta(minutes=i),
            "embedding": vectors[i],
        }
        for i in range(n)
    ]


def bare_chroma(path: str, batch: list[dict]) -> tuple[float, float]:
    client = chromadb.PersistentClient(path=path)
    col = client.get_or_create_collection("bare", embedding_function=None,
                                          configuration=DEFAULT_CONFIGURATION)
    size = client.get_max_batch_size()
    ids = [f"p::node_{i + 1}" for i in range(len(batch))]
    t = time.perf_counter()
    for lo in range(0, len(batch), size):
        part = batch[lo : lo + size]
        col.add(ids=ids[lo : lo + size], embeddings=np.vstack([b["embedding"] for b in part]),
                metadatas=[{"persona": "p", "poignancy": float(b["poignancy"])} for b in part],
                documents=[b["description"] for b in part])
    add = time.perf_counter() - t
    t = time.perf_counter()
    for lo in range(0, len(ids), GET_PAGE):
        col.get(ids=ids[lo : lo + GET_PAGE], include=["embeddings", "metadatas", "documents"])
    return add, time.perf_counter() - t


def ours(path: str, batch: list[dict], dim: int) -> tuple[float, float]:
    emb = DeterministicFakeEmbedding(size=dim)
    stream = MemoryStream("p", path=path, embeddings=emb)
    t = time.perf_counter()
    stream.add_many(batch)
    add = time.perf_counter() - t
    t = time.perf_counter()
    again = MemoryStream("p", path=path, embeddings=emb)
    reopen = time.perf_counter() - t
    assert len(again) == len(batch)
    return add, reopen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000", help="comma-separated memory counts")
    parser.add_argument("--dim", type=int, default=384)
    args = parser.parse_args()
    print(f"{'memories':>9} {'add_many s':>11} {'bare add s':>11} {'ratio':>6} "
          f"{'reopen s':>9} {'bare get s':>11} {'ratio':>6}")
    for n in (int(x) for x in args.sizes.split(",")):
        batch = items(n, args.dim)
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            add, reopen = ours(a, batch, args.dim)
            bare_add, bare_get = bare_chroma(b, batch)
        print(f"{n:>9} {add:>11.2f} {bare_add:>11.2f} {add / bare_add:>6.2f} "
              f"{reopen:>9.2f} {bare_get:>11.2f} {reopen / bare_get:>6.2f}")


if __name__ == "__main__":
    main()
