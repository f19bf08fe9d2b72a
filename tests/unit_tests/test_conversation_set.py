"""The labelled conversational set is well formed: every label points at a turn said in time."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

FOLDER = Path(__file__).resolve().parents[2] / "benchmarks" / "quality" / "conversations"
LANGUAGES = ("en", "zh")
KINDS = {"fact", "context", "multi-session", "temporal"}


def read(name: str) -> list[dict]:
    text = (FOLDER / name).read_text("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="module", params=LANGUAGES)
def part(request: pytest.FixtureRequest) -> tuple[str, dict[str, dict], list[dict]]:
    turns = read(f"{request.param}.turns.jsonl")
    by_id = {t["id"]: t for t in turns}
    assert len(by_id) == len(turns), "turn ids repeat"
    return request.param, by_id, read(f"{request.param}.questions.jsonl")


def test_turns_are_in_time_order_within_each_conversation(part) -> None:
    _, turns, _ = part
    last: dict[str, datetime] = {}
    for turn in turns.values():
        created = datetime.fromisoformat(turn["created"])
        assert turn["text"].strip() and turn["speaker"].strip(), turn["id"]
        assert created >= last.get(turn["conversation"], created), turn["id"]
        last[turn["conversation"]] = created


def test_every_answer_is_a_turn_of_its_conversation_said_before_the_question(part) -> None:
    _, turns, questions = part
    assert len({q["id"] for q in questions}) == len(questions)
    for q in questions:
        assert q["kind"] in KINDS and q["answers"], q["id"]
        asked = datetime.fromisoformat(q["asked_at"])
        for answer in q["answers"]:
            turn = turns[answer]
            assert turn["conversation"] == q["conversation"], q["id"]
            assert datetime.fromisoformat(turn["created"]) < asked, q["id"]


def test_temporal_answers_fall_inside_their_window(part) -> None:
    _, turns, questions = part
    for q in questions:
        assert ("window" in q) == (q["kind"] == "temporal"), q["id"]
        if "window" not in q:
            continue
        start, end = (datetime.fromisoformat(w) for w in q["window"])
        assert start < end and start < datetime.fromisoformat(q["asked_at"]), q["id"]
        for answer in q["answers"]:
            assert start <= datetime.fromisoformat(turns[answer]["created"]) < end, q["id"]


def test_the_set_is_large_and_mixed_in_both_languages(part) -> None:
    language, turns, questions = part
    assert len(turns) >= 1500 and len(questions) >= 150
    assert set(Counter(q["kind"] for q in questions)) == KINDS
    if language == "zh":
        assert sum("\u4e00" <= ch <= "\u9fff" for t in turns.values() for ch in t["text"]) > 10000
        assert any(q.get("cross") and q["language"] == "en" for q in questions)
