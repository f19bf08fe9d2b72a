"""Thoughts after a conversation: exact prompts, the two thoughts, bad replies, async."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_genmem import MemoryStream, ValidationError
from langchain_genmem.core.timeutil import SimulationClock as Clock
from langchain_genmem.llm.prompts import (
    DEFAULT_BATCH_IMPORTANCE_PROMPT,
    DEFAULT_BATCH_TRIPLE_PROMPT,
    DEFAULT_MEMO_PROMPT,
    DEFAULT_PLANNING_THOUGHT_PROMPT,
)
from langchain_genmem.reflection import (
    areflect_on_conversation,
    reflect_on_conversation,
)
from langchain_genmem.reflection.conversation import sentence
from tests.support.reflection_script import (
    NOW,
    PERSONA,
    RATINGS,
    T0,
    TRIPLES,
    ScriptedChatModel,
    auto_ratings,
    auto_triples,
)

PLANNING = "need to remember for her planning"
MEMO = "might have found interesting"
UTTERANCES = [["Klaus Mueller", "Lunch at Hobbs Cafe tomorrow?"], ["Maria Lopez", "Yes, at noon!"]]
CONVERSATION = "Klaus Mueller: Lunch at Hobbs Cafe tomorrow?\nMaria Lopez: Yes, at noon!\n"


def model_for(planning="needs to meet Klaus at noon.\"", memo="is glad Klaus invited her.\"",
              triples=auto_triples, ratings=auto_ratings) -> ScriptedChatModel:
    return ScriptedChatModel(rules=[(PLANNING, planning), (MEMO, memo), (TRIPLES, triples),
                                    (RATINGS, ratings)])


@pytest.fixture
def stream() -> MemoryStream:
    clock = Clock(T0)
    stream = MemoryStream(PERSONA, embeddings=DeterministicFakeEmbedding(size=16), clock=clock)
    stream.add_chat("conversing about an old lunch", poignancy=3, subject=PERSONA,
                    object="Klaus Mueller", filling=[["Klaus Mueller", "Hi"]])
    clock.now = T0 + timedelta(minutes=5)
    stream.add_chat("conversing about lunch tomorrow", poignancy=4, subject=PERSONA,
                    object="Klaus Mueller", filling=UTTERANCES)
    stream.add_chat("conversing about a party", poignancy=4, subject=PERSONA,
                    object="Isabella Rodriguez", filling=[["Isabella Rodriguez", "Party!"]])
    clock.now = NOW
    return stream


def test_writes_the_planning_thought_and_the_memo_exactly(stream):
    model = model_for()
    done = reflect_on_conversation(model, stream, partner="Klaus Mueller")
    fields = {"conversation": CONVERSATION, "persona": PERSONA}
    assert sorted(model.calls[:2]) == sorted([
        ("", DEFAULT_PLANNING_THOUGHT_PROMPT.format(**fields)),
        ("", DEFAULT_MEMO_PROMPT.format(**fields)),
    ])
    assert model.calls[0][1].startswith("[Conversation]\n" + CONVERSATION + "\n")
    planning = f"For {PERSONA}'s planning: {PERSONA} needs to meet Klaus at noon."
    memo = f"{PERSONA} is glad Klaus invited her."
    statements = f"1. {planning}\n2. {memo}\n"
    triples = DEFAULT_BATCH_TRIPLE_PROMPT.format(n=2, statements=statements)
    assert model.sent(TRIPLES) == [("", triples)]
    marked = f"1. [thought] {planning}\n2. [thought] {memo}\n"
    assert model.sent(RATINGS)[0][1] == DEFAULT_BATCH_IMPORTANCE_PROMPT.format(
        persona=PERSONA, persona_description="", n=2, memories=marked)
    assert (done.planning.description, done.memo.description) == (planning, memo)
    assert done.chat.node_id == "node_2"
    for number, node in enumerate((done.planning, done.memo), 1):
        assert node.type == "thought" and node.filling == ["node_2"] and node.depth == 1
        assert node.created == NOW and node.expiration == NOW + timedelta(days=30)
        assert node.keywords == [PERSONA, "think about", f"topic {number}"]
        assert node.poignancy == 6
    assert done.written == ["node_4", "node_5"]
    assert done.llm_calls == 4 == len(model.calls)
    assert done.original_llm_calls == 6
    assert done.dropped == []


def test_a_given_conversation_text_and_prompts_are_used(stream):
    model = model_for()
    prompts = {"planning": (
        "{persona}, {partner} need to remember for her planning:\n{conversation}"
    )}
    reflect_on_conversation(model, stream, partner="Klaus Mueller", conversation="A: b\n",
                            prompts=prompts)
    assert (("", f"{PERSONA}, Klaus Mueller need to remember for her planning:\nA: b\n")
            in model.calls)


@pytest.mark.parametrize(("reply", "expected"), [
    ("needs to meet Klaus at noon.\"", "Maria Lopez needs to meet Klaus at noon."),
    ("\"Maria Lopez needs to buy milk.\"\n\nExplanation: ...", "Maria Lopez needs to buy milk."),
    ("  “maria lopez likes Klaus.”  ", "maria lopez likes Klaus."),
    ("", None),
    ("\"\"", None),
    ("...", None),
])
def test_a_reply_completes_the_sentence_about_the_persona(reply, expected):
    assert sentence(PERSONA, reply) == expected


def test_an_empty_memo_writes_the_planning_thought_only(stream):
    model = model_for(memo="  \n")
    done = reflect_on_conversation(model, stream, partner="Klaus Mueller")
    assert done.memo is None and done.planning is not None
    assert done.dropped == [{"stage": "memo", "reason": "unreadable_reply", "text": ""}]
    assert model.sent(TRIPLES)[0][1].count("\n1. ") == 1
    assert done.llm_calls == 4 and done.original_llm_calls == 4


def test_two_empty_replies_write_nothing_and_make_no_more_calls(stream):
    model = model_for(planning="", memo="\"")
    done = reflect_on_conversation(model, stream, partner="Klaus Mueller")
    assert done.written == [] and len(stream) == 3
    assert [d["stage"] for d in done.dropped] == ["planning", "memo"]
    assert done.llm_calls == 2 == len(model.calls) and done.original_llm_calls == 2


def test_an_unreadable_triple_falls_back(stream):
    done = reflect_on_conversation(model_for(triples="no idea"), stream, partner="Klaus Mueller")
    assert done.planning.spo == (PERSONA, "reflect", "conversation with Klaus Mueller")
    assert [d["reason"] for d in done.dropped] == ["triple_fallback", "triple_fallback"]
    assert [d["stage"] for d in done.dropped] == ["conversation", "conversation"]


def test_no_chat_with_the_partner_is_a_clear_error_before_any_call(stream):
    model = model_for()
    with pytest.raises(ValidationError, match=re.escape("no chat with 'Klaus Müller'")):
        reflect_on_conversation(model, stream, partner="Klaus Müller")
    with pytest.raises(ValidationError, match="partner"):
        reflect_on_conversation(model, stream, partner=" ")
    with pytest.raises(ValidationError, match="conversation: empty"):
        reflect_on_conversation(model, stream, partner="Klaus Mueller", conversation="\n")
    with pytest.raises(ValidationError, match="unknown names"):
        reflect_on_conversation(model, stream, partner="Klaus Mueller", prompts={"insights": "x"})
    assert model.calls == []


async def test_async_matches_sync(stream):
    model = model_for()
    done = await areflect_on_conversation(model, stream, partner="Isabella Rodriguez")
    assert done.chat.node_id == "node_3"
    assert model.calls[0][1].startswith("[Conversation]\nIsabella Rodriguez: Party!\n\n")
    assert done.planning.filling == done.memo.filling == ["node_3"]
    assert done.llm_calls == 4 and done.original_llm_calls == 6
