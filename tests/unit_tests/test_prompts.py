"""Tests of langchain_genmem.llm.prompts: fields, exact wording, non-English use."""

from __future__ import annotations

import string
from types import MappingProxyType

import pytest

from langchain_genmem.llm import prompts
from langchain_genmem.llm.parsers import (
    format_numbered,
    parse_focal_points,
    parse_insights,
    parse_ratings,
    parse_triples,
)

FIELDS = {
    "DEFAULT_EVENT_IMPORTANCE_PROMPT": {"persona", "persona_description", "description"},
    "DEFAULT_THOUGHT_IMPORTANCE_PROMPT": {"persona", "persona_description", "description"},
    "DEFAULT_CHAT_IMPORTANCE_PROMPT": {"persona", "persona_description", "description"},
    "DEFAULT_BATCH_IMPORTANCE_PROMPT": {"persona", "persona_description", "n", "memories"},
    "DEFAULT_FOCAL_POINTS_PROMPT": {"statements", "n"},
    "DEFAULT_SUB_QUESTIONS_PROMPT": {"question", "n"},
    "DEFAULT_INSIGHTS_PROMPT": {"statements", "n"},
    "DEFAULT_CONDENSE_PROMPT": {"insights"},
    "DEFAULT_BATCH_TRIPLE_PROMPT": {"statements", "n"},
    "DEFAULT_PLANNING_THOUGHT_PROMPT": {"conversation", "persona"},
    "DEFAULT_MEMO_PROMPT": {"conversation", "persona"},
    "DEFAULT_IMPORTANCE_SYSTEM_PROMPT": set(),
    "DEFAULT_QUESTIONS_SYSTEM_PROMPT": set(),
    "DEFAULT_INSIGHTS_SYSTEM_PROMPT": set(),
    "DEFAULT_CONDENSE_SYSTEM_PROMPT": {"n"},
}

CHINESE = {
    "persona": "玛丽亚·洛佩兹",
    "persona_description": "玛丽亚是奥克山学院的物理系学生，喜欢直播玩游戏。",
    "description": "玛丽亚在图书馆复习功课",
    "n": 3,
    "memories": format_numbered(["[event] 玛丽亚在吃早餐", "[chat] 克劳斯：早上好！"], start=1),
    "statements": format_numbered(["玛丽亚在学习物理", "克劳斯在写论文", "伊莎贝拉在准备派对"]),
    "insights": "1. 玛丽亚很努力【0，1】\n2. 伊莎贝拉喜欢社交 [2]",
    "conversation": "克劳斯：你周末有空吗？\n玛丽亚：有，我们去图书馆吧。",
    "question": "玛丽亚这学期都在忙些什么？",
}


def fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


def constants() -> dict[str, str]:
    return {
        name: value
        for name, value in vars(prompts).items()
        if name.startswith("DEFAULT_") and isinstance(value, str)
    }


def test_every_prompt_has_its_documented_fields() -> None:
    assert {name: fields(value) for name, value in constants().items()} == FIELDS


def test_every_prompt_is_exported_and_documented() -> None:
    doc = prompts.__doc__ or ""
    for name in [*constants(), "DEFAULT_IMPORTANCE_PROMPTS"]:
        assert name in prompts.__all__, name
        assert name in doc, name
    for field in set().union(*FIELDS.values()):
        assert "{" + field + "}" in doc, field


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_prompts_format_with_chinese_names_and_memories(name: str) -> None:
    template = getattr(prompts, name)
    text = template.format(**CHINESE)
    for field in FIELDS[name]:
        assert str(CHINESE[field]) in text
    assert "{" not in text
    assert all(line == line.rstrip() for line in text.split("\n")), "trailing spaces"


def test_importance_prompts_mapping() -> None:
    assert isinstance(prompts.DEFAULT_IMPORTANCE_PROMPTS, MappingProxyType)
    assert dict(prompts.DEFAULT_IMPORTANCE_PROMPTS) == {
        "event": prompts.DEFAULT_EVENT_IMPORTANCE_PROMPT,
        "thought": prompts.DEFAULT_THOUGHT_IMPORTANCE_PROMPT,
        "chat": prompts.DEFAULT_CHAT_IMPORTANCE_PROMPT,
    }
    with pytest.raises(TypeError):
        prompts.DEFAULT_IMPORTANCE_PROMPTS["event"] = "x"  # type: ignore[index]


@pytest.mark.parametrize(
    ("name", "values", "expected"),
    [
        (
            "DEFAULT_EVENT_IMPORTANCE_PROMPT",
            {"persona": "Maria Lopez", "persona_description": "Maria is a student.",
             "description": "X"},
            "Here is a brief description of Maria Lopez.\nMaria is a student.\n\n"
            "On the scale of 1 to 10, where 1 is purely mundane (e.g., brushing teeth, making "
            "bed) and 10 is extremely poignant (e.g., a break up, college acceptance), rate the "
            "likely poignancy of the following event for Maria Lopez.\n\n"
            "Event: X\nRate (return a number between 1 to 10):",
        ),
        (
            "DEFAULT_CHAT_IMPORTANCE_PROMPT",
            {"persona": "Klaus", "persona_description": "", "description": "K: hi\nM: hello"},
            "Here is a brief description of Klaus.\n\n\n"
            "On the scale of 1 to 10, where 1 is purely mundane (e.g., routine morning "
            "greetings) and 10 is extremely poignant (e.g., a conversation about breaking up, a "
            "fight), rate the likely poignancy of the following conversation for Klaus.\n\n"
            "Conversation:\nK: hi\nM: hello\n\nRate (return a number between 1 to 10):",
        ),
        (
            "DEFAULT_FOCAL_POINTS_PROMPT",
            {"statements": "a\nb\n", "n": 3},
            "a\nb\n\n\nGiven only the information above, what are 3 most salient high-level "
            "questions we can answer about the subjects grounded in the statements?\n1)",
        ),
        (
            "DEFAULT_INSIGHTS_PROMPT",
            {"statements": format_numbered(["a", "b"]), "n": 5},
            "Input:\n0. a\n1. b\n\n\nWhat 5 high-level insights can you infer from the above "
            "statements? (example format: insight (because of 1, 5, 3))\n1.",
        ),
        (
            "DEFAULT_PLANNING_THOUGHT_PROMPT",
            {"conversation": "C", "persona": "Maria"},
            "[Conversation]\nC\n\nWrite down if there is anything from the conversation that "
            "Maria need to remember for her planning, from Maria's perspective, in a full "
            'sentence.\n\n"Maria',
        ),
        (
            "DEFAULT_MEMO_PROMPT",
            {"conversation": "C", "persona": "Maria"},
            "[Conversation]\nC\n\nWrite down if there is anything from the conversation that "
            "Maria might have found interesting from Maria's perspective, in a full sentence."
            '\n\n"Maria',
        ),
    ],
)
def test_prompts_of_the_original_word_for_word(
    name: str, values: dict[str, object], expected: str
) -> None:
    assert getattr(prompts, name).format(**values) == expected


def test_seed_004_system_prompts() -> None:
    assert prompts.DEFAULT_IMPORTANCE_SYSTEM_PROMPT == (
        "You are an AI who rates events in terms of their perceived importance on a scale of "
        "1 to 10."
    )
    assert prompts.DEFAULT_CONDENSE_SYSTEM_PROMPT.format(n=5) == (
        "You are an AI who is an expert at condensing information into concise numbered, "
        "bullet points.\n"
        "Please condense the following insights into a maximum of 5 bullet points, each "
        "starting with a number followed by a period.\n"
        "Include all the appropriate index numbers referencing the information in square "
        "brackets, listed at the end of each insight.\n"
        "Do not include multiple, unrelated insights in one bullet point. Ensure each insight "
        "explicitly mentions the subject by name."
    )
    assert prompts.DEFAULT_CONDENSE_PROMPT.format(insights="1. x [1]") == (
        "Please condense the insights generated in this list:\n\n1. x [1]\n"
    )
    assert prompts.DEFAULT_QUESTIONS_SYSTEM_PROMPT.startswith(
        "You are an intelligent AI system designed to reflect on past experiences"
    )
    assert prompts.DEFAULT_QUESTIONS_SYSTEM_PROMPT.endswith(
        "Avoid simple, surface-level questions that can easily be answered by the memories "
        "themselves."
    )
    assert "1. insight [`index number(s) of evidence`]\n" in prompts.DEFAULT_INSIGHTS_SYSTEM_PROMPT
    assert prompts.DEFAULT_INSIGHTS_SYSTEM_PROMPT.endswith(
        "- You MUST be as concise and specific as possible"
    )


def test_batched_prompts_ask_for_the_format_the_parsers_read() -> None:
    statements = ["玛丽亚在学习物理", "克劳斯在写论文"]
    triple_prompt = prompts.DEFAULT_BATCH_TRIPLE_PROMPT.format(
        statements=format_numbered(statements, start=1), n=2
    )
    shown = "Statements:\n1. 玛丽亚在学习物理\n2. 克劳斯在写论文\n\nWrite one triple"
    assert shown in triple_prompt
    assert '"N. (subject, predicate, object)"' in triple_prompt
    assert parse_triples("1. (玛丽亚, 学习, 物理)\n2. (克劳斯，写，论文)", 2) == [
        ("玛丽亚", "学习", "物理"),
        ("克劳斯", "写", "论文"),
    ]
    importance_prompt = prompts.DEFAULT_BATCH_IMPORTANCE_PROMPT.format(**CHINESE)
    shown = "Memories:\n1. [event] 玛丽亚在吃早餐\n2. [chat] 克劳斯：早上好！\n\nRate"
    assert shown in importance_prompt
    assert '"N. rating"' in importance_prompt
    assert parse_ratings("1. 2\n2. 3", 2) == [2, 3]


def test_reflection_prompts_round_trip_with_chinese_statements() -> None:
    statements = ["玛丽亚在学习物理", "克劳斯在写论文", "玛丽亚熬夜复习"]
    insight_prompt = prompts.DEFAULT_INSIGHTS_PROMPT.format(
        statements=format_numbered(statements), n=2
    )
    assert "0. 玛丽亚在学习物理\n1. 克劳斯在写论文\n2. 玛丽亚熬夜复习\n" in insight_prompt
    reply = "玛丽亚非常用功（因为 0, 2）\n2. 克劳斯专注于研究 (because of 1)"
    cited = {text: [statements[i] for i in numbers] for text, numbers in parse_insights(reply)}
    assert cited == {
        "玛丽亚非常用功": ["玛丽亚在学习物理", "玛丽亚熬夜复习"],
        "克劳斯专注于研究": ["克劳斯在写论文"],
    }
    focal_prompt = prompts.DEFAULT_FOCAL_POINTS_PROMPT.format(
        statements="\n".join(statements) + "\n", n=2
    )
    assert focal_prompt.endswith("grounded in the statements?\n1)")
    assert parse_focal_points("玛丽亚为什么这么努力？\n2) 克劳斯在研究什么？", 2) == [
        "玛丽亚为什么这么努力？",
        "克劳斯在研究什么？",
    ]
