"""A recall that splits its question with a chat model: the exact prompt, the fusion, the bounds.

Lexical relevance ranks here (BM25 is exact and the same on every CPU), so each test knows
which memory each query finds first.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import pytest
from langchain_core.language_models import FakeListChatModel
from langchain_core.messages import BaseMessage

from langchain_genmem import GenerativeAgentsRetriever, MemoryStream, SimulationClock
from langchain_genmem.backends.base import ranking_of
from langchain_genmem.core.errors import ValidationError
from langchain_genmem.llm.prompts import DEFAULT_SUB_QUESTIONS_PROMPT
from langchain_genmem.llm.sub_questions import (
    SubQuestionRetriever,
    fuse_rankings,
    read_sub_questions,
    sub_questions_call,
)
from tests.support.fixtures import Store

T0 = datetime(2024, 3, 1, 9, 0)
# The question names 年糕 and the vet; the costs and the second visit's reason are said
# in turns that share no word with it.
TURNS = [
    "年糕又吐了，今天带年糕去宠物医院看看",          # node_1: the question's own words
    "年糕在宠物医院打了针，年糕没事了",              # node_2: the question's own words
    "医生说是毛球，开了化毛膏",                      # node_3: the first visit's reason
    "那一趟花了三百多块钱",                          # node_4: its cost
    "年糕下周绝育，手术费八百",                      # node_5: the second visit, and its cost
    "周末去爬山了，山上很冷",                        # node_6: unrelated
]
QUESTION = "年糕去过几次宠物医院？"


class Recording(FakeListChatModel):
    """A fake chat model that keeps every prompt it was sent."""

    prompts: list[str] = []

    def _call(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> str:
        self.prompts.append("\n".join(str(m.content) for m in messages))
        return super()._call(messages, *args, **kwargs)


def model(*replies: str) -> Recording:
    return Recording(responses=list(replies), prompts=[])


def stream_on(store: Store) -> MemoryStream:
    stream = store.open("陈静", clock=SimulationClock(T0 + timedelta(days=10)))
    stream.add_many([{"type": "event", "description": text, "poignancy": 3,
                      "created": T0 + timedelta(days=i)} for i, text in enumerate(TURNS)])
    return stream


def lexical(stream: MemoryStream, **kwargs: Any) -> GenerativeAgentsRetriever:
    return GenerativeAgentsRetriever(stream=stream, relevance="lexical", recency_w=0.0,
                                     importance_w=0.0, update_access=False, **kwargs)


def ids(docs: list) -> list[str]:
    return [d.metadata["node_id"] for d in docs]


def test_the_prompt_names_the_question_and_the_bound():
    call = sub_questions_call(QUESTION, 3)
    assert call.kind == "questions"
    assert call.messages[0].content == DEFAULT_SUB_QUESTIONS_PROMPT.format(question=QUESTION, n=3)
    assert call.messages[0].content == (
        "Question: 年糕去过几次宠物医院？\n\n"
        "The answer may be spread over several moments of a long conversation. Write at most 3 "
        "short search queries, each one self-contained and asking for one part of the answer. "
        "Keep every name as it is and write in the language of the question.\n1)")
    assert call.structured is not None
    assert call.structured[0].content.endswith('Answer in JSON as {"questions": [...]}, at most 3 '
                                               "queries.")
    assert call.shape is not None
    assert call.shape.schema["properties"]["questions"]["maxItems"] == 3


@pytest.mark.parametrize(("reply", "expected"), [
    ("1) 年糕为什么去医院\n2) 花了多少钱\n3) 绝育", ["年糕为什么去医院", "花了多少钱", "绝育"]),
    ("Sure! Here are the queries:\n- 花了多少钱\n- 花了多少钱\n- 年糕去过几次宠物医院？",
     ["花了多少钱"]),
    ("1) a? 2) b? 3) c? 4) d?", ["a?", "b?", "c?"]),
    ("<think>hmm</think>", []),
    ("", []),
])
def test_replies_are_read_leniently_and_bounded(reply, expected):
    assert read_sub_questions(reply, QUESTION, 3) == expected


def test_fusion_weighs_each_ranking_and_keeps_first_appearance_on_ties():
    assert fuse_rankings([["a", "b", "c"], ["b"]], [1.0, 1.0]) == ["b", "a", "c"]
    assert fuse_rankings([["a", "b"], ["b", "a"]], [1.0, 1.0]) == ["a", "b"]
    assert fuse_rankings([["a", "b"], ["b"]], [1.0, 0.0]) == ["a", "b"]
    assert fuse_rankings([["a", "b", "c"], ["c"]], [0.5, 1.0]) == ["c", "a", "b"]
    assert fuse_rankings([], []) == []
    with pytest.raises(ValueError):
        fuse_rankings([["a"]], [1.0, 1.0])


def test_the_parts_of_the_answer_come_up_and_the_question_keeps_its_own_hits(store):
    stream = stream_on(store)
    base = lexical(stream, k=3)
    assert ids(base.invoke(QUESTION)) == ["node_2", "node_1", "node_5"]
    reply = "1) 年糕为什么去医院，医生怎么说\n2) 花了多少钱"
    chat = model(reply, reply)
    recall = SubQuestionRetriever(retriever=base, llm=chat, pool=6)
    docs = recall.invoke(QUESTION)
    assert chat.prompts == [DEFAULT_SUB_QUESTIONS_PROMPT.format(question=QUESTION, n=3)]
    # 医生 and 说 find node_3 first: the first visit's reason enters the top 3 (the
    # question's own ranking holds it 4th, below the second visit)
    assert ids(docs) == ["node_1", "node_2", "node_3"]
    assert ids(SubQuestionRetriever(retriever=lexical(stream, k=6), llm=chat, pool=6)
               .invoke(QUESTION))[3:5] == ["node_5", "node_4"]  # 花 finds node_4: above node_6
    assert [d.metadata["rank"] for d in docs] == [0, 1, 2]
    assert docs[0].metadata["sub_questions"] == ["年糕为什么去医院，医生怎么说", "花了多少钱"]
    assert docs[0].page_content == TURNS[0]


def test_an_unreadable_reply_leaves_the_questions_ranking(store):
    stream = stream_on(store)
    base = lexical(stream, k=4)
    recall = SubQuestionRetriever(retriever=base, llm=model("……"), pool=6)
    docs = recall.invoke(QUESTION)
    assert ids(docs) == ids(base.invoke(QUESTION))
    assert docs[0].metadata["sub_questions"] == []


def test_queries_never_bring_in_what_the_filters_left_out(store):
    stream = stream_on(store)
    recall = SubQuestionRetriever(retriever=lexical(stream, k=6), llm=model("1) 花了多少钱"),
                                  pool=6)
    docs = recall.invoke(QUESTION, created_before=T0 + timedelta(days=3))
    assert set(ids(docs)) <= {"node_1", "node_2", "node_3"}
    assert "node_4" not in ids(docs)


def test_access_is_recorded_for_the_memories_returned_only(store):
    stream = stream_on(store)
    before = {n.node_id: n.last_accessed for n in stream.nodes()}
    base = GenerativeAgentsRetriever(stream=stream, relevance="lexical", recency_w=0.0,
                                     importance_w=0.0, k=2)
    docs = SubQuestionRetriever(retriever=base, llm=model("1) 花了多少钱"), pool=6).invoke(QUESTION)
    touched = {n.node_id for n in stream.nodes() if n.last_accessed != before[n.node_id]}
    assert touched == set(ids(docs))
    assert len(touched) == 2


def test_async_ranks_as_sync(store):
    stream = stream_on(store)
    reply = "1) 医生怎么说\n2) 绝育手术"
    sync = SubQuestionRetriever(retriever=lexical(stream, k=4), llm=model(reply), pool=6)
    asynchronous = SubQuestionRetriever(retriever=lexical(stream, k=4), llm=model(reply), pool=6)
    assert ids(asyncio.run(asynchronous.ainvoke(QUESTION))) == ids(sync.invoke(QUESTION))


def test_ranking_in_the_database_is_split_the_same_way(store):
    stream = stream_on(store)
    if ranking_of(stream.backend) is None:
        pytest.skip("this backend ranks in process only")
    chat = model("1) 花了多少钱")
    for score_in in ("process", "database"):
        base = GenerativeAgentsRetriever(stream=stream, score_in=score_in, update_access=False,
                                         k=3)
        recall = SubQuestionRetriever(retriever=base, llm=chat.model_copy(), pool=6)
        docs = recall.invoke(QUESTION)
        assert len(docs) == 3
        assert docs[0].metadata["sub_questions"] == ["花了多少钱"]


@pytest.mark.parametrize(("given", "field"), [
    ({"max_sub_questions": 0}, "max_sub_questions"), ({"pool": 0}, "pool"),
    ({"question_weight": float("nan")}, "question_weight"), ({"output": "xml"}, "output"),
    ({"poool": 5}, "poool"),
])
def test_bad_settings_name_the_field(given, field):
    stream = MemoryStream("Ada")
    with pytest.raises(ValidationError, match=field):
        SubQuestionRetriever(retriever=GenerativeAgentsRetriever(stream=stream), llm=model(),
                             **given)
