"""A scripted chat model and the memories the reflection tests (graph, stepwise,
conversation, the stepwise design's walkthrough) reflect over.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from langchain_genmem import (
    MemoryStream,
)
from langchain_genmem.core.timeutil import SimulationClock as Clock

PERSONA = "Maria Lopez"


T0 = datetime(2023, 2, 13, 9, 0)


NOW = T0 + timedelta(hours=1)


FOCAL = "most salient high-level questions"


INSIGHTS = "high-level insights can you infer"


CONDENSE = "Please condense"


TRIPLES = "Turn each of the following"


RATINGS = "rate the likely poignancy"


ONE = "What does Maria Lopez study?"


QUESTIONS = f"{ONE}\n2) Who is Klaus Mueller?\n3) How does Maria spend her day?"


Reply = str | list[str] | Callable[[str], str]


MEMORIES = [
    ("event", "Maria Lopez is idle", 1),
    ("event", "Maria Lopez is studying physics", 8),
    ("event", "Klaus Mueller is writing a research paper", 6),
    ("chat", "conversing about the research paper", 5),
    ("event", "Maria Lopez is streaming on Twitch", 7),
    ("thought", "Maria Lopez enjoys physics", 5),
    ("event", "Maria Lopez is eating lunch at Hobbs Cafe", 3),
    ("event", "Isabella Rodriguez is planning a party", 4),
]


KEYS = {f"node_{i}": text for i, (_, text, _) in enumerate(MEMORIES, 1)}


def auto_triples(prompt: str) -> str:
    n = int(re.search(r"following (\d+) statements", prompt)[1])
    return "\n".join(f"{i}. (Maria Lopez, think about, topic {i})" for i in range(1, n + 1))


def auto_ratings(prompt: str) -> str:
    many = re.search(r"following (\d+) memories", prompt)
    return "\n".join(f"{i}. 6" for i in range(1, int(many[1]) + 1)) if many else "6"


class ScriptedChatModel(BaseChatModel):
    """Answers with the first rule whose pattern is in the human prompt; records every call.

    A rule's reply is a text, a function of the human prompt, or a list of texts used one
    per call in call order (run the graph with ``max_concurrency=1`` to fix that order).
    """

    rules: list[tuple[str, Any]]
    calls: list[tuple[str, str]] = Field(default_factory=list)
    lock: Any = Field(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **_: Any
    ) -> ChatResult:
        system = "".join(str(m.content) for m in messages if isinstance(m, SystemMessage))
        human = str(messages[-1].content)
        with self.lock:
            self.calls.append((system, human))
            for pattern, reply in self.rules:
                if re.search(pattern, human):
                    text = reply.pop(0) if isinstance(reply, list) else reply
                    text = text(human) if callable(text) else text
                    return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])
        raise AssertionError(f"unexpected prompt: {human[:300]!r}")

    def sent(self, pattern: str) -> list[tuple[str, str]]:
        """The (system, human) pairs of the calls whose human prompt holds ``pattern``."""
        return [call for call in self.calls if re.search(pattern, call[1])]


def scripted(
    focal: Reply = QUESTIONS,
    insights: Reply = "Maria Lopez loves physics (because of 0, 1)",
    *,
    condense: Reply = "1. condensed [0]",
    triples: Reply = auto_triples,
    ratings: Reply = auto_ratings,
) -> ScriptedChatModel:
    return ScriptedChatModel(
        rules=[(FOCAL, focal), (INSIGHTS, insights), (CONDENSE, condense), (TRIPLES, triples),
               (RATINGS, ratings)]
    )


def fill(stream: MemoryStream, clock: Clock) -> MemoryStream:
    """Add MEMORIES a minute apart, then set the trigger due with 3 recent memories."""
    for i, (kind, text, poignancy) in enumerate(MEMORIES, 1):
        clock.now = T0 + timedelta(minutes=i)
        extra: dict[str, Any] = {}
        if kind == "thought":
            extra["evidence"] = ["node_2"]
        if kind == "chat":
            extra["filling"] = [["Maria Lopez", "Hi Klaus"], ["Klaus Mueller", "Hi Maria"]]
        stream.add_many([{"type": kind, "description": text, "poignancy": poignancy, **extra}])
    stream.update_settings(importance_trigger_curr=-1, importance_ele_n=3)
    clock.now = NOW
    return stream


def new_stream(clock: Clock, persona: str = PERSONA) -> MemoryStream:
    return MemoryStream(persona, embeddings=DeterministicFakeEmbedding(size=16), clock=clock)


def scripted_stream() -> MemoryStream:
    clock = Clock(T0)
    return fill(new_stream(clock), clock)
