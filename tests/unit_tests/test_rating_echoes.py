"""A reply that echoes the prompt or names no single rating is no rating, never 1."""

from __future__ import annotations

import pytest

from langchain_genmem.core.errors import ParseError
from langchain_genmem.llm.parsers import parse_rating, parse_ratings
from langchain_genmem.llm.prompts import (
    DEFAULT_BATCH_IMPORTANCE_PROMPT,
    DEFAULT_CHAT_IMPORTANCE_PROMPT,
    DEFAULT_EVENT_IMPORTANCE_PROMPT,
)

FIELDS = {"persona": "Maria Lopez", "persona_description": "A student."}


@pytest.mark.parametrize(
    "reply",
    [
        "on a scale of 1 to 10",
        "1 to 10",
        "1-10",
        "1到10",
        "On the scale of 1 to 10, where 1 is purely mundane and 10 is extremely poignant",
        "1. 1. 玛丽亚的祖母今天去世了",
        "Maybe 3 or 4",
        DEFAULT_EVENT_IMPORTANCE_PROMPT.format(description="Maria turned 18 today", **FIELDS),
        DEFAULT_CHAT_IMPORTANCE_PROMPT.format(description="玛丽亚：我考了95分", **FIELDS),
    ],
)
def test_an_echo_or_no_single_rating_is_no_rating(reply: str) -> None:
    with pytest.raises(ParseError):
        parse_rating(reply)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("7", 7),
        ("Rating: 7", 7),
        ("7/10", 7),
        ("**8**", 8),
        ("评分：6分", 6),
        ("I'd say 3.", 3),
        ("I would rate this a 6 out of 10, as it is 2 times bigger", 6),
        ("8 - a big day for 2 reasons", 8),
        # the model repeats the prompt, then answers
        (DEFAULT_EVENT_IMPORTANCE_PROMPT.format(description="Maria turned 18", **FIELDS)
         + " 9", 9),
    ],
)
def test_real_replies_still_rate(reply: str, expected: int) -> None:
    assert parse_rating(reply) == expected


def test_a_batch_reply_echoing_the_numbered_list_rates_nothing_for_that_item() -> None:
    assert parse_ratings("1. 1. 玛丽亚的祖母今天去世了\n2. 7", 2) == [None, 7]
    assert parse_ratings("1. [event] 玛丽亚的祖母今天去世了\n2. 7", 2) == [None, 7]
    echo = DEFAULT_BATCH_IMPORTANCE_PROMPT.format(
        n=2, memories="1. [event] Maria got 2 letters\n2. [chat] hi\n", **FIELDS)
    assert parse_ratings(echo, 2) == [None, None]
