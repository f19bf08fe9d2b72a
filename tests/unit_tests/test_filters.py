"""The filter grammar: what it accepts, what it evaluates to, and what it refuses."""

from __future__ import annotations

import builtins

import pandas as pd
import pytest

from langchain_genmem.core.errors import ValidationError
from langchain_genmem.filters import (
    Column,
    Compare,
    Constant,
    Join,
    Member,
    Not,
    apply_filter,
    check_columns,
    parse_filter,
)


@pytest.fixture
def df() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "node_id": ["node_1", "node_2", "node_3", "node_4"],
            "type": ["event", "thought", "thought", "chat"],
            "relevance": [0.1, 0.6, 0.9, 0.5],
            "poignancy": [1, 8, 3, 5],
            "description": ["玛丽亚在学习", "it's raining", 'say "hi"', "x"],
            "created": pd.to_datetime(
                ["2023-02-13 09:00", "2023-02-13 12:00", "2023-02-13 15:00", "2023-02-14 00:00"]
            ),
        }
    )


def ids(df: pd.DataFrame, text: str) -> list[str]:
    return list(apply_filter(df, text)["node_id"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('relevance > 0.5 and type == "thought"', ["node_2", "node_3"]),
        ("relevance >= 0.6", ["node_2", "node_3"]),
        ("relevance <= 0.5", ["node_1", "node_4"]),
        ("relevance < 0.5", ["node_1"]),
        ("poignancy != 8", ["node_1", "node_3", "node_4"]),
        ("0.5 < relevance", ["node_2", "node_3"]),
        ('type in ["event", "chat"]', ["node_1", "node_4"]),
        ('type not in ["event", "chat"]', ["node_2", "node_3"]),
        ("type in []", []),
        ("poignancy in [1, 5]", ["node_1", "node_4"]),
        ("not relevance > 0.5", ["node_1", "node_4"]),
        ("not not relevance > 0.5", ["node_2", "node_3"]),
        ("relevance < 0.2 or relevance > 0.8", ["node_1", "node_3"]),
        ('(relevance < 0.2 or relevance > 0.8) and type == "thought"', ["node_3"]),
        ('relevance < 0.2 or relevance > 0.8 and type == "thought"', ["node_1", "node_3"]),
        ("relevance > 0.5 AND NOT type == 'event' Or poignancy == 5",
         ["node_2", "node_3", "node_4"]),
        ("description == '玛丽亚在学习'", ["node_1"]),
        ("description == 'it\\'s raining'", ["node_2"]),
        ('description == "say \\"hi\\""', ["node_3"]),
        ('created > "2023-02-13 12:30"', ["node_3", "node_4"]),
        ("poignancy > 1e0", ["node_2", "node_3", "node_4"]),
        ("relevance > -1", ["node_1", "node_2", "node_3", "node_4"]),
        ("relevance > .55", ["node_2", "node_3"]),
        ("poignancy == relevance", []),
        ('type == 1', []),
    ],
)
def test_grammar_evaluates(df: pd.DataFrame, text: str, expected: list[str]) -> None:
    assert ids(df, text) == expected


def test_parse_builds_a_tree() -> None:
    expr = parse_filter('relevance > 0.5 and not type in ["chat"] or poignancy == 3')
    assert expr == Join(
        "or",
        (
            Join(
                "and",
                (
                    Compare(Column("relevance"), ">", Constant(0.5)),
                    Not(Member(Column("type"), ("chat",))),
                ),
            ),
            Compare(Column("poignancy"), "==", Constant(3)),
        ),
    )
    assert expr.columns == {"relevance", "type", "poignancy"}
    assert isinstance(parse_filter("poignancy == 3").right.value, int)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os')",
        "__import__('os').system('echo pwned')",
        "relevance.__class__",
        "relevance.__class__ == 1",
        "df.eval('1')",
        "df.query('relevance > 0')",
        "open('x')",
        "open('x') == 1",
        "[x for x in y]",
        "lambda: 1",
        "(lambda: 1)() == 1",
        "a[0]",
        "relevance[0] > 1",
        "relevance + 1 > 2",
        "relevance > 0.5 and",
        "relevance > 0.5;",
        "relevance > 0.5; import os",
        "relevance",
        "1 < 2",
        "'a' == 'a'",
        "relevance = 0.5",
        "relevance > 0.5 && type == 'event'",
        "type in ('event',)",
        "type in [relevance]",
        "relevance > f'x'",
        "`relevance` > 0",
        "@x > 1",
        "relevance > 0.5 if True else 1",
        "",
        "   ",
        "(" * 990 + "relevance > 1" + ")" * 989,
        "(" * 1000 + "relevance > 1" + ")" * 1000,
    ],
)
def test_anything_outside_the_grammar_is_refused(df: pd.DataFrame, text: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("eval/exec must never run")

    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    monkeypatch.setattr(pd.DataFrame, "query", forbidden)
    monkeypatch.setattr(pd.DataFrame, "eval", forbidden)
    with pytest.raises(ValidationError) as info:
        apply_filter(df, text)
    assert str(info.value).startswith("filter:")
    assert info.value.field == "filter"


def test_messages_say_where_and_what_is_allowed() -> None:
    with pytest.raises(ValidationError, match=r"unexpected '\.' at position 9 .*and / or / not"):
        parse_filter("relevance.__class__")
    with pytest.raises(ValidationError, match=r"cannot read 'open\(1\)' at position 0"):
        parse_filter("open(1)")
    with pytest.raises(ValidationError, match="needs a column on one side"):
        parse_filter("1 < 2")


def test_unknown_column_is_named_with_the_known_ones(df: pd.DataFrame) -> None:
    known = r"unknown column '__class__'; columns are node_id, type"
    with pytest.raises(ValidationError, match=known):
        apply_filter(df, "__class__ > 1")
    with pytest.raises(ValidationError, match="unknown column 'score'"):
        check_columns(parse_filter("score > 1 or relevance > 1"), df.columns)


@pytest.mark.parametrize("text", ["type < 1", "created > 5", "description > 0.5"])
def test_incomparable_values_are_a_validation_error(df: pd.DataFrame, text: str) -> None:
    with pytest.raises(ValidationError, match="cannot compare"):
        apply_filter(df, text)


def test_too_long_and_not_text() -> None:
    with pytest.raises(ValidationError, match="longer than"):
        parse_filter("relevance > 1 or " * 200 + "relevance > 1")
    with pytest.raises(ValidationError, match="expected a text"):
        parse_filter(42)  # type: ignore[arg-type]


def test_deep_but_valid_nesting_parses(df: pd.DataFrame) -> None:
    assert ids(df, "(" * 900 + "relevance > 0.8" + ")" * 900) == ["node_3"]


def test_missing_values_never_pass(df: pd.DataFrame) -> None:
    df.loc[1, "relevance"] = float("nan")
    assert ids(df, "relevance > 0.5") == ["node_3"]
    assert ids(df, "not relevance > 0.5") == ["node_1", "node_2", "node_4"]


@pytest.mark.parametrize(
    "text",
    ["poignancy > " + "9" * 310, "relevance == -" + "9" * 310, "poignancy < 1e999",
     "poignancy in [1, " + "9" * 400 + "]"],
)
def test_numbers_beyond_a_float_are_a_validation_error(df: pd.DataFrame, text: str) -> None:
    with pytest.raises(ValidationError, match=r"out of range") as error:
        apply_filter(df, text)
    assert error.value.field == "filter"


def test_integers_beyond_int64_compare_as_floats(df: pd.DataFrame) -> None:
    assert ids(df, "poignancy < " + "9" * 300) == ["node_1", "node_2", "node_3", "node_4"]
    assert ids(df, "poignancy > 99999999999999999999") == []
