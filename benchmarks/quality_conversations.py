"""The labelled conversational set, loaded one memory per turn and split into train and held-out.

``benchmarks/quality/conversations/`` holds ten long chats (five English, five Chinese) and
questions labelled by the turns that answer them (its README says how). Each conversation is one
agent's memory: a stream per conversation, one memory per turn in time order, the turn's text as
the description and its time as ``created``.

How turns are written is an *ingest configuration*: a dict with ``stream`` (keyword arguments of
:class:`~langchain_genmem.MemoryStream`) and ``item_fields`` (turn fields copied onto every item
given to ``add_many``, e.g. ``conversation`` and ``speaker``). A configuration this version of
the library refuses is reported as unsupported, so planned ones can wait in :data:`INGESTS`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from quality_personas import QUALITY

from langchain_genmem import MemoryStream, SimulationClock
from langchain_genmem.core.errors import GenMemError
from langchain_genmem.evaluation.metrics import Example, split_stratified
from langchain_genmem.memory.inputs import validate_items

FOLDER = QUALITY / "conversations"
LANGUAGES = ("en", "zh")
KINDS = ("fact", "context", "multi-session", "temporal")
# Question sets: questions in the memories' language, and English questions on Chinese memories.
SETS = ("en", "zh", "zh cross")
TURN_FIELDS = ("conversation", "session", "id", "speaker", "created", "text")
INGEST_KEYS = frozenset({"stream", "item_fields"})
# Every turn gets the same importance: no model scores them offline, so importance never
# ranks one turn above another (the library-default row still weighs recency).
POIGNANCY = 5.0
BATCH = 64
# Ingest configurations. The second needs add_many items with conversation and speaker and a
# MemoryStream that embeds each turn with the turns before it; it is skipped until then.
INGESTS: dict[str, dict[str, Any]] = {
    "turn alone": {},
    "turn + 2 previous": {"item_fields": ["conversation", "speaker"],
                          "stream": {"context_turns": 2}},
}
# --smoke: a few questions, chosen so that every question set and every kind has questions in
# both halves of the split (two multi-session ones among them), and only the turns of the
# stretches of sessions their answers were said in (one session of en-03, three of zh-01), each
# from the two turns before its first answer (an answer's context) to its last answer.
SMOKE_QUESTIONS = ("en-03-q018", "en-03-q019", "zh-01-q006", "zh-01-q007", "zh-01-q011",
                   "zh-01-q020", "zh-01-q021", "zh-01-q023", "zh-01-q024")
SMOKE_TURNS_BEFORE = 2

def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The objects of a JSON Lines file, blank lines skipped."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def load_turns() -> dict[str, list[dict[str, Any]]]:
    """Every turn, by conversation, in time order: ``{conversation: [turn, ...]}``."""
    out: dict[str, list[dict[str, Any]]] = {}
    for language in LANGUAGES:
        for turn in read_jsonl(FOLDER / f"{language}.turns.jsonl"):
            out.setdefault(turn["conversation"], []).append(turn)
    for turns in out.values():
        turns.sort(key=lambda t: datetime.fromisoformat(t["created"]))  # stable: file order
    return out

def load_questions() -> list[dict[str, Any]]:
    """Every question of both languages, in file order."""
    return [q for language in LANGUAGES
            for q in read_jsonl(FOLDER / f"{language}.questions.jsonl")]


def question_set(example: Example) -> str:
    """``en``, ``zh`` or ``zh cross`` (a question in another language than its conversation)."""
    memories = (example.persona or "").split("-")[0]
    return memories if example.language == memories else f"{memories} cross"


def check_ingest(name: str, config: Any) -> dict[str, Any]:
    """An ingest configuration's shape, or SystemExit naming what is wrong."""
    if not isinstance(config, dict) or set(config) - INGEST_KEYS:
        raise SystemExit(f"ingest {name!r}: expected a JSON object with keys among "
                         f"{sorted(INGEST_KEYS)}, got {config!r}")
    fields = config.get("item_fields", [])
    if not isinstance(fields, list) or any(f not in TURN_FIELDS for f in fields):
        raise SystemExit(f"ingest {name!r}: item_fields: expected turn fields among "
                         f"{list(TURN_FIELDS)}, got {fields!r}")
    if not isinstance(config.get("stream", {}), dict):
        raise SystemExit(f"ingest {name!r}: stream: expected MemoryStream keyword arguments")
    return config


def item(turn: dict[str, Any], fields: Sequence[str]) -> dict[str, Any]:
    """The ``add_many`` item for one turn: an event said by its speaker, at its time."""
    return {"type": "event", "description": turn["text"], "subject": turn["speaker"],
            "predicate": "say", "created": datetime.fromisoformat(turn["created"]),
            "poignancy": POIGNANCY, **{f: turn[f] for f in fields}}


def unsupported(config: dict[str, Any], embeddings: Embeddings, turn: dict[str, Any]) -> str | None:
    """Why this version of the library cannot ingest with ``config`` (None: it can).

    Args:
        config: the ingest configuration.
        embeddings: the embedding model.
        turn: any turn, to validate one item.

    Returns:
        The library's refusal, or None.
    """
    try:
        validate_items([item(turn, config.get("item_fields", []))])
        MemoryStream("probe", embeddings=embeddings, **config.get("stream", {})).close()
    except (TypeError, GenMemError) as e:
        return f"{type(e).__name__}: {e}"
    return None


def ingest(
    turns: dict[str, list[dict[str, Any]]],
    config: dict[str, Any],
    embeddings: Embeddings,
    folder: Path,
) -> tuple[dict[str, MemoryStream], dict[str, str], float]:
    """One stream per conversation, one memory per turn, written through ``add_many`` in batches.

    Each stream's clock is a :class:`~langchain_genmem.SimulationClock` (the questions set it).

    Args:
        turns: ``{conversation: turns in time order}``.
        config: the ingest configuration.
        embeddings: the embedding model.
        folder: an empty folder for the stores.

    Returns:
        ``(streams by conversation, node id by turn id, seconds spent writing)``.
    """
    fields = config.get("item_fields", [])
    streams: dict[str, MemoryStream] = {}
    node_of: dict[str, str] = {}
    seconds = 0.0
    for conversation, said in turns.items():
        clock = SimulationClock(datetime.fromisoformat(said[-1]["created"]))
        stream = MemoryStream(conversation, embeddings=embeddings, clock=clock,
                              path=str(folder / conversation), **config.get("stream", {}))
        streams[conversation] = stream
        for start in range(0, len(said), BATCH):
            batch = said[start:start + BATCH]
            began = time.perf_counter()
            nodes = stream.add_many([item(t, fields) for t in batch])
            seconds += time.perf_counter() - began
            node_of.update((t["id"], n.node_id) for t, n in zip(batch, nodes, strict=True))
    return streams, node_of, seconds


def examples(questions: Sequence[dict[str, Any]], node_of: dict[str, str]) -> list[Example]:
    """The questions as labelled examples on the streams' node ids (persona = conversation)."""
    return [Example(q["question"], [node_of[a] for a in q["answers"]],
                    at=datetime.fromisoformat(q["asked_at"]), id=q["id"],
                    persona=q["conversation"], language=q["language"], group=q["kind"])
            for q in questions]


def stratum(example: Example) -> tuple[str, str | None]:
    """What both halves of the split share: the question set and the kind."""
    return question_set(example), example.group


def split(items: Sequence[Example]) -> tuple[list[Example], list[Example]]:
    """Train and held-out halves, stratified by question set and kind.

    Within each (set, kind) the questions, ordered by conversation and id, alternate between
    the halves, the alternation carrying on across strata
    (:func:`~langchain_genmem.evaluation.metrics.split_stratified`). So every set, kind and
    conversation is in both halves, and the split never changes.
    """
    ordered = sorted(items, key=lambda e: (*_rank(e), e.persona or "", e.id or ""))
    return split_stratified(ordered, stratum)


def _rank(example: Example) -> tuple[int, int]:
    group, kind = stratum(example)
    return SETS.index(group), KINDS.index(kind or "")


def smoke_questions(questions: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The questions of :data:`SMOKE_QUESTIONS`, in the order given."""
    return [q for q in questions if q["id"] in SMOKE_QUESTIONS]


def answered_stretches(
    turns: dict[str, list[dict[str, Any]]], questions: Sequence[dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """Only the stretches of sessions (of ``{conversation: turns}``) the questions' answers
    were said in: in each such session, from :data:`SMOKE_TURNS_BEFORE` turns before its first
    answer to its last one; a session holding no answer is left out."""
    answers = {a for q in questions for a in q["answers"]}
    out: dict[str, list[dict[str, Any]]] = {}
    for conversation, said in turns.items():
        for session in dict.fromkeys(t["session"] for t in said):
            turns_of = [t for t in said if t["session"] == session]
            hits = [i for i, t in enumerate(turns_of) if t["id"] in answers]
            if hits:
                first = max(hits[0] - SMOKE_TURNS_BEFORE, 0)
                out.setdefault(conversation, []).extend(turns_of[first:hits[-1] + 1])
    return out


def best(
    names: Sequence[str], score: Callable[[str], float]
) -> tuple[str, float]:
    """The name of the highest score; on a tie the first named (list the baseline first)."""
    chosen = max(names, key=lambda n: (score(n), -names.index(n)))
    return chosen, score(chosen)
