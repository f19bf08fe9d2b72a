"""Tests of langchain_genmem.llm.parsers: every reader on well-formed and malformed replies."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from langchain_genmem.core.errors import GenMemError, ParseError, ValidationError
from langchain_genmem.core.text import set_text_limits
from langchain_genmem.llm.parsers import (
    format_numbered,
    parse_focal_points,
    parse_insights,
    parse_rating,
    parse_ratings,
    parse_triple,
    parse_triples,
)

# --- parse_rating ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("7", 7),
        ("Rating: 7", 7),
        ("7/10", 7),
        ("**7**", 7),
        ("Rate: 7.", 7),
        ("评分：7", 7),
        ("评分为8分（满分10分）", 8),
        ("满分10分，我给7分", 7),
        ("I'd say 8 out of 10", 8),
        ("```\n6\n```", 6),
        ('```json\n{"output": "4"}\n```', 4),
        ("`3`", 3),
        ("  9  \n", 9),
        ("1. 7", 7),  # a numbered answer: the number after the item number
        ("7. It is a turning point in her life.", 7),
        ("On a scale of 1 to 10, I'd give it 3", 3),
        ("Between 1 and 10: 2", 2),
        ("1-10 scale: 6", 6),
        ("Rating: 5\nReason: she has 2 exams tomorrow", 5),
        ("<think>Maybe 2, or 3?</think>\n9", 9),
        ("- 7", 7),  # a bullet, not a negative number
        ("７", 7),  # full-width digit
    ],
)
def test_parse_rating_reads_common_shapes(reply: str, expected: int) -> None:
    assert parse_rating(reply) == expected


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("4/5", 8),  # denominators are honoured
        ("3 out of 5", 6),
        ("70%", 7),
        ("15/20", 8),  # 7.5 rounds half up
        ("0", 1),  # clamped
        ("15", 10),  # clamped
        ("100", 10),
        ("12/10", 10),  # honoured, then clamped
        ("7.5", 8),  # round half up
        ("6.5", 7),  # not banker's rounding
        ("7.49", 7),
        ("2.5/5", 5),
    ],
)
def test_parse_rating_out_of_range_and_decimals(reply: str, expected: int) -> None:
    assert parse_rating(reply) == expected


def test_parse_rating_other_scales() -> None:
    assert parse_rating("4", low=0, high=5) == 4
    assert parse_rating("9", low=0, high=5) == 5
    assert parse_rating("0", low=0, high=5) == 0
    assert parse_rating("8/10", low=0, high=5) == 4
    assert parse_rating("0 to 5: 3", low=0, high=5) == 3
    with pytest.raises(ValidationError):
        parse_rating("3", low=5, high=1)


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "   ",
        "I cannot rate this.",
        "这件事很难评价。",
        "1 to 10",
        "```\n```",
        "<think>7</think>",
    ],
)
def test_parse_rating_without_a_number_raises(reply: str) -> None:
    with pytest.raises(ParseError) as caught:
        parse_rating(reply)
    assert caught.value.reply == reply
    assert isinstance(caught.value, GenMemError)
    assert "no rating between 1 and 10" in str(caught.value)


# --- parse_ratings --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "n", "expected"),
    [
        ("1. 7\n2: 3", 2, [7, 3]),
        ("1) 7\n2) 3\n3) 5", 3, [7, 3, 5]),
        ("[7, 3]", 2, [7, 3]),
        ("```json\n[7, 3, 9]\n```", 3, [7, 3, 9]),
        ('{"1": 7, "2": "3/10"}', 2, [7, 3]),
        ('{"memory 2": 5, "memory 1": 4}', 2, [4, 5]),
        ("Memory 2: 5\nMemory 1: 4", 2, [4, 5]),
        ("第1条：7\n第2条：3", 2, [7, 3]),
        ("1：7\n2：3", 2, [7, 3]),
        ("1、7\n2、3", 2, [7, 3]),
        ("(1) 7\n(2) 3", 2, [7, 3]),
        ("[1] 7\n[2] 3", 2, [7, 3]),
        ("- 1. 2\n- 2. 8", 2, [2, 8]),
        ("**1.** 7\n**2.** 3", 2, [7, 3]),
        ("1. Rating: 7\n2. Rating: 8/10", 2, [7, 8]),
        ("7\n3\n5", 3, [7, 3, 5]),
        ("7, 3, 5", 3, [7, 3, 5]),
        ("7/10 3/10", 2, [7, 3]),
        ("Here are the ratings:\n7\n3", 2, [7, 3]),
        ("以下是评分：\n1. 7\n2. 3", 2, [7, 3]),
        ("1. 1.5\n2. 2.5", 2, [2, 3]),
        ("1. 7", 1, [7]),
        ("", 0, []),
    ],
)
def test_parse_ratings_reads_batched_shapes(
    reply: str, n: int, expected: list[int | None]
) -> None:
    assert parse_ratings(reply, n) == expected


@pytest.mark.parametrize(
    ("reply", "n", "expected"),
    [
        ("", 3, [None, None, None]),
        ("I'm sorry, I can't rate these.", 2, [None, None]),
        ("1. 7\n2. not sure\n3. 5", 3, [7, None, 5]),
        ("1. 7\n3. 5", 3, [7, None, 5]),  # a missing line
        ("0. 7\n1. 3\n2. 5", 3, [7, 3, 5]),  # numbered from 0: shifted
        ("0. 7\n1. 3\n2. 5\n3. 9", 3, [3, 5, 9]),  # 0 to n: 0 is out of range
        ("1. 7\n2. 3\n7. 9\n12. 4", 2, [7, 3]),  # numbers beyond n are ignored
        ("1. 7\n1. 2\n2. 3", 2, [7, 3]),  # duplicates: the first wins
        ("1. no idea\n1. 4\n2. 3", 2, [4, 3]),  # ... the first readable one
        ("1. 0\n2. 15\n3. 7.5", 3, [1, 10, 8]),  # out of range: clamped; decimals rounded
        ("7\n1. 4\n2. 5", 2, [4, 5]),  # unnumbered lines are ignored among numbered ones
        ("Sure! I rated the 3 memories.\n7\n3\n5", 3, [7, 3, 5]),  # stray number first
        ("7\n3", 3, [7, 3, None]),  # too few, in order
        ("第一条很重要", 1, [None]),
    ],
)
def test_parse_ratings_on_malformed_replies(
    reply: str, n: int, expected: list[int | None]
) -> None:
    assert parse_ratings(reply, n) == expected


def test_parse_ratings_scale_and_count() -> None:
    assert parse_ratings("1. 4\n2. 9", 2, low=0, high=5) == [4, 5]
    assert len(parse_ratings("1. 4\n2. 9\n3. 8", 5)) == 5
    with pytest.raises(ValidationError):
        parse_ratings("1. 4", -1)


# --- parse_focal_points ---------------------------------------------------------------


def test_parse_focal_points_strips_numbering_bullets_and_quotes() -> None:
    reply = (
        "Here are the questions:\n"
        "1) What does Klaus Mueller care about most?\n"
        "2. \"Why is Maria Lopez studying so late?\"\n"
        "- How does Isabella feel about the party?\n"
        "* Who helps Maria?\n"
        "Q5: Where does Klaus work?\n"
        "\n"
        "“玛丽亚为什么总是熬夜？”\n"
        "第7条：克劳斯的研究进展如何？\n"
    )
    assert parse_focal_points(reply) == [
        "What does Klaus Mueller care about most?",
        "Why is Maria Lopez studying so late?",
        "How does Isabella feel about the party?",
        "Who helps Maria?",
        "Where does Klaus work?",
        "玛丽亚为什么总是熬夜？",
        "克劳斯的研究进展如何？",
    ]


def test_parse_focal_points_continues_a_primed_reply_and_limits() -> None:
    # The prompt ends with "1)", so the first question arrives unnumbered.
    reply = "What is Maria working on?\n2) Who is Klaus?\n3) Why?\n4) Where?"
    assert parse_focal_points(reply, 3) == ["What is Maria working on?", "Who is Klaus?", "Why?"]
    assert parse_focal_points(reply, 0) == []


def test_parse_focal_points_drops_duplicates_and_empties() -> None:
    reply = "1) What is Maria doing?\n2) what is  MARIA doing?\n3)\n4) ---\n5) 42\n6) Who?"
    assert parse_focal_points(reply) == ["What is Maria doing?", "Who?"]


def test_parse_focal_points_splits_inline_numbering() -> None:
    reply = "1) What a? 2) What b? 3) What c?"
    assert parse_focal_points(reply) == ["What a?", "What b?", "What c?"]


@pytest.mark.parametrize("reply", ["", "   \n\n", "Questions:", "1)\n2)"])
def test_parse_focal_points_empty(reply: str) -> None:
    assert parse_focal_points(reply) == []


# --- parse_insights -------------------------------------------------------------------

SEED_004_INSIGHTS = [
    (
        "Missing data in user_dims table for country may impact accuracy of data analysis "
        "and decision-making for marketing campaigns and user segmentation.",
        [7, 52, 47],
    ),
    (
        "Inconsistent information in user_dims table may lead to incorrect analysis and "
        "decision-making for user segmentation and marketing campaigns.",
        [22, 40],
    ),
    (
        "Duplicated and inconsistent data in user_dims table may impact accuracy of "
        "data-driven decisions for user segmentation and marketing campaigns.",
        [3, 57, 62, 42],
    ),
    (
        "Large number of missing values in bitcoin_price_data table may affect accuracy "
        "of analysis and decision-making for cryptocurrency investments.",
        [14],
    ),
]


def test_parse_insights_seed_004_example() -> None:
    # The reply of the Python design's example, rebuilt line by line: "N. insight [a, b, c]".
    reply = "\n".join(
        f"{number}. {text} [{', '.join(map(str, cited))}]"
        for number, (text, cited) in enumerate(SEED_004_INSIGHTS, 1)
    )
    assert reply.splitlines()[3] == (
        "4. Large number of missing values in bitcoin_price_data table may affect accuracy "
        "of analysis and decision-making for cryptocurrency investments. [14]"
    )
    assert parse_insights(reply) == SEED_004_INSIGHTS


def test_parse_insights_original_generative_agents_style() -> None:
    # The prompt ends with "1.", so the first insight arrives unnumbered.
    reply = (
        "Klaus Mueller is dedicated to his research on gentrification (because of 1, 2, 8, 15)\n"
        "2. Klaus Mueller enjoys reading (because of 3,5)\n"
        "3. Maria Lopez is a hard-working student (because of statements 0 and 4)."
    )
    assert parse_insights(reply) == [
        ("Klaus Mueller is dedicated to his research on gentrification", [1, 2, 8, 15]),
        ("Klaus Mueller enjoys reading", [3, 5]),
        ("Maria Lopez is a hard-working student", [0, 4]),
    ]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("1. Maria studies [`3`]", ("Maria studies", [3])),
        ("1. Maria studies [`3`, `5`]", ("Maria studies", [3, 5])),
        ("Maria studies [3, 5].", ("Maria studies", [3, 5])),
        ("Maria studies. [3, 5]", ("Maria studies.", [3, 5])),
        ("- Maria studies [1]", ("Maria studies", [1])),
        ("* Maria studies (1, 2)", ("Maria studies", [1, 2])),
        ("Maria studies [1, 1, 2, 1]", ("Maria studies", [1, 2])),
        ("Maria studies [2] [1, 2]", ("Maria studies", [2, 1])),
        ("Maria studies [1-3]", ("Maria studies", [1, 2, 3])),
        ("Maria studies because of 4, 6", ("Maria studies", [4, 6])),
        ("Maria studies (because of 1, 5", ("Maria studies", [1, 5])),
        ("玛丽亚热爱学习【1，2】", ("玛丽亚热爱学习", [1, 2])),
        ("克劳斯专注于研究（因为 1, 2）", ("克劳斯专注于研究", [1, 2])),
        ("克劳斯专注于研究（因为1、3）。", ("克劳斯专注于研究", [1, 3])),
        ("2、伊莎贝拉喜欢办派对 [第4条, 第5条]", ("伊莎贝拉喜欢办派对", [4, 5])),
        ('"Maria is kind" [0]', ("Maria is kind", [0])),
        ("Maria is 25 (age)", ("Maria is 25 (age)", [])),
        ("Maria left because of 2 friends", ("Maria left because of 2 friends", [])),
        ("Klaus studies gentrification", ("Klaus studies gentrification", [])),
    ],
)
def test_parse_insights_variants(line: str, expected: tuple[str, list[int]]) -> None:
    assert parse_insights(line) == [expected]


def test_parse_insights_merges_duplicates_and_drops_preambles() -> None:
    reply = (
        "Here are the insights:\n"
        "\n"
        "1. Maria Lopez is a hard-working student [1, 2]\n"
        "2. Klaus likes art [4]\n"
        "3. maria lopez is a  HARD-WORKING student. [2, 3]\n"
        "以下是洞察：\n"
        "4. Klaus likes art (because of 4, 9)\n"
    )
    assert parse_insights(reply) == [
        ("Maria Lopez is a hard-working student", [1, 2, 3]),
        ("Klaus likes art", [4, 9]),
    ]


def test_parse_insights_citation_on_its_own_line_joins_the_insight_above() -> None:
    reply = "[5]\n1. Maria likes tea\n   [1, 2]\n2. Klaus likes coffee [3]"
    assert parse_insights(reply) == [("Maria likes tea", [1, 2]), ("Klaus likes coffee", [3])]


@pytest.mark.parametrize("reply", ["", "\n\n", "Insights:", "[1, 2]", "1.\n2."])
def test_parse_insights_empty(reply: str) -> None:
    assert parse_insights(reply) == []


# --- parse_triple / parse_triples -----------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        "(Maria, plan, study)",
        "Maria, plan, study",
        "Maria, plan, study.",
        '["Maria", "plan", "study"]',
        '{"subject": "Maria", "predicate": "plan", "object": "study"}',
        '{"Subject": "Maria", "Predicate": "plan", "Object": "study"}',
        '{"triple": ["Maria", "plan", "study"]}',
        "Subject: Maria\nPredicate: plan\nObject: study",
        "Here is the triple:\n(Maria, plan, study)",
        "Output: (Maria, plan, study)",
        "Triple: Maria, plan, study",
        "```\n(Maria, plan, study)\n```",
        "(\"Maria\", 'plan', study)",
        "[Maria, plan, study]",
        "1. (Maria, plan, study)",
    ],
)
def test_parse_triple_shapes(reply: str) -> None:
    assert parse_triple(reply) == ("Maria", "plan", "study")


def test_parse_triple_chinese_and_long_objects() -> None:
    assert parse_triple("（玛丽亚，计划，学习）") == ("玛丽亚", "计划", "学习")
    assert parse_triple("主语：玛丽亚\n谓语：计划\n宾语：学习") == ("玛丽亚", "计划", "学习")
    assert parse_triple("(Maria, study, math, physics)") == ("Maria", "study", "math, physics")


def test_parse_triple_fallback_subject() -> None:
    assert parse_triple("(plan, study)", "Maria") == ("Maria", "plan", "study")
    assert parse_triple("(, plan, study)", "Maria") == ("Maria", "plan", "study")
    assert parse_triple('{"predicate": "plan", "object": "study"}', "Maria") == (
        "Maria",
        "plan",
        "study",
    )
    assert parse_triple("Predicate: plan\nObject: study", "Maria") == ("Maria", "plan", "study")
    assert parse_triple("(plan, study)") is None


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "I don't know.",
        "Maria is studying",
        "(Maria)",
        "(Maria, , study)",
        '{"subject": "Maria"}',
        "[1, [2]]",
        "Subject: Maria",
    ],
)
def test_parse_triple_nothing_usable(reply: str) -> None:
    assert parse_triple(reply) is None


def test_parse_triples_batched() -> None:
    reply = (
        "Here are the triples:\n"
        "1. (Maria Lopez, study, physics)\n"
        "2. (Klaus Mueller, write, paper)\n"
        "3. (伊莎贝拉，准备，派对)\n"
    )
    assert parse_triples(reply, 3) == [
        ("Maria Lopez", "study", "physics"),
        ("Klaus Mueller", "write", "paper"),
        ("伊莎贝拉", "准备", "派对"),
    ]


ABC, DEF, GHI = ("a", "b", "c"), ("d", "e", "f"), ("g", "h", "i")


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("2. (d, e, f)\n1. (a, b, c)", [ABC, DEF, None]),
        ("1. (a, b, c)\n2. nothing\n3. (g, h, i)", [ABC, None, GHI]),
        ("0. (a, b, c)\n1. (d, e, f)\n2. (g, h, i)", [ABC, DEF, GHI]),
        ("(a, b, c)\n(d, e, f)", [ABC, DEF, None]),
        ('[["a", "b", "c"], ["d", "e", "f"], ["g", "h", "i"]]', [ABC, DEF, GHI]),
        ('{"1": "(a, b, c)", "3": {"subject": "g", "predicate": "h", "object": "i"}}',
         [ABC, None, GHI]),
        ("1. (a, b, c)\n1. (x, y, z)", [ABC, None, None]),
        ("1. (a, b, c)\n2. (d, e, f)\n3. (g, h, i)\n4. (x, y, z)", [ABC, DEF, GHI]),
        ("", [None, None, None]),
    ],
)
def test_parse_triples_malformed(
    reply: str, expected: list[tuple[str, str, str] | None]
) -> None:
    assert parse_triples(reply, 3) == expected


def test_parse_triples_single_and_fallback() -> None:
    assert parse_triples('["Maria", "plan", "study"]', 1) == [("Maria", "plan", "study")]
    assert parse_triples("1. (plan, study)\n2. (Klaus, read, book)", 2, "Maria") == [
        ("Maria", "plan", "study"),
        ("Klaus", "read", "book"),
    ]


# --- format_numbered ------------------------------------------------------------------


def test_format_numbered() -> None:
    assert format_numbered(["a", "b"]) == "0. a\n1. b\n"
    assert format_numbered(["a", "b"], start=1) == "1. a\n2. b\n"
    assert format_numbered([]) == ""
    assert format_numbered(["玛丽亚在学习", "line\nbreak  and   spaces"]) == (
        "0. 玛丽亚在学习\n1. line break and spaces\n"
    )


def test_format_numbered_round_trips_through_the_parsers() -> None:
    statements = ["Maria is studying", "Klaus is writing", "玛丽亚在喝咖啡"]
    shown = format_numbered(statements)
    cited = parse_insights("Maria works hard [0, 2]")[0][1]
    assert [statements[i] for i in cited] == ["Maria is studying", "玛丽亚在喝咖啡"]
    assert parse_ratings(shown, 3) == [None, None, None]  # no ratings in the statements
    assert parse_focal_points(shown) == statements


# --- hostile input ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        "1" * 5000,  # longer than Python's int-from-string limit
        "1" * 5000 + ". x",
        "[" * 3000 + "1" + "]" * 3000,  # deeper than json can nest
        '{"a":' * 900 + "1" + "}" * 900,
        "7 " * 3000 + "x",  # a regex that backtracks would take forever here
        "because of " * 2000 + "x",
        "[" + "1, " * 3000 + "x]",
    ],
)
def test_hostile_replies_neither_crash_nor_hang(reply: str) -> None:
    ratings = parse_ratings(reply, 2)
    assert len(ratings) == 2
    assert all(rating is None or 1 <= rating <= 10 for rating in ratings)
    triple = parse_triple(reply)
    assert triple is None or (len(triple) == 3 and all(triple))
    assert len(parse_triples(reply, 2)) == 2
    assert all(isinstance(text, str) for text, _ in parse_insights(reply))
    assert len(parse_focal_points(reply, 3)) <= 3
    try:
        assert parse_rating(reply) in range(1, 11)
    except ParseError:
        pass


# --- linear time on adversarial replies (quadratic shapes) -------------------------------------
# The reply limit is raised above each case so that the parsers read all of it; the timeout
# marker is a hang guard (a quadratic parser takes minutes on these), not a timing assertion.

ADVERSARIAL = {
    "200 KB of newlines": ("\n" * 200_000, parse_triple),
    "lines of spaces": ((" " * 99 + "\n") * 2_000, parse_triple),
    "repeated code fences": ("```\n" * 50_000, parse_triple),
    "open bracket and commas": ("(" + "a," * 100_000, parse_triple),
    "a field line of spaces": ("subject: a" + " " * 100_000 + "b", parse_triple),
    "50k citations on one line": ("Maria likes art " + "[1] " * 50_000, parse_insights),
    "50k numbers in one citation": (
        "Maria likes art [" + ", ".join(map(str, range(50_000))) + "]",
        parse_insights,
    ),
    "nested quotes": ('"' * 100_000 + "a" + '"' * 100_000, parse_insights),
    "a numbered line of spaces": ("1" + " " * 100_000 + "x", parse_focal_points),
    "ratings over newlines": ("\n" * 200_000, lambda text: parse_ratings(text, 5)),
}


@pytest.fixture
def whole_replies() -> Iterator[None]:
    previous = set_text_limits(reply=1_000_000)
    yield
    set_text_limits(**previous.as_dict())


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", sorted(ADVERSARIAL))
def test_adversarial_replies_parse_in_linear_time(case: str, whole_replies: None):
    text, parse = ADVERSARIAL[case]
    parse(text)


def test_many_citations_are_all_read_in_order(whole_replies: None):
    reply = "Maria likes art " + " ".join(f"[{n}]" for n in range(3_000, 0, -1))
    [(insight, cited)] = parse_insights(reply)
    assert insight == "Maria likes art"
    assert cited == list(range(3_000, 0, -1))


def test_a_field_line_value_keeps_its_inner_spaces():
    assert parse_triple("subject: Maria  Lopez \npredicate: study\nobject: physics") == (
        "Maria  Lopez", "study", "physics"
    )


def test_a_rating_of_infinite_over_infinite_is_no_rating():
    with pytest.raises(ParseError):
        parse_rating("1" * 400 + "/" + "1" * 400)
    assert parse_rating("1" * 400) == 10


def test_a_field_value_may_be_on_the_next_line():
    reply = "Subject:\nMaria Lopez\nPredicate:\nstudy\nObject:\nphysics"
    assert parse_triple(reply) == ("Maria Lopez", "study", "physics")
