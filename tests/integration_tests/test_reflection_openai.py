"""Reflection over real HTTP: ChatOpenAI against the scripted server, on Maria Lopez's memories.

The fixture is the original simulation's save of Maria Lopez (267 memories; scratch.json:
importance_trigger_curr 19, importance_ele_n 54), loaded with a small deterministic embedding.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_openai import ChatOpenAI

from langchain_genmem import MemoryStream, ReflectionSettings
from langchain_genmem.interop import load_associative_memory
from langchain_genmem.reflection import (
    areflect_on_conversation,
    create_reflection_graph,
)
from tests.support.openai_server import ScriptedOpenAI

MARIA = (
    Path(__file__).resolve().parents[2] / "data" / "generative_agents"
    / "July1_the_ville_isabella_maria_klaus-step-3-12" / "personas" / "Maria Lopez"
    / "bootstrap_memory" / "associative_memory"
)
SAVED_AT = datetime(2023, 2, 13, 15, 17, 40)  # scratch.json curr_time
# The original's text prompts, whose exact wording these tests check (the scripted server
# refuses JSON schemas, so "auto" would first try one and count it).
TEXT = ReflectionSettings(output="text")

QUESTIONS = (
    "How is Maria Lopez progressing with her physics studies?\n"
    "2) What is the relationship between Maria Lopez and Klaus Mueller?\n"
    "3) How does Maria Lopez balance streaming on Twitch with college?"
)


def insights(topic: str, cite_missing: bool = False) -> str:
    """Five insights for one question; the first also cites 45, which a 30-memory prompt lacks."""
    lines = [f"Maria Lopez {topic} in way {i} (because of {i}, {i + 3})" for i in range(5)]
    if cite_missing:
        lines[0] = f"Maria Lopez {topic} in way 0 (because of 0, 45)"
    return "\n".join(f"{i}. {line}" if i > 1 else line for i, line in enumerate(lines, 1))


def numbered(n: int, text: str) -> str:
    return "\n".join(f"{i}. {text.format(i=i)}" for i in range(1, n + 1))


RULES = [
    {"when": "most salient high-level questions", "reply": QUESTIONS},
    {"when": "high-level insights can you infer", "reply": insights("studies", True), "times": 1},
    {"when": "high-level insights can you infer", "reply": insights("sees Klaus"), "times": 1},
    {"when": "high-level insights can you infer", "reply": insights("streams")},
    {"when": "Turn each of the following",
     "reply": numbered(15, "(Maria Lopez, reflect on, topic {i})")},
    {"when": "poignancy of each of the following", "reply": numbered(15, "{i}")},
    {"when": "need to remember for her planning", "reply": 'needs to read Klaus\'s paper."'},
    {"when": "might have found interesting", "reply": 'is curious about quantum computing."'},
]


def chat(srv: ScriptedOpenAI) -> ChatOpenAI:
    return ChatOpenAI(model="scripted", api_key="test-key", base_url=srv.base_url, max_retries=0,
                      timeout=30)


@pytest.fixture
def maria() -> MemoryStream:
    return load_associative_memory(MARIA, persona="Maria Lopez", reembed=True, progress=False,
                                   embeddings=DeterministicFakeEmbedding(size=64))


def test_reflection_on_maria_over_http(scripted_openai, maria):
    srv = scripted_openai(RULES)
    graph = create_reflection_graph(chat(srv), maria, settings=TEXT)
    assert maria.state.importance_trigger_curr == 19 and maria.state.importance_ele_n == 54

    skipped = graph.invoke({})
    assert skipped["status"] == "not_due" and skipped["llm_calls"] == 0 == len(srv.requests())

    out = graph.invoke({"force": True})
    requests = srv.requests()
    assert out["status"] == "reflected"
    assert out["llm_calls"] == len(requests) == 6  # focal points, 3 x insights, triples, ratings
    assert out["original_llm_calls"] == 1 + 3 + 2 * 15 == 34
    assert len(out["memories"]) == 54
    assert [e["question"] for e in out["insights"]] == out["focal_points"]
    assert all(len(e["retrieved"]) == 30 for e in out["insights"])
    dropped = [d for d in out["dropped"] if d["reason"] == "evidence_out_of_range"]
    assert len(dropped) == 1 and dropped[0]["numbers"] == [45]

    assert out["written"] == [f"node_{n}" for n in range(268, 283)]
    retrieved = {e["question"]: set(e["retrieved"]) for e in out["insights"]}
    for node_id in out["written"]:
        node = maria.get(node_id)
        assert node.type == "thought" and node.evidence
        assert any(set(node.evidence) <= ids for ids in retrieved.values())
        assert node.depth == 1 + max(maria.get(i).depth for i in node.evidence)
        assert node.created == SAVED_AT and node.expiration == SAVED_AT + timedelta(days=30)
        assert node.subject == "Maria Lopez" and node.predicate == "reflect on"
    assert sorted(maria.get(i).poignancy for i in out["written"]) == sorted(range(1, 11)) + [10] * 5
    assert maria.state.importance_trigger_curr == 150 and maria.state.importance_ele_n == 0
    # the retrieved memories were marked accessed at the simulation's clock
    accessed = set().union(*retrieved.values())
    assert all(maria.get(i).last_accessed == SAVED_AT for i in accessed)


async def test_async_reflection_and_conversation_over_http(scripted_openai, maria):
    srv = scripted_openai(RULES)
    out = await create_reflection_graph(chat(srv), maria, force=True, settings=TEXT).ainvoke({})
    assert out["status"] == "reflected" and out["llm_calls"] == len(srv.requests()) == 6

    done = await areflect_on_conversation(chat(srv), maria, partner="Klaus Mueller",
                                          settings=TEXT)
    assert done.chat.node_id == "node_246"  # Maria's last chat with Klaus
    assert done.planning.description == (
        "For Maria Lopez's planning: Maria Lopez needs to read Klaus's paper."
    )
    assert done.memo.description == "Maria Lopez is curious about quantum computing."
    assert done.planning.evidence == done.memo.evidence == ["node_246"]
    assert done.llm_calls == len(srv.requests()) - 6 == 4 and done.original_llm_calls == 6


STRUCTURED_RULES = [
    {"when": r"\[schema Questions\]",
     "reply": '{"questions": ["How is Maria Lopez progressing with physics?", '
              '"玛丽亚和克劳斯是什么关系？"]}'},
    {"when": r"\[schema Insights\]", "times": 1,
     "reply": '{"insights": [{"insight": "Maria Lopez studies physics every day", '
              '"evidence": [0, 2, 2]}]}'},
    # a server that breaks its own schema (evidence 99 was never shown): an unreadable reply
    {"when": r"\[schema Insights\]",
     "reply": '{"insights": [{"insight": "玛丽亚喜欢克劳斯", "evidence": [99]}]}'},
    {"when": r"\[schema Triples\]",
     "reply": '{"triples": [{"subject": "Maria Lopez", "predicate": "study", '
              '"object": "physics"}]}'},
    {"when": r"\[schema Rating\]", "reply": '{\n  "rating": 8\n}'},
]


def test_structured_replies_over_http(maria, tmp_path):
    with ScriptedOpenAI(STRUCTURED_RULES, tmp_path=tmp_path, schemas="answer") as srv:
        graph = create_reflection_graph(chat(srv), maria, force=True)
        out = graph.invoke({}, {"max_concurrency": 1})  # the questions' calls in order
        requests = srv.requests(refused=True)
    assert out["status"] == "reflected" and out["llm_calls"] == len(requests) == 5
    formats = [r["body"]["response_format"]["json_schema"] for r in requests]
    assert [f["name"] for f in formats] == ["Questions", "Insights", "Insights", "Triples",
                                            "Rating"]
    assert formats[0]["schema"]["properties"]["questions"]["maxItems"] == 3
    evidence = formats[1]["schema"]["properties"]["insights"]["items"]["properties"]["evidence"]
    assert evidence["items"]["enum"] == list(range(30))  # only the statements shown
    assert evidence["maxItems"] == 10
    assert formats[3]["schema"]["properties"]["triples"]["maxItems"] == 1
    assert [r["body"]["max_completion_tokens"] for r in requests] == [300, 600, 600, 128, 64]
    assert all("Answer in JSON" in r["messages"][-1]["content"] for r in requests)

    [written] = out["written"]
    thought = maria.get(written)
    first = out["insights"][0]
    assert thought.description == "Maria Lopez studies physics every day"
    assert thought.evidence == [first["retrieved"][0], first["retrieved"][2]]
    assert thought.spo == ("Maria Lopez", "study", "physics") and thought.poignancy == 8
    unreadable = [d for d in out["dropped"] if d["reason"] == "unreadable_reply"]
    assert [d["question"] for d in unreadable] == ["玛丽亚和克劳斯是什么关系？"]
