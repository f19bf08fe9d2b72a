"""Tests of langchain_genmem.llm.importance: exact prompts, batching, call counts, bad replies."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import (
    FakeListChatModel,
    GenericFakeChatModel,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from langchain_genmem.core.errors import ParseError, ValidationError
from langchain_genmem.llm.importance import ImportanceScorer, reply_text

SYSTEM = (
    "You are an AI who rates events in terms of their perceived importance on a scale of 1 to 10."
)
BATCH_LINE = re.compile(r"^(\d+)\. \[(event|thought|chat)\] (.*)$", re.M)
ALONE = re.compile(r"(?:Event|Thought): (.*)\nRate|Conversation:\n(.*)\n\nRate", re.S)


class RecordingChatModel(BaseChatModel):
    """Answers each call with ``answer(human text)`` and records the messages it got."""

    answer: Callable[[str], str]
    received: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "recording"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **_: Any
    ) -> ChatResult:
        self.received.append(list(messages))
        reply = AIMessage(content=self.answer(str(messages[-1].content)))
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def human_texts(self) -> list[str]:
        return [str(messages[-1].content) for messages in self.received]


def batched(prompt: str) -> list[tuple[int, str, str]]:
    """The (number, type, description) lines of a batched prompt; [] for a lone prompt."""
    return [(int(n), kind, text) for n, kind, text in BATCH_LINE.findall(prompt)]


def alone(prompt: str) -> str:
    match = ALONE.search(prompt)
    assert match is not None, prompt
    return match[1] or match[2]


def rater(
    ratings: dict[str, str], *, batch_reply: Callable[[str], str] | None = None
) -> Callable[[str], str]:
    """Answer batched prompts "N. rating" from ``ratings`` (or ``batch_reply``), lone ones too."""

    def answer(prompt: str) -> str:
        lines = batched(prompt)
        if not lines:
            return ratings[alone(prompt)]
        if batch_reply is not None:
            return batch_reply(prompt)
        return "\n".join(f"{n}. {ratings[text]}" for n, _, text in lines)

    return answer


# --- exact prompts ----------------------------------------------------------------------


def test_one_event_sends_the_original_prompt_exactly() -> None:
    model = RecordingChatModel(answer=lambda _: "Rating: 3")
    scorer = ImportanceScorer(model, persona_description="Maria Lopez is a physics student.")
    assert scorer.score("Maria Lopez", "event", "Maria Lopez is eating breakfast") == 3.0
    assert model.received == [
        [
            SystemMessage(SYSTEM),
            HumanMessage(
                "Here is a brief description of Maria Lopez.\n"
                "Maria Lopez is a physics student.\n"
                "\n"
                "On the scale of 1 to 10, where 1 is purely mundane (e.g., brushing teeth, "
                "making bed) and 10 is extremely poignant (e.g., a break up, college "
                "acceptance), rate the likely poignancy of the following event for Maria "
                "Lopez.\n"
                "\n"
                "Event: Maria Lopez is eating breakfast\n"
                "Rate (return a number between 1 to 10):"
            ),
        ]
    ]
    assert scorer.calls == 1


def test_one_chat_and_one_thought_use_their_own_prompts() -> None:
    model = RecordingChatModel(answer=lambda _: "6")
    scorer = ImportanceScorer(model, batch_size=1)
    scores = scorer.score_many(
        "玛丽亚", [("chat", "玛丽亚：我拿到奖学金了！"), ("thought", "我想成为教授")]
    )
    assert scores == [6.0, 6.0]
    assert sorted(model.human_texts()) == sorted(
        [
            "Here is a brief description of 玛丽亚.\n\n\nOn the scale of 1 to 10, where 1 is "
            "purely mundane (e.g., routine morning greetings) and 10 is extremely poignant "
            "(e.g., a conversation about breaking up, a fight), rate the likely poignancy of "
            "the following conversation for 玛丽亚.\n\nConversation:\n玛丽亚：我拿到奖学金了！"
            "\n\nRate (return a number between 1 to 10):",
            "Here is a brief description of 玛丽亚.\n\n\nOn the scale of 1 to 10, where 1 is "
            "purely mundane (e.g., I need to do the dishes, I need to walk the dog) and 10 is "
            "extremely poignant (e.g., I wish to become a professor, I love Elie), rate the "
            "likely poignancy of the following thought for 玛丽亚.\n\nThought: 我想成为教授\n"
            "Rate (return a number between 1 to 10):",
        ]
    )
    assert scorer.calls == 2


def test_a_batch_sends_one_numbered_prompt_exactly() -> None:
    model = RecordingChatModel(answer=lambda _: "1. 2\n2. 9\n3. 5")
    scorer = ImportanceScorer(model, persona_description="玛丽亚是一名物理系学生。")
    items = [
        ("event", "玛丽亚在吃早餐"),
        ("chat", "克劳斯：你愿意和我约会吗？\n玛丽亚：愿意！"),
        ("thought", "I should finish my paper"),
    ]
    assert scorer.score_many("玛丽亚", items) == [2.0, 9.0, 5.0]
    assert model.received == [
        [
            SystemMessage(SYSTEM),
            HumanMessage(
                "Here is a brief description of 玛丽亚.\n"
                "玛丽亚是一名物理系学生。\n"
                "\n"
                "On the scale of 1 to 10, where 1 is purely mundane (e.g., brushing teeth, "
                "making bed, routine morning greetings, I need to do the dishes) and 10 is "
                "extremely poignant (e.g., a break up, college acceptance, a conversation about "
                "breaking up, a fight, I wish to become a professor), rate the likely poignancy "
                "of each of the following 3 memories for 玛丽亚. Each memory is marked as an "
                "event, a thought or a chat (a conversation).\n"
                "\n"
                "Memories:\n"
                "1. [event] 玛丽亚在吃早餐\n"
                "2. [chat] 克劳斯：你愿意和我约会吗？ 玛丽亚：愿意！\n"
                "3. [thought] I should finish my paper\n"
                "\n"
                'Rate each memory on its own line as "N. rating", where N is the number of the '
                "memory and rating is a number between 1 to 10. Write nothing else."
            ),
        ]
    ]
    assert scorer.calls == 1


def test_custom_prompts_system_prompt_and_description() -> None:
    model = RecordingChatModel(answer=rater({"a": "4", "b": "7", "c": "8"}))
    scorer = ImportanceScorer(
        model,
        prompts={"event": "E|{persona}|{persona_description}|Event: {description}\nRate"},
        batch_prompt="B|{persona}|{persona_description}|{n}\n{memories}",
        persona_description="desc",
        system_prompt="sys",
    )
    assert scorer.score("P", "event", "a") == 4.0
    assert scorer.score_many("P", [("event", "b"), ("chat", "c")]) == [7.0, 8.0]
    assert [[m.content for m in messages] for messages in model.received] == [
        ["sys", "E|P|desc|Event: a\nRate"],
        ["sys", "B|P|desc|2\n1. [event] b\n2. [chat] c\n"],
    ]
    # The types not overridden keep the default prompt.
    assert scorer.prompts["chat"].startswith("Here is a brief description of {persona}.")


# --- batching and call counts ---------------------------------------------------------


def test_45_items_with_batch_size_20_make_3_calls() -> None:
    items = [("event" if i % 3 else "chat", f"记忆 number {i}") for i in range(45)]
    ratings = {text: str(i % 10 + 1) for i, (_, text) in enumerate(items)}
    model = RecordingChatModel(answer=rater(ratings))
    scorer = ImportanceScorer(model, batch_size=20)
    scores = scorer.score_many("Maria", items)
    assert scores == [float(i % 10 + 1) for i in range(45)]
    assert scorer.calls == 3
    assert sorted(len(batched(text)) for text in model.human_texts()) == [5, 20, 20]
    sent = sorted(text for prompt in model.human_texts() for _, _, text in batched(prompt))
    assert sent == sorted(ratings)


def test_a_batch_of_one_uses_the_per_type_prompt() -> None:
    items = [("event", f"e{i}") for i in range(21)]
    model = RecordingChatModel(answer=rater({f"e{i}": "5" for i in range(21)}))
    scorer = ImportanceScorer(model, batch_size=20)
    assert scorer.score_many("Maria", items) == [5.0] * 21
    assert scorer.calls == 2
    lone = [text for text in model.human_texts() if not batched(text)]
    assert len(lone) == 1
    assert lone[0].endswith("Event: e20\nRate (return a number between 1 to 10):")


def test_idle_events_score_1_without_a_call() -> None:
    model = RecordingChatModel(answer=lambda _: pytest.fail("no call expected"))
    scorer = ImportanceScorer(model)
    items = [
        ("event", "Maria Lopez is idle"),
        ("event", "bed is idle"),
        ("event", "玛丽亚 is idle"),
    ]
    scores = scorer.score_many("Maria Lopez", items)
    assert scores == [1.0, 1.0, 1.0]
    assert all(isinstance(score, float) for score in scores)
    assert scorer.calls == 0
    assert model.received == []
    assert scorer.score("Maria Lopez", "event", "Maria Lopez is idle") == 1.0


def test_idle_events_are_left_out_of_the_batch() -> None:
    model = RecordingChatModel(answer=rater({"a": "3", "b": "8", "Klaus is idle": "2"}))
    scorer = ImportanceScorer(model)
    items = [
        ("event", "a"),
        ("event", "Maria is idle"),
        ("event", "b"),
        ("thought", "Klaus is idle"),
    ]
    assert scorer.score_many("Maria", items) == [3.0, 1.0, 8.0, 2.0]
    assert scorer.calls == 1
    assert batched(model.human_texts()[0]) == [
        (1, "event", "a"),
        (2, "event", "b"),
        (3, "thought", "Klaus is idle"),  # only events are idle
    ]


def test_one_unreadable_line_costs_one_extra_call() -> None:
    model = RecordingChatModel(
        answer=rater({"b": "Rating: 6"}, batch_reply=lambda _: "1. 7\n2. 不确定\n3. 5")
    )
    scorer = ImportanceScorer(model, persona_description="Maria studies physics.")
    items = [("event", "a"), ("thought", "b"), ("chat", "c")]
    assert scorer.score_many("Maria", items) == [7.0, 6.0, 5.0]
    assert scorer.calls == 2
    assert model.human_texts()[1] == (
        "Here is a brief description of Maria.\nMaria studies physics.\n\n"
        "On the scale of 1 to 10, where 1 is purely mundane (e.g., I need to do the dishes, "
        "I need to walk the dog) and 10 is extremely poignant (e.g., I wish to become a "
        "professor, I love Elie), rate the likely poignancy of the following thought for "
        "Maria.\n\nThought: b\nRate (return a number between 1 to 10):"
    )
    assert model.received[1][0] == SystemMessage(SYSTEM)


@pytest.mark.parametrize(
    ("batch_reply", "expected", "calls"),
    [
        ("", [6.0, 6.0, 6.0], 4),  # empty: each item asked again alone
        ("Sorry, I can't rate these memories.", [6.0, 6.0, 6.0], 4),  # prose only
        ("Here are the ratings:\n7\n3\n5", [7.0, 3.0, 5.0], 1),
        ("0. 7\n1. 3\n2. 5", [7.0, 3.0, 5.0], 1),  # numbered from 0
        ("1. 7\n2. 3\n5. 9", [7.0, 3.0, 6.0], 2),  # wrong numbering: item 3 asked again
        ("1. 7\n1. 2\n2. 3\n3. 4", [7.0, 3.0, 4.0], 1),  # duplicates: the first wins
        ("1. 0\n2. 15\n3. 7.5", [1.0, 10.0, 8.0], 1),  # out of range: clamped; half up
        ("1. 7/10\n2. 40%\n3. 4 out of 5", [7.0, 4.0, 8.0], 1),  # denominators honoured
        ("1：7\n2：3\n3：4", [7.0, 3.0, 4.0], 1),  # Chinese colons
        ("第1条：7。\n第2条：3。\n第3条：4。", [7.0, 3.0, 4.0], 1),
        ("[7, 3, 5]", [7.0, 3.0, 5.0], 1),
        ("```\n1. 2\n2. 2\n```", [2.0, 2.0, 6.0], 2),
    ],
)
def test_malformed_batched_replies(batch_reply: str, expected: list[float], calls: int) -> None:
    items = [("event", "a"), ("event", "b"), ("event", "c")]
    answer = rater(dict.fromkeys("abc", "6"), batch_reply=lambda _: batch_reply)
    model = RecordingChatModel(answer=answer)
    scorer = ImportanceScorer(model)
    assert scorer.score_many("Maria", items) == expected
    assert scorer.calls == calls
    assert len(model.received) == calls


@pytest.mark.parametrize("reply", ["", "I would rather not say.", "这件事无法评分。"])
def test_a_lone_item_without_a_number_raises(reply: str) -> None:
    model = RecordingChatModel(answer=lambda _: reply)
    scorer = ImportanceScorer(model)
    with pytest.raises(ParseError) as caught:
        scorer.score("Maria", "chat", "玛丽亚：你好")
    assert caught.value.reply == reply
    assert "items[0]" in str(caught.value)
    assert "'玛丽亚：你好'" in str(caught.value)
    assert scorer.calls == 1


def test_a_retry_without_a_number_raises() -> None:
    model = RecordingChatModel(answer=rater({"b": "no idea"}, batch_reply=lambda _: "1. 4"))
    scorer = ImportanceScorer(model)
    with pytest.raises(ParseError, match=r"items\[1\]: the model gave no rating"):
        scorer.score_many("Maria", [("event", "a"), ("event", "b")])
    assert scorer.calls == 2


def test_calls_add_up_across_runs_and_empty_input_calls_nothing() -> None:
    model = RecordingChatModel(answer=rater({"a": "2", "b": "3"}))
    scorer = ImportanceScorer(model, batch_size=2)
    assert scorer.score_many("Maria", []) == []
    assert scorer.calls == 0
    scorer.score_many("Maria", [("event", "a"), ("event", "b")])
    scorer.score("Maria", "event", "a")
    assert scorer.calls == 2


def test_replies_are_read_in_request_order_with_max_concurrency_1() -> None:
    model = FakeListChatModel(responses=["1. 4\n2. 5", "1. 6\n2. 7", "Rating: 8"])
    scorer = ImportanceScorer(model, batch_size=2)
    items = [("event", "a"), ("event", "b"), ("chat", "c"), ("chat", "d"), ("thought", "e")]
    scores = scorer.score_many("Maria", items, config={"max_concurrency": 1})
    assert scores == [4.0, 5.0, 6.0, 7.0, 8.0]
    assert scorer.calls == 3


def test_content_blocks_are_read() -> None:
    reply = AIMessage(content=[{"type": "text", "text": "评分："}, {"type": "text", "text": "8"}])
    model = GenericFakeChatModel(messages=iter([reply]))
    assert ImportanceScorer(model).score("Maria", "event", "a") == 8.0
    assert reply_text(reply) == "评分：8"
    assert reply_text(AIMessage(content=["7", {"type": "image_url", "image_url": {}}])) == "7"


# --- validation -----------------------------------------------------------------------


@pytest.mark.parametrize("batch_size", [0, -1, True, 1.5])
def test_bad_batch_size(batch_size: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        ImportanceScorer(FakeListChatModel(responses=["1"]), batch_size=batch_size)
    assert caught.value.field == "batch_size"


def test_unknown_prompt_type() -> None:
    with pytest.raises(ValidationError, match="dream") as caught:
        ImportanceScorer(FakeListChatModel(responses=["1"]), prompts={"dream": "{description}"})
    assert caught.value.field == "prompts"


@pytest.mark.parametrize("item", [("memory", "x"), ("event",), ("event", 3), "event: x"])
def test_bad_items_are_refused_before_any_call(item: Any) -> None:
    model = RecordingChatModel(answer=lambda _: "5")
    scorer = ImportanceScorer(model)
    with pytest.raises(ValidationError, match=r"items\[1\]") as caught:
        scorer.score_many("Maria", [("event", "ok"), item])
    assert caught.value.field == "items"
    assert scorer.calls == 0
    assert model.received == []


# --- async ------------------------------------------------------------------------------


async def test_async_sends_the_same_messages_as_sync() -> None:
    items = [("event", f"事件 {i}") for i in range(25)] + [("event", "Maria is idle")]
    ratings = {text: str(i % 9 + 1) for i, (_, text) in enumerate(items)}
    sync_model = RecordingChatModel(answer=rater(ratings))
    async_model = RecordingChatModel(answer=rater(ratings))
    sync_scorer = ImportanceScorer(sync_model, batch_size=20)
    async_scorer = ImportanceScorer(async_model, batch_size=20)
    expected = [float(i % 9 + 1) for i in range(25)] + [1.0]
    assert sync_scorer.score_many("Maria", items) == expected
    assert await async_scorer.ascore_many("Maria", items) == expected
    assert async_scorer.calls == sync_scorer.calls == 2
    assert sorted(map(str, async_model.received)) == sorted(map(str, sync_model.received))


async def test_async_45_items_and_retries() -> None:
    items = [("chat", f"c{i}") for i in range(45)]
    ratings = {f"c{i}": "4" for i in range(45)}

    def batch_reply(prompt: str) -> str:  # the last line of every batch is unreadable
        lines = batched(prompt)
        return "\n".join(f"{n}. {'4' if n < len(lines) else '?'}" for n, _, _ in lines)

    model = RecordingChatModel(answer=rater(ratings, batch_reply=batch_reply))
    scorer = ImportanceScorer(model, batch_size=20)
    assert await scorer.ascore_many("Maria", items) == [4.0] * 45
    assert scorer.calls == 3 + 3


async def test_async_score_and_errors() -> None:
    model = RecordingChatModel(answer=lambda _: "重要性：9")
    scorer = ImportanceScorer(model)
    assert await scorer.ascore("玛丽亚", "thought", "我爱物理") == 9.0
    assert await scorer.ascore("玛丽亚", "event", "玛丽亚 is idle") == 1.0
    assert scorer.calls == 1
    silent = ImportanceScorer(RecordingChatModel(answer=lambda _: "…"))
    with pytest.raises(ParseError):
        await silent.ascore("玛丽亚", "event", "玛丽亚在跑步")
    with pytest.raises(ValidationError):
        await silent.ascore_many("玛丽亚", [("dream", "x")])
