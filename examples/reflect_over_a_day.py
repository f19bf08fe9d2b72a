"""A simulated day of events, then a reflection that writes cited insights as thoughts.

The stream runs on a simulation clock: each event is stamped with its time of day, and the
reflection happens "at night". Importance of each event is rated by the model, the trigger
counts down as in the original, and the reflection graph turns the day into thoughts that cite
the memories they rest on.

Needs a chat model: OpenAI, or a local OpenAI-compatible server (Ollama, llama.cpp's
llama-server, vLLM), which needs no key. Without one it says what to set, in one line.

    export OPENAI_API_KEY=sk-...                                       # OpenAI, or
    export OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL=qwen2.5  # Ollama, no key
    python examples/reflect_over_a_day.py [--path FOLDER]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import datetime

from langchain_genmem import (
    GenMemError,
    ImportanceScorer,
    MemoryStream,
    SimulationClock,
    create_reflection_graph,
)
from langchain_genmem.llm.chat import chat_model_from_env
from langchain_genmem.llm.importance import add_rated
from langchain_genmem.memory.stats import importance_gathered, trigger_text

PERSONA = "Isabella Rodriguez"
DAY = [
    # (time, description, subject, predicate, object)
    ("07:00", "Isabella Rodriguez is opening Hobbs Cafe", PERSONA, "open", "Hobbs Cafe"),
    ("08:30", "Maria Lopez ordered her usual latte at Hobbs Cafe", "Maria Lopez", "order",
     "latte"),
    ("10:00", "Isabella Rodriguez is planning a Valentine's Day party at Hobbs Cafe", PERSONA,
     "plan", "Valentine's Day party"),
    ("12:15", "Klaus Mueller said he would come to the Valentine's Day party", "Klaus Mueller",
     "accept", "party invitation"),
    ("15:00", "Isabella Rodriguez is decorating the cafe with red and pink flowers", PERSONA,
     "decorate", "cafe"),
    ("18:30", "Isabella Rodriguez is counting the day's earnings", PERSONA, "count",
     "earnings"),
    ("21:00", "Isabella Rodriguez is closing Hobbs Cafe", PERSONA, "close", "Hobbs Cafe"),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", default=None, help="store folder (default: a temporary one)")
    args = parser.parse_args()
    try:
        model = chat_model_from_env(temperature=0)
        with tempfile.TemporaryDirectory(prefix="genmem-day-") as temporary:
            live_a_day(model, args.path or temporary)  # the temporary store is removed at the end
    except GenMemError as e:  # no model, a server that is down, a store that refuses: one line
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def live_a_day(model, path: str) -> None:
    """Add the day's events one by one, then reflect at night."""
    clock = SimulationClock(datetime(2023, 2, 13, 6, 0))
    scorer = ImportanceScorer(model)
    with MemoryStream(PERSONA, path=path, clock=clock, importance=scorer) as stream:
        # the day: one event at a time, each rated by the model as it happens (a rating the
        # model does not give is the fallback importance, named by a warning)
        stream.update_settings(importance_trigger_max=20, importance_trigger_curr=20)
        for at, description, s, p, o in DAY:
            hour, minute = map(int, at.split(":"))
            clock.now = clock.now.replace(hour=hour, minute=minute)
            event = {"type": "event", "description": description, "subject": s,
                     "predicate": p, "object": o}
            [node] = add_rated(stream, scorer, [event])
            print(f"{at}  [{node.poignancy:>4.1f}] {description}")
        state = stream.state
        gathered = importance_gathered(state)
        due = state.reflection_due
        print(f"\ntrigger: {trigger_text(gathered, state.importance_trigger_max, due=due)}")

        clock.advance(hours=2)  # 23:00: the persona reflects on the day
        out = create_reflection_graph(model, stream, importance=scorer).invoke({})
        print(f"reflection: {out['status']}, {out['llm_calls']} model calls "
              f"(the original would make {out['original_llm_calls']})")
        for question in out["focal_points"]:
            print(f"  question: {question}")
        if not out["written"]:
            for reason in out["reasons"]:  # why nothing was written
                print(f"  reason: {reason}")
        for node_id in out["written"]:
            thought = stream.get(node_id)
            print(f"\n{node_id} (depth {thought.depth}, poignancy {thought.poignancy:g}): "
                  f"{thought.description}")
            for evidence in thought.evidence:
                print(f"    because: {stream.get(evidence).description}")
        print(f"\ntrigger reset to {stream.state.importance_trigger_curr:g}")


if __name__ == "__main__":
    raise SystemExit(main())
