"""A question split over real HTTP: ChatOpenAI against the scripted server, both reply forms.

A server that refuses JSON schemas gets the text prompt after one refusal; one that takes them
gets the structured prompt with the ``Questions`` schema (at most ``max_sub_questions``), and
the reply is read back the same way. Lexical relevance ranks, so the order is exact on every
CPU.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from langchain_openai import ChatOpenAI

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream, SimulationClock
from langchain_genmem.llm.prompts import (
    DEFAULT_SUB_QUESTIONS_PROMPT,
    STRUCTURED_SUB_QUESTIONS_PROMPT,
)
from langchain_genmem.llm.sub_questions import SubQuestionRetriever
from tests.support.openai_server import ScriptedOpenAI

T0 = datetime(2024, 1, 2, 9, 0)
TURNS = ["Maya ran the Halden half marathon", "Maya's half marathon time was 1:52",
         "Jonah's band played the Old Duke", "The physio said Maya's shin was only sore",
         "Maya cramped in her calf on the New Year's Day 10k"]
QUESTION = "Which races did Maya run?"
RULES = [
    {"when": r"\[schema Questions\]", "reply": '{"questions": ["Maya 10k New Year", '
                                               '"Maya calf cramp race"]}'},
    {"when": "search queries", "reply": "1) Maya 10k New Year\n2) Maya calf cramp race"},
]


def stream_at(folder: Path) -> MemoryStream:
    stream = MemoryStream("Jonah", path=str(folder), clock=SimulationClock(T0 + timedelta(7)))
    stream.add_many([{"type": "event", "description": text, "poignancy": 3,
                      "created": T0 + timedelta(days=i)} for i, text in enumerate(TURNS)])
    return stream


def recall_over(srv: ScriptedOpenAI, stream: MemoryStream) -> SubQuestionRetriever:
    model = ChatOpenAI(model="scripted", api_key="test-key", base_url=srv.base_url,
                       max_retries=0)
    base = GenerativeAgentsRetriever(stream=stream, k=2, relevance="lexical", recency_w=0.0,
                                     importance_w=0.0, update_access=False)
    return SubQuestionRetriever(retriever=base, llm=model, max_sub_questions=2, pool=5)


@pytest.mark.parametrize("schemas", ["refuse", "answer"])
def test_the_split_goes_over_http_in_the_form_the_server_takes(tmp_path, schemas):
    stream = stream_at(tmp_path / "store")
    asked = dict(question=QUESTION, n=2)
    with ScriptedOpenAI(RULES, tmp_path=tmp_path / "srv", schemas=schemas) as srv:
        recall = recall_over(srv, stream)
        alone = [d.page_content for d in recall.retriever.invoke(QUESTION)]
        docs = recall.invoke(QUESTION)
        again = asyncio.run(recall.ainvoke(QUESTION))
        requests = srv.requests()
    assert alone == [TURNS[0], TURNS[3]]  # "Maya" alone: the physio's turn comes second
    assert [d.page_content for d in docs] == [TURNS[0], TURNS[4]]
    assert [d.page_content for d in again] == [TURNS[0], TURNS[4]]
    assert docs[0].metadata["sub_questions"] == ["Maya 10k New Year", "Maya calf cramp race"]
    assert len(requests) == 2
    if schemas == "refuse":
        assert [r["messages"][-1]["content"] for r in requests] == [
            DEFAULT_SUB_QUESTIONS_PROMPT.format(**asked)] * 2
    else:
        assert [r["messages"][-1]["content"] for r in requests] == [
            STRUCTURED_SUB_QUESTIONS_PROMPT.format(**asked)] * 2
        schema = requests[0]["body"]["response_format"]["json_schema"]
        assert schema["name"] == "Questions"
        assert schema["schema"]["properties"]["questions"]["maxItems"] == 2
    assert {r["body"]["max_completion_tokens"] for r in requests} == {300}
