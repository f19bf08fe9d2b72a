"""Reflection step by step, as in a notebook: initialise, add memories, retrieve, insights, reflect.

The notebook-style flow of a Python design built around ``MemoryStream``,
``generate_insight`` and ``condense_insights``, on this package: memories rated by the model, a
retrieval filtered with ``relevance > 0.5`` shown as a DataFrame, ``generate_insight`` (the
questions and, per question, insights citing the memories' numbers), then
``generate_reflection`` writing them as thoughts (reflections) whose pointers are node ids.
Importance is shown on that design's 0.1-1.0 scale (``importance_scale="unit"``).

Needs no chat model: without one a scripted stand-in answers, offline. With OpenAI or a
local OpenAI-compatible server (Ollama, llama.cpp's llama-server, vLLM) set, that model
answers:

    python examples/reflection_step_by_step.py             # offline: a scripted stand-in model
    export OPENAI_API_KEY=sk-...                                       # OpenAI, or
    export OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL=qwen2.5  # Ollama, no key
    python examples/reflection_step_by_step.py             # the same flow with that model

Needs pandas (``pip install 'langchain-genmem[pandas]'``). Memories use the bundled offline
embedding model.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from datetime import datetime, timedelta
from typing import Any

import pandas as pd
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from langchain_genmem import (
    GenerativeAgentsRetriever,
    GenMemError,
    ImportanceScorer,
    MemoryStream,
    SimulationClock,
)
from langchain_genmem.core.nodes import node_number
from langchain_genmem.dataframe import get_memory_df, retrieve_memories
from langchain_genmem.llm.chat import chat_model_configured, chat_model_from_env
from langchain_genmem.llm.importance import add_rated
from langchain_genmem.reflection import generate_insight, generate_reflection

PERSONA = "Data Analyst"
MEMORY_LIST = [
    "The user_dims table has a large number of missing values for country",
    "Some user IDs in the wallet_event_logs table have no matching row in user_dims",
    "The user_dims table has duplicate rows for the same user_id",
    "The bitcoin_price_data table is missing many daily prices in 2021",
    "The bitcoin_price_data table has extreme outliers on a few days",
    "The marketing team segments users by the country column of user_dims",
    "user_dims 表中 signup_date 字段的格式不一致",
    "The analyst had a coffee before the morning stand-up",
    "The wallet_event_logs table has duplicated transaction events",
    "The daily bitcoin price chart is used for trend analysis",
]
QUERY = "missing values in the user_dims table"


# --- an offline stand-in for a chat model ---------------------------------------------------------

QUESTIONS = (
    "1) How does the large number of missing values for country in the user_dims table "
    "impact data analysis?\n"
    "2) How can the missing data for some user IDs in the wallet_event_logs table affect "
    "user behavior analysis?\n"
    "3) What impact does the large number of outliers in bitcoin price data have on trend "
    "analysis?"
)
# (a word in a statement, the insight a stand-in model draws from the statements with it)
TOPICS = [
    ("user_dims", "The user_dims table has data quality issues that affect user segmentation"),
    ("wallet_event_logs", "Missing and duplicated rows in wallet_event_logs affect user "
                          "behavior analysis"),
    ("bitcoin", "Bitcoin price data has missing values and outliers that affect trend analysis"),
]
TABLE = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b")


def numbered(prompt: str) -> list[tuple[int, str]]:
    """The "N. text" lines of a prompt."""
    return [(int(m[1]), m[2]) for m in re.finditer(r"^(\d+)\. (.+)$", prompt, re.M)]


def scripted_reply(prompt: str) -> str:
    """What the stand-in model answers: it reads its prompt, as a model would, by rules."""
    if "most salient high-level questions" in prompt:
        return QUESTIONS
    if "high-level insights" in prompt:
        cited = [(text, [n for n, line in numbered(prompt) if word in line])
                 for word, text in TOPICS]
        return "\n".join(f"{i}. {text} [{', '.join(map(str, numbers))}]"
                         for i, (text, numbers) in enumerate(
                             [c for c in cited if c[1]], 1))
    if "Please condense" in prompt:
        return "\n".join(f"{n}. {text}" for n, text in numbered(prompt)[:5])
    if "(subject, predicate, object)" in prompt:
        return "\n".join(
            f"{n}. ({(TABLE.findall(text) or [PERSONA])[0]}, affect, data analysis)"
            for n, text in numbered(prompt.split("Statements:")[1])
        )
    if "rate the likely poignancy of each" in prompt:
        memories = numbered(prompt.split("Memories:")[1])
        return "\n".join(f"{n}. {rate(text)}" for n, text in memories)
    return str(rate(prompt))


def rate(text: str) -> int:
    """A stand-in rating: data problems matter, coffee does not."""
    if "coffee" in text:
        return 1
    return 8 if re.search(r"missing|duplicat|outlier|不一致|issues", text) else 5


class ScriptedModel(BaseChatModel):
    """An offline chat model answering with :func:`scripted_reply` (for the walkthrough)."""

    @property
    def _llm_type(self) -> str:
        return "scripted-walkthrough"

    def _generate(self, messages: list[BaseMessage], stop: Any = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        reply = scripted_reply(str(messages[-1].content))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(reply))])


# --- the flow -------------------------------------------------------------------------------------


def quoted(text: str) -> str:
    """A text in double quotes, as that design prints its examples."""
    return json.dumps(text, ensure_ascii=False)


def show(title: str, df: pd.DataFrame) -> None:
    print(f"\n# {title}")
    print(df.to_string(index=False, float_format=lambda x: f"{x:.2f}"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", default=None, help="store folder (default: a temporary one)")
    args = parser.parse_args()
    pd.set_option("display.max_colwidth", 60)
    pd.set_option("display.width", 200)
    try:
        if chat_model_configured():
            model = chat_model_from_env(temperature=0)
        else:
            print("(offline: a scripted stand-in model answers; set OPENAI_API_KEY, or "
                  "OPENAI_BASE_URL for a local server, for a real one)")
            model = ScriptedModel()
        if args.path:
            return walk(model, args.path)
        with tempfile.TemporaryDirectory(prefix="genmem-reflection-") as temporary:
            return walk(model, temporary)
    except GenMemError as e:  # a server that is down, a store that refuses: one line
        print(f"error: {e}", file=sys.stderr)
        return 2


def walk(model: BaseChatModel, path: str) -> int:
    """The step-by-step reflection flow on a store in ``path``."""
    # 1. initialise the memory stream (alpha_* = 1, decay_factor = 0.99, context_window_size = 5)
    start = datetime(2024, 5, 6, 9, 0)
    clock = SimulationClock(start)
    scorer = ImportanceScorer(model)
    with MemoryStream(PERSONA, path=path, clock=clock, importance=scorer) as stream:
        stream.update_settings(recency_w=1, relevance_w=1, importance_w=1, recency_decay=0.99)
        retriever = GenerativeAgentsRetriever(stream=stream, k=5)

        # 2. add memories (one every 15 minutes), importance rated by the model in one call; a
        #    memory it gives no rating for gets the fallback importance (a warning names it)
        add_rated(stream, scorer, [
            {"type": "event", "description": d, "created": start + timedelta(minutes=15 * i)}
            for i, d in enumerate(MEMORY_LIST)
        ])
        clock.now = start + timedelta(hours=3)
        memory_df = get_memory_df(stream, importance_scale="unit")
        show("memory_stream.get_memory_df()",
             memory_df[["node_id", "description", "poignancy", "type"]]
             .rename(columns={"poignancy": "importance"}))

        # 3. retrieve memories with a filter statement
        retrieved = retrieve_memories(retriever, QUERY, filter="relevance > 0.5",
                                      importance_scale="unit")
        retrieved = retrieved.assign(pointer=[node_number(i) for i in retrieved["node_id"]])
        show(f"memory_stream.retrieve_memories({QUERY!r}, 'relevance > 0.5')",
             retrieved[["description", "poignancy", "recency", "relevance", "pointer", "score"]]
             .rename(columns={"poignancy": "importance"}))

        # 4. generate insights: the last 15 memories, importance threshold 3 (0.1-1.0 scale)
        found = generate_insight(stream, model, context_window=15, threshold=3, k=5)
        if found is None:
            print("\ngenerate_insight: the importance of the last 15 memories is below 3")
            return 0
        questions_fmt, insights_list = found
        print("\n# (questions_fmt, insights_list) = generate_insight(memory_stream, "
              "context_window=15, threshold=3)")
        print("questions_fmt = [")
        for question in questions_fmt:
            print(f"    {quoted(question)},")
        print("]\ninsights_list = [")
        for number, insights in enumerate(insights_list, 1):
            print(f"    # insights of question {number}\n    [")
            for text, pointers in insights:
                print(f"        ({quoted(text)}, {pointers}),")
            print("    ],")
        print("]")

        # 5. reflect: the insights become thoughts whose pointers are the evidence memories
        thoughts = generate_reflection(stream, insights_list, questions=questions_fmt)
        print("\n# reflections = generate_reflection(memory_stream, insights_list)")
        for thought in thoughts:
            pointers = [node_number(i) for i in thought.evidence]
            print(f"{thought.node_id} (reflection, depth {thought.depth}, importance "
                  f"{thought.poignancy / 10:.1f}, pointers {pointers}): {thought.description}")
            for evidence in thought.evidence:
                print(f"    because: {stream.get(evidence).description}")
        print(f"\n{len(stream)} memories, {len(thoughts)} of them reflections")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
