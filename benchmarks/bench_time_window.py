"""How well the time in a question is read: find_time_window against the labelled windows.

The labelled conversations (``benchmarks/quality/conversations/{en,zh}.questions.jsonl``)
give each temporal question the window it names (``window: [start, end)``) and the clock it
is asked at (``asked_at``). For each language, half and reader this prints how many windows
are read exactly, overlap the labelled one, are missed (none read, or one that does not
overlap), and how many windows are read on the other questions (which are not labelled
temporal; some do name a time: "王磊三月份爬香山..." names March), with the parse time per
question.

The split is the conversational benchmark's: questions ordered by set (``en``, ``zh``,
``zh cross``: an English question on Chinese memories), kind, conversation and id, going
alternately to train and held-out, the alternation carrying on from one (set, kind) to the
next. Rules and month parts are tuned on train only.

Readers: ``find_time_window`` (the library's), and ``dateparser.search`` alone (its first
date found, as the period dateparser reads in that phrase), the baseline that shows why
the library finds phrases with its own patterns.

Usage:
    python benchmarks/bench_time_window.py [--list]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from langchain_genmem.retrieval import time_window
from langchain_genmem.retrieval.time_window import TimeWindow, find_time_window

HERE = Path(__file__).parent / "quality" / "conversations"
SETS = ("en", "zh", "zh cross")
KINDS = ("fact", "context", "multi-session", "temporal")
Reader = Callable[[str, datetime], TimeWindow | None]


def question_set(q: dict[str, Any]) -> str:
    """``en``, ``zh`` or ``zh cross`` (a question in another language than its memories)."""
    memories = q["conversation"].split("-")[0]
    return memories if q["language"] == memories else f"{memories} cross"


def split(questions: list[dict[str, Any]]) -> dict[str, str]:
    """``{question id: "train" | "held-out"}``, the conversational benchmark's split."""
    ordered = sorted(questions, key=lambda q: (SETS.index(question_set(q)),
                                               KINDS.index(q["kind"]), q["conversation"], q["id"]))
    return {q["id"]: ("train", "held-out")[i % 2] for i, q in enumerate(ordered)}


def dateparser_search(question: str, now: datetime) -> TimeWindow | None:
    """The baseline: dateparser.search's first date phrase, read as the period it names."""
    from dateparser.search import search_dates

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = search_dates(question, languages=["en", "zh"],
                             settings={"RELATIVE_BASE": now, "PREFER_DATES_FROM": "past",
                                       "RETURN_TIME_AS_PERIOD": True})
    if not found:
        return None
    phrase = found[0][0]
    window = time_window._parse(phrase, now)  # the period of the phrase found
    return None if window is None else TimeWindow(*window, phrase)


def outcome(q: dict[str, Any], got: TimeWindow | None) -> str:
    """exact / overlap / missed / wrong (no overlap) on temporal; false / none on others."""
    if "window" not in q:
        return "none" if got is None else "false"
    if got is None:
        return "missed"
    start, end = (datetime.fromisoformat(t) for t in q["window"])
    if (got.start, got.end) == (start, end):
        return "exact"
    return "overlap" if got.start < end and start < got.end else "wrong"


def main() -> None:
    """Print the table (and, with --list, every question whose reading is not exact)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="list the readings that differ")
    args = parser.parse_args()
    questions = [json.loads(line) for lang in ("en", "zh")
                 for line in (HERE / f"{lang}.questions.jsonl").read_text("utf-8").splitlines()
                 if line.strip()]
    half = split(questions)
    readers: dict[str, Reader] = {"find_time_window": find_time_window,
                                  "dateparser.search": dateparser_search}
    find_time_window("warm-up: yesterday", datetime(2024, 1, 1))  # import and locales loaded
    dateparser_search("warm-up: yesterday", datetime(2024, 1, 1))
    print("| reader | half | language | temporal | exact | overlap | wrong | missed | "
          "others | false windows | ms per question (mean / max) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    listed = []
    for name, read in readers.items():
        results = []
        for q in questions:
            now = datetime.fromisoformat(q["asked_at"])
            began = time.perf_counter()
            got = read(q["question"], now)
            ms = 1000 * (time.perf_counter() - began)
            results.append((q, got, outcome(q, got), ms))
            if name == "find_time_window" and results[-1][2] not in ("exact", "none"):
                listed.append((half[q["id"]], q["id"], results[-1][2], q.get("window"),
                               got and got.text(), q["question"]))
        for h in ("train", "held-out"):
            for lang in ("en", "zh"):
                rows = [r for r in results if half[r[0]["id"]] == h and r[0]["language"] == lang]
                count = {o: sum(1 for r in rows if r[2] == o)
                         for o in ("exact", "overlap", "wrong", "missed", "false", "none")}
                temporal = sum(1 for r in rows if "window" in r[0])
                ms = [r[3] for r in rows]
                print(f"| {name} | {h} | {lang} | {temporal} | {count['exact']} | "
                      f"{count['overlap']} | {count['wrong']} | {count['missed']} | "
                      f"{count['false'] + count['none']} | {count['false']} | "
                      f"{sum(ms) / len(ms):.2f} / {max(ms):.1f} |")
    if args.list:
        print()
        for row in sorted(listed):
            print(" | ".join(str(x) for x in row))


if __name__ == "__main__":
    main()
