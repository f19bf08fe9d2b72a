"""The package's model-facing half on a real small model: SmolLM2-135M on llama.cpp's server.

Importance ratings, the reflection graph (structured and text replies), ``genmem reflect``,
the chat agent, the deployed reflection graph and the examples that take a model, each
through ``ChatOpenAI`` on the session's server (``tests/support/llama_server.py``). What a
135M model says is close to random, so nothing here checks wording or a rating's value:
only shapes, ranges and bounds. Every call made in-process is recorded by a callback: it
must carry the ``max_tokens`` its kind of reply gets from ``CallLimits`` (the model itself
is built without one) and its reply must stay within it. Calls made by a child process are
read from the server's log: their number and the tokens each generated.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, get_args
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import LLMResult

from langchain_genmem import (
    CallLimits,
    GenerativeAgentsRetriever,
    ImportanceScorer,
    MemoryStream,
    ReflectionSettings,
    create_reflection_graph,
    load_associative_memory,
)
from langchain_genmem.agent import create_memory_agent
from langchain_genmem.llm.importance import UnratedWarning, add_rated, unrated_ids
from langchain_genmem.llm.limits import FALLBACK_IMPORTANCE, ReplyKind
from langchain_genmem.llm.llama_server import LlamaServer
from langchain_genmem.llm.sub_questions import SubQuestionRetriever
from langchain_genmem.reflection.state import ReflectionStatus
from tests.support.llama_server import small_model_chat
from tests.support.warm import shared

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ISABELLA = "Isabella Rodriguez"
ISABELLA_SAVE = (ROOT / "data" / "generative_agents"
                 / "July1_the_ville_isabella_maria_klaus-step-3-2" / "personas" / ISABELLA
                 / "bootstrap_memory" / "associative_memory")
STATUSES = set(get_args(ReflectionStatus))
FORCED_ENDS = {"no_questions", "no_insights", "reflected"}  # where a forced run may end
KINDS: tuple[ReplyKind, ...] = get_args(ReplyKind)
CALL_TIMEOUT = 180.0  # seconds one call may take on a busy two-core machine
SUBPROCESS_TIMEOUT = 600

MEMORIES = [
    ("event", "Isabella Rodriguez is opening Hobbs Cafe at 8 am"),
    ("chat", "Isabella Rodriguez asked Maria Lopez to help decorate for the party"),
    ("event", "伊莎贝拉收到了一封来自老朋友的信，信里说他病得很重"),
    ("thought", "伊莎贝拉觉得咖啡馆的常客就像她的家人"),
]
# Where each call is its own prompt, one English and one Chinese memory show the same: every
# prompt costs the server seconds of CPU, so only the batch gets all four.
TWO_MEMORIES = MEMORIES[1:3]

# Small bounds that still fit every structured reply asked for here: one question of at
# most 160 characters, two insights of at most 240 with their evidence numbers.
SMALL = CallLimits(rating=24, ratings=24, rating_per_item=8, questions=96, insights=256,
                   condense=256, triples=64, triple_per_item=48, answer=40,
                   timeout=CALL_TIMEOUT, max_retries=0)
# Bounds no reply can fit: every rating is cut, so every memory is left unrated.
NO_ROOM = SMALL.model_copy(update={"rating": 2, "ratings": 2, "rating_per_item": 1})


# --- what the calls asked for and got --------------------------------------------------------


class CallLog(BaseCallbackHandler):
    """Every chat model call: the ``max_tokens`` it carried and the tokens of its reply."""

    run_inline = True

    def __init__(self) -> None:
        self.calls: dict[UUID, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def on_chat_model_start(self, serialized: dict[str, Any],
                            messages: list[list[BaseMessage]], *, run_id: UUID,
                            **kwargs: Any) -> None:
        params = kwargs.get("invocation_params") or {}
        with self._lock:
            self.calls[run_id] = {"max_tokens": params.get("max_tokens"),
                                  "timeout": params.get("timeout"), "output_tokens": None}

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        message = response.generations[0][0].message  # type: ignore[attr-defined]
        with self._lock:
            self.calls[run_id]["output_tokens"] = message.usage_metadata["output_tokens"]

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        # a structured reply cut at max_tokens: the client raises, with the usage it got
        # (an error raised in a callback is only logged: check() asserts on what is kept)
        completion = getattr(error, "completion", None)
        with self._lock:
            self.calls[run_id]["error"] = repr(error)
            if completion is not None:
                self.calls[run_id]["output_tokens"] = completion.usage.completion_tokens

    def check(self, limits: CallLimits, kinds: Iterable[ReplyKind], most_items: int = 1) -> int:
        """Assert every call carried a bound of ``kinds`` and its reply kept to it.

        Args:
            limits: the bounds the calls were made with.
            kinds: the kinds of call that may have been made.
            most_items: the most items a batched call may hold.

        Returns:
            How many calls were made.
        """
        allowed = {limits.max_tokens(kind, n) for kind in kinds for n in range(1, most_items + 1)}
        for call in self.calls.values():
            assert call["max_tokens"] in allowed, (call, sorted(allowed))
            assert call["timeout"] == limits.timeout, call
            assert call["output_tokens"] is not None, call  # it ended, or was cut
            assert 0 <= call["output_tokens"] <= call["max_tokens"], call
        return len(self.calls)

    def cut(self) -> int:
        """How many structured replies were cut at their max_tokens."""
        return sum(1 for call in self.calls.values() if "error" in call)


class ServerLog:
    """What llama.cpp's server logged from now on: the tokens each finished reply generated."""

    GENERATED = re.compile(r"\|\s+eval time =\s+[\d.]+ ms /\s+(\d+) tokens")
    STARTED = re.compile(r"launch_slot_: .*processing task")
    RELEASED = re.compile(r"slot\s+release: ")

    def __init__(self, server: LlamaServer) -> None:
        self.path = server.log
        self.start = self.path.stat().st_size

    def text(self) -> str:
        with self.path.open("rb") as read:
            read.seek(self.start)
            return read.read().decode("utf-8", "replace")

    def generated(self) -> list[int]:
        """Tokens generated per reply, once every task started has been released."""
        for _ in range(100):  # the server writes its log from a thread of its own
            text = self.text()
            if len(self.STARTED.findall(text)) == len(self.RELEASED.findall(text)):
                break
            time.sleep(0.05)
        assert len(self.STARTED.findall(text)) == len(self.RELEASED.findall(text)), text[-2000:]
        return [int(n) for n in self.GENERATED.findall(text)]


@pytest.fixture
def server_log(small_model_server: LlamaServer) -> Iterator[ServerLog]:
    """The server's log from the start of the test; shown when the test fails."""
    log = ServerLog(small_model_server)
    yield log
    print(f"--- llama.cpp's server log during this test ---\n{log.text()[-4000:]}")


@pytest.fixture
def recorded(small_model_server: LlamaServer, server_log: ServerLog) -> tuple[Any, CallLog]:
    """A ChatOpenAI on the small model with no bound of its own, and the log of its calls."""
    log = CallLog()
    model = small_model_chat(small_model_server.base_url, max_tokens=None, timeout=None,
                             callbacks=[log])
    return model, log


def model_env(server: LlamaServer) -> dict[str, str]:
    """This process's variables, the chat model named by OPENAI_* being the small one."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return {**base, "OPENAI_BASE_URL": server.base_url, "OPENAI_MODEL": "smollm2"}


def run(*argv: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = shared().run([sys.executable, *argv], env=env, cwd=cwd, timeout=SUBPROCESS_TIMEOUT)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done


# --- Isabella Rodriguez's save, imported once ------------------------------------------------


@pytest.fixture(scope="module")
def isabella_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Chroma folder holding Isabella Rodriguez's 14 saved memories (not to be written)."""
    path = tmp_path_factory.mktemp("isabella") / "store"
    load_associative_memory(ISABELLA_SAVE, persona=ISABELLA, path=str(path),
                            progress=False).close()
    return path


@pytest.fixture
def isabella(isabella_store: Path, tmp_path: Path) -> Path:
    """A copy of the Isabella store that this test may write."""
    return Path(shutil.copytree(isabella_store, tmp_path / "isabella"))


def is_rating(value: float | None) -> bool:
    return value is not None and value == int(value) and 1 <= value <= 10


# --- 1. importance ratings -------------------------------------------------------------------


def test_ratings_one_by_one_in_text_make_one_bounded_call_each(recorded):
    model, log = recorded
    scorer = ImportanceScorer(model, limits=SMALL, batch_size=1, output="text")
    ratings = scorer.rate_many(ISABELLA, TWO_MEMORIES, config={"max_concurrency": 1})
    assert len(ratings) == len(TWO_MEMORIES)
    assert all(r is None or is_rating(r) for r in ratings), ratings
    assert log.check(SMALL, ["rating"]) == len(TWO_MEMORIES) == scorer.calls


@pytest.mark.parametrize(("limits", "memories"), [(SMALL, MEMORIES), (NO_ROOM, TWO_MEMORIES)],
                         ids=["rated", "no-room-to-rate"])
def test_stored_memories_are_rated_or_listed_as_unrated(recorded, tmp_path, limits, memories):
    model, log = recorded
    scorer = ImportanceScorer(model, limits=limits, strict=True)  # add_rated never fails
    with MemoryStream(ISABELLA, path=str(tmp_path / "store")) as stream, \
            warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always", UnratedWarning)
        nodes = add_rated(stream, scorer,
                          [{"type": kind, "description": text} for kind, text in memories])
        unrated = unrated_ids(stream)
        assert len(nodes) == len(stream) == len(memories)
        assert set(unrated) <= {n.node_id for n in nodes}
        for node in nodes:
            stored = stream.get(node.node_id).poignancy
            assert stored == FALLBACK_IMPORTANCE if node.node_id in unrated else is_rating(stored)
    assert len([w for w in warned if w.category is UnratedWarning]) == len(unrated)
    # one batched call, then one call alone for each memory the batch left unrated
    calls = log.check(limits, ["ratings", "rating"], most_items=len(memories))
    assert calls == scorer.calls <= 1 + len(memories)
    batched = [c for c in log.calls.values()
               if c["max_tokens"] == limits.max_tokens("ratings", len(memories))]
    assert len(batched) == 1
    if limits is NO_ROOM:  # no rating fits in its bound: every memory is left unrated
        assert len(unrated) == len(memories) and log.cut() == len(log.calls)


# --- 2. the reflection graph -----------------------------------------------------------------

# Statements shown per question: enough to cite from, few enough to keep a prompt short (the
# server spends most of its CPU reading prompts, about 15 ms a token on one thread).
EVIDENCE = 5


@pytest.mark.parametrize("output", ["structured", "text"])
def test_forced_reflection_writes_thoughts_on_evidence_or_says_why(recorded, isabella, output):
    model, log = recorded
    settings = ReflectionSettings(k=EVIDENCE, n_focal_points=1, n_insights=2, max_insights=2,
                                  output=output, limits=SMALL, max_calls=6)
    with MemoryStream(ISABELLA, path=str(isabella)) as stream:
        before = {n.node_id for n in stream.nodes()}
        out = create_reflection_graph(model, stream, settings=settings).invoke({"force": True})
        assert out["status"] in FORCED_ENDS <= STATUSES, out
        assert (out["status"] == "reflected") == bool(out["written"]), out
        for node_id in out["written"]:
            thought = stream.get(node_id)
            assert thought.type == "thought" and thought.description.strip()
            assert thought.evidence and set(thought.evidence) <= before, thought
            assert is_rating(thought.poignancy) or thought.poignancy == FALLBACK_IMPORTANCE
        if not out["written"]:
            assert out["reasons"] and all(line.strip() for line in out["reasons"]), out
        assert len(stream) == len(before) + len(out["written"])
    assert out["llm_calls"] <= settings.max_calls
    kinds = ["questions", "insights", "condense", "triples", "ratings", "rating"]
    assert log.check(SMALL, kinds, most_items=2) == out["llm_calls"]


# --- 3. genmem reflect -----------------------------------------------------------------------

CLI_MAX_CALLS = 2  # the questions and one question's insights: the rest is skipped
THOUGHT_LINE = re.compile(r"^\S+: \S")
EVIDENCE_LINE = re.compile(r"^    evidence \S+: \S")


def test_genmem_reflect_forced_prints_thoughts_or_reasons(small_model_server, server_log,
                                                          isabella, tmp_path):
    done = run("-m", "langchain_genmem.cli", "--path", str(isabella), "reflect", "--force",
               "--max-calls", str(CLI_MAX_CALLS), "--timeout", str(CALL_TIMEOUT),
               env=model_env(small_model_server), cwd=tmp_path)
    lines = done.stdout.splitlines()
    status = lines[0].removeprefix("status: ")
    assert lines[0].startswith("status: ") and status in FORCED_ENDS, done.stdout
    calls = int(lines[-1].removeprefix("llm calls: "))
    assert lines[-1].startswith("llm calls: ") and 1 <= calls <= CLI_MAX_CALLS, done.stdout
    body = lines[1:-1]
    if status == "reflected":
        assert body and THOUGHT_LINE.match(body[0]), done.stdout
        for line, after in zip(body, [*body[1:], ""], strict=True):
            assert THOUGHT_LINE.match(line) or EVIDENCE_LINE.match(line), line
            if not EVIDENCE_LINE.match(line):  # a thought is followed by its evidence
                assert EVIDENCE_LINE.match(after), done.stdout
    else:
        assert body and all(line.startswith("reason: ") for line in body), done.stdout
    generated = server_log.generated()
    assert len(generated) == calls
    bound = max(CallLimits().max_tokens(kind, 15) for kind in KINDS if kind != "answer")
    assert all(n <= bound for n in generated), generated


# --- 4. the chat agent -----------------------------------------------------------------------

# Asking for short answers keeps a turn cheap (the agent's answer may take 512 tokens).
# The agent in process takes the first two (the second with the first in its history), the
# example all three.
TURNS = [
    "Hi Ada, my sister Lena moved to Porto. Please answer in one short sentence.",
    "我下周要去北京出差。请用一句话回答。",
    "Where does my sister live now? One short sentence, please.",
]


@pytest.mark.parametrize(("limits", "turns"), [(SMALL, TURNS[:2]), (NO_ROOM, TURNS[1:2])],
                         ids=["rated", "no-room-to-rate"])
def test_chat_agent_answers_every_turn_and_remembers_it(recorded, tmp_path, limits, turns):
    model, log = recorded
    settings = ReflectionSettings(limits=limits)
    with MemoryStream("Ada", path=str(tmp_path / "store")) as stream, \
            warnings.catch_warnings():
        warnings.simplefilter("ignore", UnratedWarning)
        agent = create_memory_agent(model, stream, settings=settings)
        messages: list[Any] = []
        for turn, text in enumerate(turns, 1):
            out = agent.invoke({"messages": [*messages, ("user", text)]})
            reply = out["messages"][-1]
            assert isinstance(reply, AIMessage) and isinstance(reply.content, str)
            assert reply.content.strip(), out
            assert len(out["written"]) == 3 and len(stream) == 3 * turn
            messages = out["messages"]
        unrated = unrated_ids(stream)
        if limits is NO_ROOM:  # every rating failed, every memory is stored all the same
            assert len(unrated) == len(stream)
        assert all(stream.get(i).poignancy == FALLBACK_IMPORTANCE for i in unrated)
    answers = [c for c in log.calls.values() if c["max_tokens"] == limits.answer]
    assert len(answers) == len(turns)
    log.check(limits, ["answer", "ratings", "rating"], most_items=3)


# --- 5. the deployed reflection graph --------------------------------------------------------


def test_the_deployed_reflection_graph_reflects_with_the_model_of_the_environment(
        small_model_server, server_log, isabella, monkeypatch):
    from graphs.reflection import build

    for name, value in model_env(small_model_server).items():
        if name.startswith("OPENAI_"):
            monkeypatch.setenv(name, value)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    sizes = {"k": EVIDENCE, "n_focal_points": 1, "n_insights": 2, "max_insights": 2,
             "max_calls": 6}
    config = {"configurable": {"path": str(isabella), "persona": ISABELLA,
                               "reflection": sizes}}
    log = CallLog()
    graph = build(config)
    out = graph.invoke({"force": True}, {**config, "callbacks": [log]})
    assert out["status"] in FORCED_ENDS, out
    assert bool(out["written"]) == (out["status"] == "reflected")
    if not out["written"]:
        assert out["reasons"], out
    chosen = ReflectionSettings(**sizes)  # the config's sizes reached the graph
    assert out["llm_calls"] <= chosen.max_calls
    kinds = ["questions", "insights", "condense", "triples", "ratings", "rating"]
    assert log.check(chosen.limits, kinds, most_items=chosen.n_focal_points
                     * chosen.max_insights) == out["llm_calls"]
    with MemoryStream(ISABELLA, path=str(isabella)) as stream:
        for node_id in out["written"]:
            assert set(stream.get(node_id).evidence) <= {n.node_id for n in stream.nodes()}


# --- 6. the examples -------------------------------------------------------------------------

STEPS = [
    "# memory_stream.get_memory_df()",
    "# memory_stream.retrieve_memories(",
]


def test_reflection_step_by_step_runs_every_step_on_the_model(small_model_server, server_log,
                                                                tmp_path):
    done = run(str(ROOT / "examples" / "reflection_step_by_step.py"),
               "--path", str(tmp_path / "store"), env=model_env(small_model_server),
               cwd=tmp_path)
    out = done.stdout
    assert "offline" not in out.splitlines()[0]
    positions = [out.index(step) for step in STEPS]
    assert positions == sorted(positions)
    if "generate_insight: the importance" not in out:
        assert out.index("# (questions_fmt, insights_list)") > positions[-1]
        assert out.index("# reflections = generate_reflection") \
            > out.index("# (questions_fmt, insights_list)")
        assert re.search(r"^\d+ memories, \d+ of them reflections$", out, re.M), out
    assert server_log.generated()


def test_chat_agent_example_answers_every_scripted_turn(small_model_server, server_log,
                                                         tmp_path):
    # each turn sends the newest turns that fit the history budget, so the conversation
    # stays inside the 2048 tokens of context of the session's server
    script = tmp_path / "turns.txt"
    script.write_text("\n".join(TURNS) + "\n", "utf-8")
    done = run(str(ROOT / "examples" / "chat_agent.py"), "--script", str(script),
               "--path", str(tmp_path / "memory"), env=model_env(small_model_server),
               cwd=tmp_path)
    generated = server_log.generated()
    lines = done.stdout.splitlines()
    asked = [i for i, line in enumerate(lines) if line.startswith("you> ")]
    assert [lines[i].removeprefix("you> ") for i in asked] == TURNS
    for start, end in zip(asked, [*asked[1:], len(lines)], strict=True):
        answers = [line for line in lines[start:end] if line.startswith("Ada> ")]
        assert len(answers) == 1 and answers[0].removeprefix("Ada> ").strip(), done.stdout
    with MemoryStream("Ada", path=str(tmp_path / "memory")) as stream:
        assert len(stream) == 3 * len(TURNS)
    # an answer and a batch of ratings a turn, and a rating alone for each left unrated
    assert 2 * len(TURNS) <= len(generated) <= 5 * len(TURNS)
    assert all(n <= CallLimits().answer for n in generated), generated


@pytest.mark.parametrize("output", ["structured", "text"])
def test_a_split_question_makes_one_bounded_call_and_ranks_the_same_pool(recorded, tmp_path,
                                                                         output):
    model, log = recorded
    stream = MemoryStream("陈静", path=str(tmp_path))
    stream.add_many([{"type": "event", "description": text, "poignancy": 3} for text in (
        "年糕又吐了，带它去了宠物医院", "医生说是毛球，花了三百多", "年糕下周绝育，手术费八百",
        "Maya ran the Halden half marathon in 1:52", "周末去爬山了")])
    base = GenerativeAgentsRetriever(stream=stream, k=3, update_access=False,
                                     relevance="lexical", recency_w=0.0, importance_w=0.0)
    recall = SubQuestionRetriever(retriever=base, llm=model, limits=SMALL, output=output,
                                  pool=5)
    docs = recall.invoke("年糕去过几次宠物医院？每次花了多少钱？")
    assert log.check(SMALL, ["questions"]) == 1
    assert len(docs) == 3
    parts = docs[0].metadata["sub_questions"]
    assert len(parts) <= 3
    assert all(0 < len(p) <= 160 for p in parts), parts
    question = "年糕去过几次宠物医院？每次花了多少钱？"
    pool = {d.metadata["node_id"] for d in base.invoke(question, k=5)}
    assert {d.metadata["node_id"] for d in docs} <= pool
