"""Masks of live items and their fields, and the candidate filter's mask over node rows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from langchain_genmem import ValidationError
from langchain_genmem.numerics.candidate_filter import make_filter
from langchain_genmem.numerics.item_masks import InternedColumn, ItemMasks, ValueTest


def equals(want: Any) -> ValueTest:
    return ValueTest(("eq", type(want), repr(want)),
                     lambda have: have == want and type(have) is type(want))


def anything() -> ValueTest:
    return ValueTest("all", lambda _: True)


def test_values_a_test_can_tell_apart_are_held_apart():
    column = InternedColumn()
    for row, value in enumerate([1, 1.0, True, "1", None, [1], (1,), {"a": 1}, 1, "饺子", "饺子"]):
        column.set(row, value)
    assert column.values == [1, 1.0, True, "1", None, [1], (1,), {"a": 1}, "饺子"]
    assert column.mask(equals(1), 12).tolist() == [True] + [False] * 7 + [True] + [False] * 3
    assert column.mask(equals("饺子"), 11).tolist() == [False] * 9 + [True, True]
    column.clear(0)
    assert column.mask(equals(1), 9).tolist() == [False] * 8 + [True]


def test_equality_with_a_text_is_found_by_its_code():
    column = InternedColumn()
    for row, value in enumerate(["饺子", "面条", "饺子", 1, None]):
        column.set(row, value)
    never = ValueTest("饺子 by code", lambda v: pytest.fail("no call per value"), only="饺子")
    assert column.mask(never, 7).tolist() == [True, False, True, False, False, False, False]
    absent = ValueTest("茶 by code", lambda v: pytest.fail("no call per value"), only="茶")
    assert not column.mask(absent, 5).any()


def test_a_tests_verdicts_are_kept_and_extended_to_new_values():
    calls: list[Any] = []
    test = ValueTest("n>2", lambda v: calls.append(v) or (isinstance(v, int) and v > 2))
    column = InternedColumn()
    for row, value in enumerate([1, 3, 3, 5]):
        column.set(row, value)
    assert column.mask(test, 4).tolist() == [False, True, True, True]
    assert calls == [1, 3, 5]  # once per distinct value
    column.set(4, 0)
    column.set(5, 3)
    assert column.mask(test, 6).tolist() == [False, True, True, True, False, True]
    assert calls == [1, 3, 5, 0]


def test_items_put_superseded_and_retired():
    masks = ItemMasks()
    masks.put(0, ("用户", "张三"), {"topic": "食物"}, indexed=True)
    masks.put(1, ("用户", "李四"), {"topic": "食物"}, indexed=False)
    masks.put(3, ("用户", "张三"), {"topic": "工作"}, indexed=True)
    zhang = ValueTest("zhang", lambda ns: ns == ("用户", "张三"))
    food = {"topic": equals("食物")}
    assert masks.select(anything(), {}).tolist() == [True, True, False, True]
    assert masks.select(anything(), {}, rows="ranked").tolist() == [True, False, False, True]
    assert masks.select(zhang, food).tolist() == [True, False, False, False]
    # the field's column was made at the first test; later puts keep it up to date
    masks.retire(0)  # superseded by row 4
    masks.put(4, ("用户", "张三"), {"topic": "食物", "n": 1}, indexed=True)
    assert masks.select(zhang, food).tolist() == [False, False, False, False, True]
    assert masks.select(anything(), {"missing": equals(None)}).tolist() == [
        False, True, False, True, True]
    masks.retire(4)
    masks.retire(4)  # twice is no error
    assert not masks.select(zhang, food).any()
    assert len(masks) == 2


def test_node_mask_keeps_the_rows_it_marks():
    flt = make_filter(node_mask=np.array([True, False, True]))
    created = np.zeros(5)
    codes = np.zeros(5, dtype=np.int8)
    poignancy = np.full(5, 5.0)
    numbers = np.array([1, 2, 3, 4, 5])
    assert flt.active
    kept = flt.mask(created, codes, poignancy, numbers)
    assert kept.tolist() == [True, False, True, False, False]
    calls = []
    lazy = make_filter(node_mask=lambda: calls.append(1) or np.array([False, True]))
    assert lazy.mask(created, codes, poignancy, numbers).tolist() == [False, True, False, False,
                                                                       False]
    assert calls == [1]  # called when the candidates are picked, not before
    both = make_filter(node_ids=["node_1", "node_2"], node_mask=np.array([False, True, True]))
    assert both.mask(created, codes, poignancy, numbers).tolist() == [False, True, False, False,
                                                                       False]
    where, params = both.sql()
    assert "%(f_rows)s" in where and params["f_rows"] == [2, 3]
    merged = make_filter(types=["event"]).merged({"node_mask": np.array([True])})
    assert merged.types == ("event",) and merged.mask_rows().tolist() == [True]


@pytest.mark.parametrize("bad", [np.array([1, 0]), np.zeros((2, 2), dtype=bool), [[True]]])
def test_node_mask_refuses_what_is_not_a_row_mask(bad):
    with pytest.raises(ValidationError, match="node_mask"):
        make_filter(node_mask=bad)


def test_facets_are_ranked_rows_but_not_items():
    masks = ItemMasks()
    masks.put(0, ("书",), {"title": "红楼梦"}, indexed=True)
    masks.put(1, ("书",), {"title": "红楼梦"}, indexed=True, facet=True)  # a second text
    masks.put(2, ("书",), {"title": "西游记"}, indexed=False)
    assert masks.select(anything(), {}).tolist() == [True, False, True]
    assert masks.select(anything(), {}, rows="ranked").tolist() == [True, True, False]
    assert masks.select(anything(), {}, rows="unranked").tolist() == [False, False, True]
    masks.retire(1)
    assert masks.select(anything(), {}, rows="ranked").tolist() == [True, False, False]
    assert masks.select(anything(), {}).tolist() == [True, False, True]
